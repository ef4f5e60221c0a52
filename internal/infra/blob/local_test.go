package blob_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

func openLocal(t *testing.T) (*blob.Store, string) {
	t.Helper()
	dir := t.TempDir()
	s, err := blob.Open(t.Context(), "file://"+dir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s, dir
}

// TestLocalReplaceIsAtomic checks that a reader that opened an object keeps reading the version
// it opened while a writer replaces it, and that new readers see the new version whole.
func TestLocalReplaceIsAtomic(t *testing.T) {
	s, _ := openLocal(t)
	b := s.Bucket()
	ctx := t.Context()
	old := bytes.Repeat([]byte("old "), 1<<18)
	if _, err := b.Put(ctx, "m/manifest.json", bytes.NewReader(old), -1, blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rc, _, err := b.Get(ctx, "m/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, 100)
	if _, err := io.ReadFull(rc, head); err != nil {
		t.Fatal(err)
	}
	updated := bytes.Repeat([]byte("new!"), 1<<17)
	if _, err := b.Put(ctx, "m/manifest.json", bytes.NewReader(updated), -1, blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	rest, err := readAll(rc)
	if err != nil || !bytes.Equal(append(head, rest...), old) {
		t.Fatalf("the open reader saw a mix of versions (err %v)", err)
	}
	rc, info, err := b.Get(ctx, "m/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	got, err := readAll(rc)
	if err != nil || !bytes.Equal(got, updated) || info.Size != int64(len(updated)) {
		t.Fatalf("after replace: %d bytes, %v", len(got), err)
	}
}

// TestLocalFailedPutLeavesNothing checks that a Put that fails midway (reader error, cancelled
// context, wrong size) removes its temporary file and leaves an existing object untouched.
func TestLocalFailedPutLeavesNothing(t *testing.T) {
	s, dir := openLocal(t)
	b := s.Bucket()
	if _, err := b.Put(t.Context(), "k/obj", strings.NewReader("original"), -1, blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	boom := errors.New("reader broke")
	for _, tc := range []struct {
		name string
		ctx  context.Context
		r    io.Reader
		size int64
		is   error
	}{
		{"readerError", t.Context(), io.MultiReader(strings.NewReader("partial"), errReader{boom}), -1, boom},
		{"cancelled", cancelled, strings.NewReader("new content"), -1, context.Canceled},
		{"tooShort", t.Context(), strings.NewReader("new"), 10, blob.ErrChecksumMismatch},
		{"tooLong", t.Context(), strings.NewReader("new content"), 3, blob.ErrChecksumMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := b.Put(tc.ctx, "k/obj", tc.r, tc.size, blob.PutOptions{})
			if !errors.Is(err, tc.is) {
				t.Fatalf("Put: %v, want %v", err, tc.is)
			}
			rc, _, err := b.Get(t.Context(), "k/obj")
			if err != nil {
				t.Fatal(err)
			}
			if got, err := readAll(rc); err != nil || string(got) != "original" {
				t.Errorf("object after a failed Put: %q, %v", got, err)
			}
			if tc.size < 0 { // the same failure through Store.Put, which spools into dir/.tmp
				r := io.MultiReader(strings.NewReader("partial"), errReader{boom})
				if tc.name == "cancelled" {
					r = strings.NewReader("new content")
				}
				if _, err := s.Put(tc.ctx, r); !errors.Is(err, tc.is) {
					t.Errorf("Store.Put: %v, want %v", err, tc.is)
				}
			}
			filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
				if err == nil && !d.IsDir() && (strings.HasPrefix(d.Name(), ".tmp") || strings.Contains(p, "/.tmp/")) {
					t.Errorf("temporary file left: %s", p)
				}
				return nil
			})
		})
	}
}

type errReader struct{ err error }

func (e errReader) Read([]byte) (int, error) { return 0, e.err }

// TestLocalRemovesStaleTemporaries checks that Open deletes spool files older than a day and
// List deletes old ".tmp-*" files in the directories it reads (a crashed writer leaves them),
// while recent temporaries (another process may be writing them) and objects of any age stay.
func TestLocalRemovesStaleTemporaries(t *testing.T) {
	dir := t.TempDir()
	s, err := blob.Open(t.Context(), dir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Bucket().Put(t.Context(), "d/old-object", strings.NewReader("keep me"), -1, blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-48 * time.Hour)
	files := map[string]bool{ // path → should survive
		filepath.Join(dir, ".tmp", "spool-stale"): false,
		filepath.Join(dir, ".tmp", "spool-fresh"): true,
		filepath.Join(dir, "d", ".tmp-stale"):     false,
		filepath.Join(dir, "d", ".tmp-fresh"):     true,
		filepath.Join(dir, "d", "old-object"):     true,
	}
	for p := range files {
		if !strings.HasSuffix(p, "old-object") {
			if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		if !strings.HasSuffix(p, "-fresh") {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := blob.Open(t.Context(), dir, blob.Config{}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for info, err := range s.Bucket().List(t.Context(), "") {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	if len(keys) != 1 || keys[0] != "d/old-object" {
		t.Errorf("List = %q, want only d/old-object", keys)
	}
	for p, survive := range files {
		_, err := os.Stat(p)
		if survive && err != nil {
			t.Errorf("%s removed: %v", p, err)
		}
		if !survive && !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s still there (%v)", p, err)
		}
	}
}

func TestLocalOpenErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "a-file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := blob.Open(t.Context(), file, blob.Config{})
	if err == nil || !strings.Contains(err.Error(), "blob: open file://"+file) {
		t.Errorf("Open on a regular file: %v", err)
	}
	if _, err := blob.Open(t.Context(), "", blob.Config{}); err == nil {
		t.Errorf("Open without URL and DefaultDir succeeded")
	}
}

// plainBucket hides the backend's spooling so that NewStore takes its generic path.
type plainBucket struct{ blob.Bucket }

func TestNewStoreOverAnyBucket(t *testing.T) {
	s, _ := openLocal(t)
	tmp := t.TempDir()
	gs := blob.NewStore(plainBucket{s.Bucket()}, blob.Config{TempDir: tmp})
	ctx := t.Context()
	ref, err := gs.Put(ctx, gen(5, 3*MiB))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := gs.Put(ctx, gen(5, 3*MiB)); err != nil || again != ref {
		t.Fatalf("second Put = %+v, %v", again, err)
	}
	rc, err := s.Get(ctx, ref.SHA256) // visible through the original store
	if err != nil {
		t.Fatal(err)
	}
	if got := sameStream(t, rc, gen(5, 3*MiB)); got != ref.SHA256 {
		t.Fatalf("sha256 %s, want %s", got, ref.SHA256)
	}
	rc.Close()
	if entries, _ := os.ReadDir(tmp); len(entries) != 0 {
		t.Errorf("TempDir holds %d files", len(entries))
	}
}
