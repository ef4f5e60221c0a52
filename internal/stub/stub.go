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
