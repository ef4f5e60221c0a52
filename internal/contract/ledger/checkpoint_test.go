package ledger

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// A run is bound to the checkpoint of its first invocation: the same one
// again is fine, another is refused naming both, and other runs are free.
func TestBindCheckpoint(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, l := openLedger(ctx, t, bus.Config{DataDir: t.TempDir()})
	if _, ok, err := l.Checkpoint(ctx, "nightly.a"); ok || err != nil {
		t.Fatalf("Checkpoint of a new run = %v, %v", ok, err)
	}
	steps := []struct {
		run, ckpt string
		changed   bool
	}{
		{"nightly.a", "global_step_100", false},
		{"nightly.a", "global_step_100", false},
		{"nightly.a", "global_step_200", true},
		{"nightly.b", "global_step_200", false},
		{"nightly.a", "", true},
	}
	for _, s := range steps {
		err := l.Bind(ctx, s.run, s.ckpt)
		if errors.Is(err, ErrCheckpointChanged) != s.changed || (!s.changed && err != nil) {
			t.Fatalf("Bind(%s, %q) = %v; want changed=%v", s.run, s.ckpt, err, s.changed)
		}
		if s.changed {
			for _, w := range []string{"global_step_100", `"` + s.ckpt + `"`, "--run"} {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %s", err, w)
				}
			}
		}
	}
	if c, ok, err := l.Checkpoint(ctx, "nightly.a"); c != "global_step_100" || !ok || err != nil {
		t.Fatalf("Checkpoint = %q, %v, %v", c, ok, err)
	}
}
