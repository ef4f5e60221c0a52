//go:build race

package rollout

// acceptRace: the race detector slows the simulator's rendering and the
// model traffic about 20-fold; the acceptance tests scale their timeouts.
const acceptRace = true
