package service

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// TestWorkerStopped: a worker stopped by a signal (its context ended) with
// only the cancellation showing through its error ends well; a failure
// while it runs, a drain, or an error other than the cancellation do not.
func TestWorkerStopped(t *testing.T) {
	stopped, stop := context.WithCancel(context.Background())
	stop()
	running := context.Background()
	canceled := fmt.Errorf("advantage: write manifest: %w", context.Canceled)
	other := errors.New("disk full")
	for _, tc := range []struct {
		name  string
		ctx   context.Context
		drain bool
		err   error
		want  error
	}{
		{"stopped", stopped, false, canceled, nil},
		{"stopped, other error", stopped, false, other, other},
		{"stopped drain", stopped, true, canceled, canceled},
		{"running", running, false, canceled, canceled},
		{"no error", stopped, false, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := WorkerStopped(tc.ctx, tc.drain, tc.err); got != tc.want {
				t.Errorf("WorkerStopped = %v, want %v", got, tc.want)
			}
		})
	}
}
