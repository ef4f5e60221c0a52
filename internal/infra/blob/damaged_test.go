package blob_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// A bit flipped in stored content is damage, not a transient fault:
// GetBytes reads it twice and then says so with an error that wraps
// ErrChecksumMismatch, names the content and is Damaged; a missing object
// is not Damaged.
func TestGetBytesOfDamagedContentIsDamaged(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	s, err := blob.Open(ctx, dir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	body := []byte(strings.Repeat("screenshot ", 100))
	info, err := s.PutBytes(ctx, body)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, filepath.FromSlash(blob.Key(info.SHA256)))
	bad := append([]byte(nil), body...)
	bad[len(bad)/2] ^= 1
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err = s.GetBytes(ctx, info.SHA256)
	if !errors.Is(err, blob.ErrChecksumMismatch) || !blob.Damaged(err) || !strings.Contains(err.Error(), info.SHA256) || !strings.Contains(err.Error(), "read twice") {
		t.Fatalf("GetBytes of damaged content: %v; want a Damaged checksum mismatch naming %s, read twice", err, info.SHA256)
	}
	if blob.Damaged(errors.New("timeout")) || blob.Damaged(blob.ErrNotFound) {
		t.Fatal("Damaged says yes to errors that are not a checksum mismatch")
	}
}
