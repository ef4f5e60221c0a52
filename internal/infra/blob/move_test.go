package blob_test

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// TestLocalMoveFile checks that MoveFile renames a file into place with its SHA-256 recorded,
// that the source is gone after success and left alone after a refusal, and that it copies
// across file systems.
func TestLocalMoveFile(t *testing.T) {
	s, dir := openLocal(t)
	b := s.Bucket()
	mv, ok := b.(blob.FileMover)
	if !ok {
		t.Fatal("the local bucket is not a FileMover")
	}
	ctx := t.Context()
	content := []byte(strings.Repeat("shard bytes ", 1000))
	sum := blob.SumSHA256(content)
	src := filepath.Join(dir, "spool-file") // same file system as the bucket
	if err := os.WriteFile(src, content, 0o600); err != nil {
		t.Fatal(err)
	}

	// Refusals leave the file where it is.
	if _, err := mv.MoveFile(ctx, "sets/a/part.arrow", src, blob.PutOptions{}); err == nil {
		t.Error("MoveFile without SHA256 succeeded")
	}
	if _, err := mv.MoveFile(ctx, "../x", src, blob.PutOptions{SHA256: sum}); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("MoveFile to an invalid key: %v", err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Fatalf("a refused MoveFile removed the source: %v", err)
	}

	info, err := mv.MoveFile(ctx, "sets/a/part.arrow", src, blob.PutOptions{SHA256: sum})
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != "sets/a/part.arrow" || info.Size != int64(len(content)) || info.SHA256 != sum {
		t.Errorf("MoveFile = %+v", info)
	}
	if _, err := os.Stat(src); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the source still exists after MoveFile: %v", err)
	}
	rc, got, err := b.Get(ctx, "sets/a/part.arrow")
	if err != nil {
		t.Fatal(err)
	}
	data, err := io.ReadAll(rc) // verifies the recorded SHA-256
	rc.Close()
	if err != nil || string(data) != string(content) {
		t.Errorf("Get after MoveFile: %d bytes, %v", len(data), err)
	}
	if st, err := b.Stat(ctx, "sets/a/part.arrow"); err != nil || (st.SHA256 != "" && st.SHA256 != sum) || got.Size != int64(len(content)) {
		t.Errorf("Stat after MoveFile = %+v, %v", st, err)
	}
	for info, err := range b.List(ctx, "sets/") {
		if err != nil || info.Key != "sets/a/part.arrow" {
			t.Errorf("List after MoveFile: %+v, %v (no temporary file may show)", info, err)
		}
	}

	// Across file systems (when /dev/shm is another one) it copies, verifying the SHA-256.
	other, err := os.MkdirTemp("/dev/shm", "codapipe-move-*")
	if err != nil {
		t.Skipf("no /dev/shm: %v", err)
	}
	defer os.RemoveAll(other)
	var a, c syscall.Stat_t
	if syscall.Stat(other, &a) != nil || syscall.Stat(dir, &c) != nil || a.Dev == c.Dev {
		t.Skip("/dev/shm is on the bucket's file system")
	}
	src = filepath.Join(other, "spool-file")
	if err := os.WriteFile(src, content, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := mv.MoveFile(ctx, "sets/b/part.arrow", src, blob.PutOptions{SHA256: blob.SumSHA256([]byte("other"))}); !errors.Is(err, blob.ErrChecksumMismatch) {
		t.Errorf("cross-device MoveFile with a wrong SHA-256: %v, want ErrChecksumMismatch", err)
	}
	if _, err := os.Stat(src); err != nil {
		t.Errorf("a failed cross-device MoveFile removed the source: %v", err)
	}
	if _, err := mv.MoveFile(ctx, "sets/b/part.arrow", src, blob.PutOptions{SHA256: sum}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(src); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the source still exists after a cross-device MoveFile: %v", err)
	}
}
