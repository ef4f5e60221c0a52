package poll

import (
	"sync/atomic"
	"testing"
	"time"
)

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	go func() { // owned: ends after three increments
		for range 3 {
			time.Sleep(time.Millisecond)
			n.Add(1)
		}
	}()
	Until(t, "three increments", time.Minute, func() bool { return n.Load() == 3 })
}

// fatalRecorder records Fatalf instead of stopping the test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (f *fatalRecorder) Helper() {}
func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.msg = format
	panic(f)
}

func TestUntilFailsAfterTheTimeout(t *testing.T) {
	rec := &fatalRecorder{TB: t}
	func() {
		defer func() {
			if r := recover(); r != rec {
				t.Fatalf("Until did not fail the test: %v", r)
			}
		}()
		Until(rec, "never", 20*time.Millisecond, func() bool { return false })
	}()
	if rec.msg == "" {
		t.Fatal("no failure message")
	}
}
