package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/redact"
)

// resolveCheckpoints fills the models' checkpoint tags where the flags
// left them empty, from the endpoints' GET /v1/models (the served
// model's "root": see model.ServedCheckpoint). The planner's is
// required: without --planner-checkpoint and without a root for the
// planner model on its endpoint, the run cannot say which policy sampled
// its plans, and it fails with ErrNotConfigured naming
// --planner-checkpoint. The executor's is recorded when known.
func resolveCheckpoints(ctx context.Context, planner, executor *model.Config, log *slog.Logger) error {
	planner.Checkpoint = strings.TrimSpace(planner.Checkpoint)
	executor.Checkpoint = strings.TrimSpace(executor.Checkpoint)
	if planner.Checkpoint == "" {
		tag, err := servedCheckpoint(ctx, *planner, log)
		if err != nil {
			if errors.Is(err, model.ErrNoCheckpoint) {
				return fmt.Errorf("%w: no planner checkpoint: give --planner-checkpoint TAG (e.g. the trainer's global_step_N), or serve the planner so that its GET /v1/models names the checkpoint (vLLM reports the folder it loaded as \"root\"): %v",
					ErrNotConfigured, err)
			}
			return fmt.Errorf("rollout: no --planner-checkpoint, and the planner endpoint's model list could not be read (give --planner-checkpoint TAG to skip it): %w", err)
		}
		planner.Checkpoint = tag
		log.Info("rollout: planner checkpoint read from the endpoint's /v1/models", "checkpoint", tag, "endpoint", redact.URL(planner.BaseURL))
	}
	if executor.Checkpoint == "" {
		if tag, err := servedCheckpoint(ctx, *executor, log); err == nil {
			executor.Checkpoint = tag
		} else {
			log.Debug("rollout: executor checkpoint unknown", "endpoint", redact.URL(executor.BaseURL), "err", err)
		}
	}
	return nil
}

func servedCheckpoint(ctx context.Context, cfg model.Config, log *slog.Logger) (string, error) {
	c, err := model.New(cfg, log)
	if err != nil {
		return "", err
	}
	return c.ServedCheckpoint(ctx)
}
