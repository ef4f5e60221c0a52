//go:build race

package agent_test

// raceEnabled: screenshots are ~10× slower under the race detector, so the
// every-task tests run one task per app; `make test` runs them in full
// without it (see the Makefile).
const raceEnabled = true
