package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"

	"github.com/codapipe/codapipe/internal/blob"
)

// Fetch copies the shard file f of a set from b into a new temporary file
// in tempDir, checked against what the manifest says of it: its size and
// SHA-256 when the manifest gives them, whether or not the bucket keeps a
// checksum of its own (a copied set). A file that differs gives an error
// wrapping blob.ErrChecksumMismatch, a missing one an error wrapping
// blob.ErrNotFound. It returns the copy's path and a function that
// removes it; ReadFile reads it.
func Fetch(ctx context.Context, b blob.Bucket, f File, tempDir string) (path string, remove func(), err error) {
	tmp, err := os.CreateTemp(tempDir, "codapipe-shard-*"+f.Format.Ext())
	if err != nil {
		return "", nil, fmt.Errorf("shard: fetch %s: %w", f.Key, err)
	}
	remove = func() { os.Remove(tmp.Name()) }
	n, sum, err := copyFile(ctx, b, f.Key, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil && ((f.Bytes > 0 && n != f.Bytes) || (f.SHA256 != "" && sum != f.SHA256)) {
		err = &MismatchError{Bytes: n, SHA256: sum, WantBytes: f.Bytes, WantSHA256: f.SHA256}
	}
	if err != nil {
		remove()
		return "", nil, fmt.Errorf("shard: file %s: %w", f.Key, err)
	}
	return tmp.Name(), remove, nil
}

// MismatchError is Fetch's error for a shard file whose size or SHA-256
// is not the manifest's. It wraps blob.ErrChecksumMismatch.
type MismatchError struct {
	Bytes, WantBytes   int64
	SHA256, WantSHA256 string
}

func (e *MismatchError) Error() string {
	return fmt.Sprintf("%d bytes with SHA-256 %s, the manifest says %d bytes with SHA-256 %s: %v",
		e.Bytes, e.SHA256, e.WantBytes, e.WantSHA256, blob.ErrChecksumMismatch)
}

// Unwrap returns blob.ErrChecksumMismatch.
func (e *MismatchError) Unwrap() error { return blob.ErrChecksumMismatch }

// copyFile copies the object key of b to w (io.Discard: only to hash it)
// and returns its size and hex SHA-256.
func copyFile(ctx context.Context, b blob.Bucket, key string, w io.Writer) (int64, string, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return 0, "", err
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(w, h), rc)
	return n, hex.EncodeToString(h.Sum(nil)), err
}
