package advantage

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/internal/shard/shardtest"
	"github.com/codapipe/codapipe/internal/trainexport"
)

// Acceptance 4 and 5 of issue 22 on the simulated corpus: advantage writes
// a set, the set's folder is moved elsewhere, and advantage export reads
// it through its manifest and writes verl's Parquet (read back with
// DuckDB) and OpenRLHF's JSON Lines, one trainer row per shard row, each
// with as many "<image>" placeholders as images. The fields themselves
// are checked against the trainers' sources in internal/trainexport.
func TestAcceptExportCLI(t *testing.T) {
	shardtest.Require(t)
	dir, _ := corpus(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "shards")
	advantageCLI(t, dir, "--out", out, "--format", "parquet")
	bucket, err := blob.OpenBucket(ctx, out, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	moved := filepath.Join(t.TempDir(), "copy")
	if err := os.Rename(filepath.Join(out, filepath.FromSlash(m.Set)), moved); err != nil {
		t.Fatal(err)
	}
	for _, format := range []trainexport.Format{trainexport.FormatVerl, trainexport.FormatOpenRLHF} {
		t.Run(string(format), func(t *testing.T) {
			exp := filepath.Join(t.TempDir(), "export")
			cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
			defer cancel()
			var stdout, stderr bytes.Buffer
			args := []string{"export", "--data", dir, "--log-level", "warn", "--set", moved, "--format", string(format), "--out", exp}
			if code := service.MainContext(cctx, Command(), args, &stdout, &stderr); code != 0 {
				t.Fatalf("advantage %v: exit %d\n%s", args, code, stderr.String())
			}
			var em trainexport.Manifest
			body, err := os.ReadFile(filepath.Join(exp, trainexport.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(body, &em); err != nil {
				t.Fatal(err)
			}
			if em.Rows != m.Counts.Rows || em.Rows == 0 {
				t.Fatalf("export holds %d rows, the set %d", em.Rows, m.Counts.Rows)
			}
			type row struct {
				prompt []trainexport.Message
				images int
			}
			var rows []row
			if format == trainexport.FormatVerl {
				f := shardtest.Read(t, filepath.Join(exp, "train.parquet"))[0]
				for i, raw := range f.Rows {
					var r row
					var imgs []json.RawMessage
					if err := json.Unmarshal(raw["prompt"], &r.prompt); err != nil {
						t.Fatalf("row %d: %v", i, err)
					}
					if err := json.Unmarshal(raw["images"], &imgs); err != nil {
						t.Fatalf("row %d: %v", i, err)
					}
					r.images = len(imgs)
					rows = append(rows, r)
				}
			} else {
				data, err := os.ReadFile(filepath.Join(exp, "train.jsonl"))
				if err != nil {
					t.Fatal(err)
				}
				for i, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
					var line trainexport.OpenRLHFRow
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					rows = append(rows, row{prompt: line.Input, images: len(line.Images)})
				}
			}
			if len(rows) != m.Counts.Rows {
				t.Fatalf("%d rows read back, want %d", len(rows), m.Counts.Rows)
			}
			for i, r := range rows {
				n := 0
				for _, msg := range r.prompt {
					n += strings.Count(msg.Content, trainexport.ImagePlaceholder)
				}
				if n != r.images || n == 0 {
					t.Errorf("row %d: %d placeholders, %d images", i, n, r.images)
				}
			}
		})
	}
}
