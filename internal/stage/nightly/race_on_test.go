//go:build race

package nightly

// raceEnabled reports a -race build: the acceptance night runs one app
// under the race detector (screenshots are about 10x slower to make).
const raceEnabled = true
