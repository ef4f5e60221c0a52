//go:build race

package advantage

// raceEnabled reports a -race build: the heaviest tests take smaller
// samples under the race detector.
const raceEnabled = true
