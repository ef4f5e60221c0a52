//go:build race

package sft

// raceEnabled reports a -race build: the simulated corpus is smaller under
// the race detector (screenshots are about 10x slower to make).
const raceEnabled = true
