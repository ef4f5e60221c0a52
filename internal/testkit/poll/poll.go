// Package poll is the one polling helper of the tests: wait for a
// condition instead of sleeping for a guessed time.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until checks its condition.
const Interval = 5 * time.Millisecond

// Until checks cond every Interval until it holds, and fails the test
// (t.Fatalf, naming what it waited for) when it still does not hold after
// timeout.
func Until(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(Interval)
	}
}
