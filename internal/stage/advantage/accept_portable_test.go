package advantage

import (
	"bytes"
	"context"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/contract/trainexport"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
)

// Acceptance 2 of issue 35: a set written with the default (its images as
// files beside the shards) is moved to another folder, away from the blob
// store; advantage verify passes on it, and advantage export writes verl's
// and OpenRLHF's inputs with --store an empty folder (every image comes
// from the set). Damaged copies of the set fail verify, which names the
// file (and the row and field): a flipped byte in a shard, a missing image
// file, a duplicated row, a truncated group.
func TestAcceptPortableSet(t *testing.T) {
	dir, _ := corpus(t)
	ctx := context.Background()
	out := filepath.Join(t.TempDir(), "shards")
	advantageCLI(t, dir, "--out", out)
	bucket, err := blob.OpenBucket(ctx, out, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	if m.Meta.Images != shard.ImagesFiles || len(m.Images) == 0 {
		t.Fatalf("the default set carries %d image files (images %q)", len(m.Images), m.Meta.Images)
	}
	moved := filepath.Join(t.TempDir(), "moved")
	if err := os.Rename(filepath.Join(out, filepath.FromSlash(m.Set)), moved); err != nil {
		t.Fatal(err)
	}
	// No blob store anywhere the commands look: a fresh data folder and
	// an empty --store.
	data, empty := t.TempDir(), t.TempDir()
	run := func(t *testing.T, args ...string) (string, int) {
		t.Helper()
		cctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		var stdout, stderr bytes.Buffer
		full := append(args[:1:1], append([]string{"--data", data, "--store", empty, "--log-level", "warn"}, args[1:]...)...)
		code := service.MainContext(cctx, Command(), full, &stdout, &stderr)
		return stdout.String() + stderr.String(), code
	}
	if text, code := run(t, "verify", "--set", moved); code != 0 || !strings.Contains(text, ": OK") {
		t.Fatalf("verify of the moved set: exit %d\n%s", code, text)
	}
	for _, format := range []trainexport.Format{trainexport.FormatVerl, trainexport.FormatOpenRLHF} {
		t.Run("export "+string(format), func(t *testing.T) {
			exp := filepath.Join(t.TempDir(), "export")
			if text, code := run(t, "export", "--set", moved, "--format", string(format), "--out", exp); code != 0 {
				t.Fatalf("export: exit %d\n%s", code, text)
			}
			var em trainexport.Manifest
			body, err := os.ReadFile(filepath.Join(exp, trainexport.ManifestName))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(body, &em); err != nil {
				t.Fatal(err)
			}
			if em.Rows == 0 || len(em.Files) == 0 {
				t.Fatalf("export manifest %+v: no rows", em)
			}
		})
	}
	entries, _ := os.ReadDir(empty)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), ".") { // the store's own spool folder
			t.Errorf("the empty store holds %s", e.Name())
		}
	}

	cases := []struct {
		name   string
		damage func(t *testing.T, set string, m shard.Manifest)
		want   []string // in verify's output
	}{
		{"flipped byte in a shard", func(t *testing.T, set string, m shard.Manifest) {
			p := filepath.Join(set, m.Files[0].Path)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			b[len(b)/2] ^= 0x10
			if err := os.WriteFile(p, b, 0o644); err != nil {
				t.Fatal(err)
			}
		}, []string{"PROBLEM " + "{file0}: shard file has"}},
		{"missing image file", func(t *testing.T, set string, m shard.Manifest) {
			if err := os.Remove(filepath.Join(set, m.Images[0].Path)); err != nil {
				t.Fatal(err)
			}
		}, []string{"PROBLEM {image0}: image file is missing"}},
		{"duplicate row", func(t *testing.T, set string, m shard.Manifest) {
			rewriteSet(t, set, m, func(files [][]shard.Row) [][]shard.Row {
				return append(files, []shard.Row{files[0][0]})
			})
		}, []string{"row 0 trajectory_id,step,candidate: (", ") is also part-"}},
		{"truncated group", func(t *testing.T, set string, m shard.Manifest) {
			rewriteSet(t, set, m, func(files [][]shard.Row) [][]shard.Row {
				files[0] = files[0][1:]
				return files
			})
		}, []string{"group_id: group {group0} is incomplete: "}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			set := filepath.Join(t.TempDir(), "set")
			copyDir(t, moved, set)
			first := firstRow(t, set, m)
			tc.damage(t, set, m)
			text, code := run(t, "verify", "--set", set)
			if code == 0 {
				t.Fatalf("verify of a damaged set passed:\n%s", text)
			}
			for _, w := range tc.want {
				w = strings.NewReplacer("{file0}", m.Files[0].Path, "{image0}", m.Images[0].Path, "{group0}", first.GroupID).Replace(w)
				if !strings.Contains(text, w) {
					t.Errorf("verify's output lacks %q:\n%s", w, text)
				}
			}
		})
	}
}

// firstRow returns the first row of the set's first file.
func firstRow(t *testing.T, set string, m shard.Manifest) shard.Row {
	t.Helper()
	var first *shard.Row
	err := shard.ReadFile(context.Background(), filepath.Join(set, m.Files[0].Path), m.Format, func(r *shard.Row) error {
		if first == nil {
			first = r
		}
		return nil
	})
	if err != nil || first == nil {
		t.Fatalf("read %s: %v", m.Files[0].Path, err)
	}
	return *first
}

// rewriteSet reads the rows of every file of the set in folder set, lets
// edit change them (a list of rows per file), and writes them back as new
// files with a new manifest (the old files removed), through the shard
// writer as the service does: the rows' images stored as the set's image
// files first (already there: the writer finds them).
func rewriteSet(t *testing.T, set string, m shard.Manifest, edit func([][]shard.Row) [][]shard.Row) {
	t.Helper()
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, set, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var files [][]shard.Row
	for _, f := range m.Files {
		var rows []shard.Row
		err := shard.ReadFile(ctx, filepath.Join(set, f.Path), f.Format, func(r *shard.Row) error {
			for k := range r.Images {
				data, err := shard.ReadImage(ctx, b, "", r.Images[k])
				if err != nil {
					return err
				}
				r.Images[k].Bytes, r.Images[k].Path = data, ""
			}
			rows = append(rows, *r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, rows)
		if err := os.Remove(filepath.Join(set, f.Path)); err != nil {
			t.Fatal(err)
		}
	}
	written := shardtest.WriteFiles(t, shard.Config{Bucket: b, Format: m.Format, Meta: m.Meta, Images: shard.ImagesFiles}, edit(files)...)
	nm := shard.NewManifest("", m.Format, m.Meta, written)
	nm.Counts.Groups, nm.Counts.RowsPerApp = m.Counts.Groups, m.Counts.RowsPerApp
	if err := shard.WriteManifest(ctx, b, "", nm); err != nil {
		t.Fatal(err)
	}
}

// copyDir copies the folder src to dst (created).
func copyDir(t *testing.T, src, dst string) {
	t.Helper()
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(dst, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
}
