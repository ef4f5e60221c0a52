package advantage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/internal/infra/service"
)

const verifyUsage = `advantage verify — check a shard set against its manifest

Usage:
  advantage verify --set DIR|s3://bucket/prefix [--json]

Reads the set's manifest (the folder holding manifest.json) and checks every listed file's
size and SHA-256 (shards and image files), each shard's row count, that every image a row
names is in the set (embedded bytes or an image file with the image's SHA-256), that every
group is complete (step mode: group_size rows with distinct candidates), that no
(trajectory_id, step, candidate) appears twice, and that the manifest's counts are the rows'.
Prints what it checked and one line per problem (file, row, field); exits non-zero when there is
one. A set written with --images store references the blob store and does not pass. See
docs/shards.md.`

// verifyCommand is advantage verify.
func verifyCommand() service.Command {
	var set string
	var asJSON bool
	return service.Command{
		Name: "advantage verify", Summary: "check a shard set's files, rows, images and groups against its manifest",
		Usage: verifyUsage, Common: true,
		Flags: func(fs *service.Flags) {
			fs.String(&set, "set", "", "", "the shard set: the folder holding its manifest.json (a folder or s3://bucket/prefix)")
			fs.Bool(&asJSON, "json", "", false, "print the report as JSON")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			if set == "" {
				return service.Usage(fmt.Errorf("--set is required"))
			}
			b, err := blob.OpenBucket(ctx, set, blob.Config{Logger: env.Log})
			if err != nil {
				return fmt.Errorf("advantage verify: --set %s: %w", redact.URL(set), err)
			}
			tmp := env.Common.DataDir + "/tmp"
			if err := os.MkdirAll(tmp, blob.DirPerm); err != nil {
				return err
			}
			rep, verr := shard.Verify(ctx, b, "", tmp)
			if rep == nil {
				return fmt.Errorf("advantage verify: %w", verr)
			}
			if asJSON {
				body, err := json.MarshalIndent(rep, "", "  ")
				if err != nil {
					return err
				}
				fmt.Fprintf(env.Stdout, "%s\n", body)
			} else {
				rep.Print(env.Stdout)
			}
			if verr != nil {
				return fmt.Errorf("advantage verify: %w", verr)
			}
			return nil
		},
	}
}
