package rollout

import (
	"context"
	"log/slog"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/codapipe/codapipe/pkg/vmpool/poolfile"
)

// TestOpenRunFailureReturnsAnError: a run whose VM pool cannot be made
// (here: no backend) fails with an error, after closing what it had
// opened (the outage breaker) — not with a panic on the way out.
func TestOpenRunFailureReturnsAnError(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	endpoint := model.Config{BaseURL: "http://127.0.0.1:1/v1", Model: "m"}
	cfg := Config{App: "ChimeraX", Run: "r", Group: 1, Samples: 1, Planner: endpoint, Executor: endpoint,
		PlannerCoords: uitars.Grid(), ExecutorCoords: uitars.Resized(), Store: store, LocalQueue: true,
		Pool: poolfile.Config{}, Log: slog.New(slog.DiscardHandler)}
	op, err := openRun(ctx, cfg, &planned{pub: &Publisher{}})
	if err == nil || op != nil {
		t.Fatalf("openRun without a pool: %v, %v; want an error", op, err)
	}
	t.Logf("error: %v", err)
}
