package bus_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/poll"
)

func TestEvery(t *testing.T) {
	ctx := context.Background()
	var calls atomic.Int32
	var running atomic.Bool
	stop := bus.Every(ctx, time.Millisecond, func(ctx context.Context) {
		running.Store(true)
		defer running.Store(false)
		calls.Add(1)
		time.Sleep(time.Millisecond)
	})
	poll.Until(t, "three calls at an interval of 1 ms", 10*time.Second, func() bool { return calls.Load() >= 3 })
	stop()
	if running.Load() {
		t.Fatal("f still running after stop returned")
	}
	n := calls.Load()
	time.Sleep(10 * time.Millisecond)
	stop() // again: nothing
	if calls.Load() != n {
		t.Fatalf("%d calls after stop", calls.Load()-n)
	}

	// f ends the loop by cancelling the context it was started with.
	lctx, end := context.WithCancel(ctx)
	calls.Store(0)
	stop = bus.Every(lctx, time.Millisecond, func(context.Context) {
		calls.Add(1)
		end()
	})
	// Wait for the first call's cancel rather than for a guessed time: on a
	// loaded machine the ticker's goroutine may not have run within 20 ms,
	// and stop would end the loop before its first call.
	select {
	case <-lctx.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("no call within 10s at an interval of 1 ms")
	}
	stop()
	if calls.Load() != 1 {
		t.Fatalf("%d calls, want 1: the first cancelled the loop's context", calls.Load())
	}

	// No interval, no calls.
	stop = bus.Every(ctx, 0, func(context.Context) { t.Error("called with an interval of 0") })
	time.Sleep(5 * time.Millisecond)
	stop()
}
