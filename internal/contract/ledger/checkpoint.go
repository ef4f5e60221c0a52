package ledger

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrCheckpointChanged is returned by Bind when a run is invoked again
// with another planner checkpoint than the one it was started with.
var ErrCheckpointChanged = errors.New("the run was started with another planner checkpoint")

// checkpointRecord is the value of "<run>.checkpoint".
type checkpointRecord struct {
	Planner string `json:"planner"`
}

// Bind ties the run to the planner checkpoint its episodes are sampled
// from: the first invocation of a run records it ("<run>.checkpoint"),
// every later one must have the same, or Bind fails with an error
// wrapping ErrCheckpointChanged that names both. A run is one policy: its
// episodes (and the outcome groups built from them) never mix
// checkpoints. A run recorded before checkpoints were bound takes the
// checkpoint of its first invocation that binds one.
func (l *Ledger) Bind(ctx context.Context, run, checkpoint string) error {
	key := bus.KeyToken(run) + ".checkpoint"
	val, err := json.Marshal(checkpointRecord{Planner: checkpoint})
	if err != nil {
		return err
	}
	stored, err := l.createOnce(ctx, run, key, val, "the checkpoint")
	if err != nil {
		return err
	}
	var rec checkpointRecord
	if err := json.Unmarshal(stored, &rec); err != nil {
		return fmt.Errorf("ledger: checkpoint of run %q: %w", run, err)
	}
	if rec.Planner != checkpoint {
		return fmt.Errorf("%w: run %q holds episodes of planner checkpoint %q, this invocation has %q; a run is one checkpoint: give this one a new --run name (or the run's checkpoint with --planner-checkpoint to finish it)",
			ErrCheckpointChanged, run, rec.Planner, checkpoint)
	}
	return nil
}

// Checkpoint returns the planner checkpoint the run is bound to (see
// Bind); ok is false when none is recorded.
func (l *Ledger) Checkpoint(ctx context.Context, run string) (checkpoint string, ok bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, l.timeout)
	defer cancel()
	e, err := l.kv.Get(cctx, bus.KeyToken(run)+".checkpoint")
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("ledger: read the checkpoint of run %q: %w", run, err)
	}
	var rec checkpointRecord
	if err := json.Unmarshal(e.Value(), &rec); err != nil {
		return "", false, fmt.Errorf("ledger: checkpoint of run %q: %w", run, err)
	}
	return rec.Planner, true, nil
}
