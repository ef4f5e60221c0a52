//go:build !race

package rollout

// acceptRace: see accept_race_on_test.go.
const acceptRace = false
