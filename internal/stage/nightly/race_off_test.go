//go:build !race

package nightly

const raceEnabled = false
