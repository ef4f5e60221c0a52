package shard_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// copyOnly hides the local bucket's blob.LocalFiler: Fetch and
// ReadVerified take the path every remote bucket takes (a copy).
type copyOnly struct{ blob.Bucket }

// TestReadVerified reads a set's shard file through a local bucket (read
// in place, hashed while read) and through the copy path, whole, with a
// byte flipped in its middle, and missing: the intact file yields its
// rows, a damaged one a checksum mismatch (read in place: a
// *MismatchError naming the manifest's SHA-256, not the Arrow reader's own
// complaint; copied: the bucket's checksum may say it first), a missing one
// blob.ErrNotFound. Fetch says the same.
func TestReadVerified(t *testing.T) {
	ctx := context.Background()
	rows := groupRows(3, 4, 7)
	for _, kind := range []string{"local", "copy"} {
		for _, damage := range []string{"none", "flip", "missing"} {
			t.Run(kind+"/"+damage, func(t *testing.T) {
				b, dir := localBucket(t)
				m := writeSet(t, b, "sets/v", shard.ImagesEmbed, slices.Clone(rows), len(rows))
				f := m.Files[0]
				path := filepath.Join(dir, filepath.FromSlash(f.Key))
				switch damage {
				case "flip":
					data, err := os.ReadFile(path)
					if err != nil {
						t.Fatal(err)
					}
					data[len(data)/2] ^= 0x40
					if err := os.WriteFile(path, data, 0o644); err != nil {
						t.Fatal(err)
					}
				case "missing":
					if err := os.Remove(path); err != nil {
						t.Fatal(err)
					}
				}
				var bucket blob.Bucket = b
				if kind == "copy" {
					bucket = copyOnly{b}
				}
				var got []shard.Row
				err := shard.ReadVerified(ctx, bucket, f, t.TempDir(), shard.ReadOptions{}, func(r *shard.Row) error {
					got = append(got, *r)
					return nil
				})
				_, _, ferr := shard.Fetch(ctx, bucket, f, t.TempDir())
				var mm *shard.MismatchError
				switch damage {
				case "none":
					if err != nil || ferr != nil {
						t.Fatalf("ReadVerified: %v; Fetch: %v", err, ferr)
					}
					if len(got) != len(rows) || got[5].GroupID != rows[5].GroupID || !slices.Equal(got[5].Images[1].Bytes, rows[5].Images[1].Bytes) {
						t.Fatalf("read %d rows, want %d with their image bytes", len(got), len(rows))
					}
				case "flip":
					for _, e := range []error{err, ferr} {
						// The copy path may stop earlier, at the
						// bucket's own checksum of the object.
						if !errors.Is(e, blob.ErrChecksumMismatch) || (kind == "local" && (!errors.As(e, &mm) || mm.WantSHA256 != f.SHA256 || mm.SHA256 == f.SHA256)) {
							t.Fatalf("want a checksum mismatch against SHA-256 %s, got %v", f.SHA256, e)
						}
					}
				case "missing":
					if !errors.Is(err, blob.ErrNotFound) || !errors.Is(ferr, blob.ErrNotFound) {
						t.Fatalf("want ErrNotFound, got %v; Fetch: %v", err, ferr)
					}
				}
			})
		}
	}
}

// TestSkipImageBytes reads embedded images with ReadOptions.SkipImageBytes:
// the images it declines have no bytes (and keep their SHA-256, size and
// place), the others their bytes.
func TestSkipImageBytes(t *testing.T) {
	ctx := context.Background()
	b, _ := localBucket(t)
	rows := groupRows(2, 3, 3)
	m := writeSet(t, b, "sets/s", shard.ImagesEmbed, slices.Clone(rows), len(rows))
	skip := rows[0].Images[1].SHA256 // shared by both groups
	i := 0
	err := shard.ReadVerified(ctx, b, m.Files[0], t.TempDir(), shard.ReadOptions{SkipImageBytes: func(sha string) bool { return sha == skip }}, func(r *shard.Row) error {
		for k, im := range r.Images {
			want := rows[i].Images[k]
			if im.SHA256 != want.SHA256 || im.Width != want.Width {
				t.Errorf("row %d image %d: %s, want %s", i, k, im.SHA256, want.SHA256)
			}
			if got := im.Bytes != nil; got == (im.SHA256 == skip) {
				t.Errorf("row %d image %d (%s): bytes read %v", i, k, im.SHA256, got)
			}
		}
		i++
		return nil
	})
	if err != nil || i != len(rows) {
		t.Fatalf("read %d rows: %v", i, err)
	}
}
