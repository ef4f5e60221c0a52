// Package clock has the one context-aware wait of codapipe: pauses that
// end early, with the context's error, when the context ends.
package clock

import (
	"context"
	"time"
)

// Sleep waits for d, or until ctx ends (then it returns ctx's error). A d
// of zero or less returns at once, with ctx's error if it has ended.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
