package blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// TestLocalModes writes through every path of the local backend (Store.Put
// of a screenshot, Bucket.Put, PutFile, MoveFile of a 0600 temporary file
// as the shard writer does) under two umasks and checks that files get 0644
// and folders 0755, less the umask. The umask is process-wide, so this test
// is not parallel: parallel tests run only after the sequential ones.
func TestLocalModes(t *testing.T) {
	for _, tc := range []struct {
		umask     int
		file, dir fs.FileMode
	}{
		{0o022, 0o644, 0o755},
		{0o027, 0o640, 0o750},
	} {
		t.Run(fs.FileMode(tc.umask).String(), func(t *testing.T) {
			old := syscall.Umask(tc.umask)
			defer syscall.Umask(old)
			if got := blob.Umask(); got != fs.FileMode(tc.umask) {
				t.Fatalf("Umask() = %o, want %o", got, tc.umask)
			}
			ctx := context.Background()
			root := filepath.Join(t.TempDir(), "out")
			b, err := blob.OpenBucket(ctx, root, blob.Config{})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := blob.NewStore(b, blob.Config{}).PutBytes(ctx, []byte("png bytes")); err != nil {
				t.Fatal(err)
			}
			body := []byte("data")
			h := sha256.Sum256(body)
			sum := hex.EncodeToString(h[:])
			if _, err := b.Put(ctx, "a/b/put.json", bytes.NewReader(body), int64(len(body)), blob.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			spool, err := os.CreateTemp(t.TempDir(), "spool-*") // 0600
			if err != nil {
				t.Fatal(err)
			}
			spool.Write(body)
			spool.Close()
			if _, err := b.PutFile(ctx, "c/putfile.bin", spool.Name(), blob.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			mv, ok := b.(blob.FileMover)
			if !ok {
				t.Fatal("the local bucket is not a FileMover")
			}
			if _, err := mv.MoveFile(ctx, "d/moved.arrow", spool.Name(), blob.PutOptions{SHA256: sum}); err != nil {
				t.Fatal(err)
			}
			files := 0
			err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
				if err != nil {
					return err
				}
				rel, _ := filepath.Rel(root, p)
				if strings.HasPrefix(rel, ".tmp") {
					return nil // the backend's own spool folder
				}
				fi, err := d.Info()
				if err != nil {
					return err
				}
				want := tc.file
				if d.IsDir() {
					want = tc.dir
				} else {
					files++
				}
				if got := fi.Mode().Perm(); got != want {
					t.Errorf("%s: mode %o, want %o", rel, got, want)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if files != 4 {
				t.Errorf("%d files, want 4", files)
			}
		})
	}
}
