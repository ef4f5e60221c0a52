// Package stub gives the commands that are not built yet a truthful --help:
// what the command will do and that it does not do it yet. Each command
// leaves this package when its real Run lands.
package stub

import (
	"context"
	"fmt"

	"github.com/codapipe/codapipe/internal/service"
)

// notBuilt is the Run of a command that is not built yet.
func notBuilt(name string) func(context.Context, *service.Env) error {
	return func(context.Context, *service.Env) error {
		return service.Usage(fmt.Errorf("not built yet (see %s --help)", name))
	}
}

// The commands not built yet.
var (
	Advantage = service.Command{
		Name:    "advantage",
		Summary: "compute group-relative advantages (GRPO) and write Arrow shards for the trainer",
		Usage: `advantage — compute group-relative advantages and write Arrow shards

A durable consumer of judged trajectories. It labels steps (clean successes
give reference actions), scores each step's G non-executed candidates against
the executed action, computes advantages (grpo / drgrpo / rloo) and writes
Arrow IPC or Parquet shards with a manifest to a local folder or S3, acking
messages only once their rows are durably written.

Status: NOT BUILT YET. The flags below are accepted.`,
		Common: true, Consumer: true, Run: notBuilt("advantage"),
	}
	SFTPack = service.Command{
		Name:    "sftpack",
		Summary: "merge the clean successes of expert runs into the generalization SFT dataset",
		Usage: `sftpack — build the generalization SFT dataset

A batch job: selects clean successes across expert runs and apps,
de-duplicates them, builds step-level SFT samples in the planner's prompt
layout, and writes JSONL + images and Parquet with a manifest and checksums,
to a local folder or S3/MinIO.

Status: NOT BUILT YET. The flags below are accepted.`,
		Common: true, Run: notBuilt("sftpack"),
	}
)
