package bus

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Every calls f every interval, in a goroutine of its own, until ctx ends
// or stop is called: the one periodic loop of the workers (in-progress
// heartbeats, lease renewals, progress lines, periodic writes). The first
// call comes one interval after the start, and none comes once ctx has
// ended; f gets a context that ends with stop (f may end the loop early
// by cancelling the ctx it was started with). stop waits for
// the goroutine to return, so f is not running once stop has returned;
// calling it again does nothing. An interval of zero or less starts
// nothing.
func Every(ctx context.Context, interval time.Duration, f func(ctx context.Context)) (stop func()) {
	if interval <= 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { // owned by the caller: ended and waited for by stop
		defer close(done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if ctx.Err() != nil { // both were ready
					return
				}
				f(ctx)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// KeepInProgress tells the server every interval that m is still being
// worked on, so that its ack wait does not run out and it is not
// delivered to another worker, until ctx ends or stop is called (before
// m is settled). A failed heartbeat is logged as a warning: msg, then
// args and the error.
func KeepInProgress(ctx context.Context, m jetstream.Msg, interval time.Duration, log *slog.Logger, msg string, args ...any) (stop func()) {
	return Every(ctx, interval, func(context.Context) {
		if err := m.InProgress(); err != nil {
			log.Warn(msg, append(args[:len(args):len(args)], "err", err)...)
		}
	})
}
