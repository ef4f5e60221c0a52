//go:build !race

package shard_test

// raceEnabled reports whether the race detector is on.
const raceEnabled = false
