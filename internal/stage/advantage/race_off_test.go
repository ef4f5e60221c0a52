//go:build !race

package advantage

// raceEnabled reports a -race build (see race_on_test.go).
const raceEnabled = false
