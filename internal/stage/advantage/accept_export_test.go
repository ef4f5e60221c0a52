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

	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/contract/trainexport"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
)

// Acceptance 4 and 5 of issue 22, and the export side of issue 35, on the
// simulated corpus: advantage writes a set, the set's folder is moved
// elsewhere, and advantage export reads it through its manifest and writes
// the candidate rows (one per shard row), verl's Parquet (read back with
// DuckDB) and OpenRLHF's JSON Lines (one row per group, a val split), each
// with as many "<image>" placeholders as images, every image once under
// images/. The fields themselves are checked against the trainers' sources
// in internal/trainexport.
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
	for _, format := range trainexport.Formats {
		t.Run(string(format), func(t *testing.T) {
			exp := filepath.Join(t.TempDir(), "export")
			em := exportCLI(t, dir, moved, exp, format, "--val-fraction", "0.2")
			want := m.Counts.Groups
			if format == trainexport.FormatJSONL {
				want = m.Counts.Rows
			}
			if em.Rows != want || em.Rows == 0 {
				t.Fatalf("export holds %d rows, want %d (set: %d rows, %d groups)", em.Rows, want, m.Counts.Rows, m.Counts.Groups)
			}
			type row struct {
				prompt []trainexport.Message
				images []string
			}
			var rows []row
			for _, df := range em.DataFiles() {
				name := filepath.Join(exp, df.Path)
				if format == trainexport.FormatVerl {
					f := shardtest.Read(t, name)[0]
					for i, raw := range f.Rows {
						var r row
						var imgs []trainexport.VerlImage
						if err := json.Unmarshal(raw["prompt"], &r.prompt); err != nil {
							t.Fatalf("row %d: %v", i, err)
						}
						if err := json.Unmarshal(raw["images"], &imgs); err != nil {
							t.Fatalf("row %d: %v", i, err)
						}
						for _, im := range imgs {
							r.images = append(r.images, im.Image)
						}
						rows = append(rows, r)
					}
					continue
				}
				data, err := os.ReadFile(name)
				if err != nil {
					t.Fatal(err)
				}
				for i, l := range strings.Split(strings.TrimSuffix(string(data), "\n"), "\n") {
					if l == "" {
						continue
					}
					if format == trainexport.FormatJSONL {
						var line trainexport.CandidateRow
						if err := json.Unmarshal([]byte(l), &line); err != nil {
							t.Fatalf("line %d: %v", i, err)
						}
						r := row{prompt: line.Messages}
						for _, im := range line.Images {
							r.images = append(r.images, filepath.Join(exp, im.Path))
						}
						rows = append(rows, r)
						continue
					}
					var line trainexport.OpenRLHFRow
					if err := json.Unmarshal([]byte(l), &line); err != nil {
						t.Fatalf("line %d: %v", i, err)
					}
					rows = append(rows, row{prompt: line.Input, images: line.Images})
				}
			}
			if len(rows) != want {
				t.Fatalf("%d rows read back, want %d", len(rows), want)
			}
			if format != trainexport.FormatJSONL && len(em.DataFiles()) != 2 {
				t.Errorf("data files %+v, want train and val", em.DataFiles())
			}
			distinct := map[string]bool{}
			for i, r := range rows {
				n := 0
				for _, msg := range r.prompt {
					n += strings.Count(msg.Content, trainexport.ImagePlaceholder)
				}
				if n != len(r.images) || n == 0 {
					t.Errorf("row %d: %d placeholders, %d images", i, n, len(r.images))
				}
				for _, p := range r.images {
					if !distinct[p] {
						if _, err := os.Stat(p); err != nil {
							t.Errorf("row %d: %v", i, err)
						}
					}
					distinct[p] = true
				}
			}
			if images := len(em.Files) - len(em.DataFiles()); images != len(distinct) {
				t.Errorf("%d image files, the rows name %d", images, len(distinct))
			}
		})
	}
}

// exportCLI runs advantage export and returns the export's manifest,
// checking that it records the build.
func exportCLI(t *testing.T, dir, set, out string, format trainexport.Format, args ...string) *trainexport.Manifest {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	args = append([]string{"export", "--data", dir, "--log-level", "warn", "--set", set, "--format", string(format), "--out", out}, args...)
	if code := service.MainContext(ctx, Command(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("advantage %v: exit %d\n%s", args, code, stderr.String())
	}
	var em trainexport.Manifest
	body, err := os.ReadFile(filepath.Join(out, trainexport.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(body, &em); err != nil {
		t.Fatal(err)
	}
	if v := service.Version().String(); em.Version != v {
		t.Errorf("export manifest codapipe_version %q, want the build %q", em.Version, v)
	}
	return &em
}
