//go:build race

package judge

// raceEnabled reports a -race build: the heaviest tests take smaller
// samples under it (images cost ~10× more to encode and decode); make test
// also runs them in full without it.
const raceEnabled = true
