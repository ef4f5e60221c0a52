package shard

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// Fetch returns a local file holding the shard file f of a set in b,
// checked against what the manifest says of it: its size and SHA-256 when
// the manifest gives them (else the SHA-256 the bucket recorded), whether
// or not the bucket keeps a checksum of its own (a copied set). A file of
// a local bucket (blob.LocalFiler) is read in place, hashed once; any
// other is copied into a new temporary file in tempDir as it is hashed. A
// file that differs gives an error wrapping blob.ErrChecksumMismatch, a
// missing one an error wrapping blob.ErrNotFound. It returns the file's
// path and a function that removes a copy (a no-op for a file read in
// place); ReadFile reads it.
func Fetch(ctx context.Context, b blob.Bucket, f File, tempDir string) (path string, remove func(), err error) {
	if lf, ok := b.(blob.LocalFiler); ok {
		return fetchInPlace(ctx, lf, f)
	}
	tmp, err := os.CreateTemp(tempDir, "codapipe-shard-*"+f.Format.Ext())
	if err != nil {
		return "", nil, fmt.Errorf("shard: fetch %s: %w", f.Key, err)
	}
	remove = func() { os.Remove(tmp.Name()) }
	n, sum, err := copyFile(ctx, b, f.Key, tmp)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = checkFetched(f, n, sum, "")
	}
	if err != nil {
		remove()
		return "", nil, fmt.Errorf("shard: file %s: %w", f.Key, err)
	}
	return tmp.Name(), remove, nil
}

// fetchInPlace is Fetch for a local bucket: the file is hashed where it
// is, not copied.
func fetchInPlace(ctx context.Context, b blob.LocalFiler, f File) (string, func(), error) {
	path, info, err := b.LocalFile(ctx, f.Key)
	if err == nil {
		var n int64
		var sum string
		n, sum, err = hashLocal(ctx, path)
		if err == nil {
			err = checkFetched(f, n, sum, info.SHA256)
		}
	}
	if err != nil {
		return "", nil, fmt.Errorf("shard: file %s: %w", f.Key, err)
	}
	return path, func() {}, nil
}

// hashLocal returns the size and hex SHA-256 of the local file at path.
func hashLocal(ctx context.Context, path string) (int64, string, error) {
	r, err := os.Open(path)
	if err != nil {
		return 0, "", err
	}
	defer r.Close()
	h := sha256.New()
	n, err := io.Copy(h, ctxReader{ctx, r})
	return n, hex.EncodeToString(h.Sum(nil)), err
}

// ctxReader stops a long read when its context ends.
type ctxReader struct {
	ctx context.Context
	r   io.Reader
}

func (c ctxReader) Read(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(p)
}

// checkFetched compares a fetched file's size and SHA-256 with the
// manifest's (recorded: the bucket's own SHA-256, checked when the
// manifest gives none).
func checkFetched(f File, n int64, sum, recorded string) error {
	want := f.SHA256
	if want == "" {
		want = recorded
	}
	if (f.Bytes > 0 && n != f.Bytes) || (want != "" && sum != want) {
		return &MismatchError{Bytes: n, SHA256: sum, WantBytes: f.Bytes, WantSHA256: want}
	}
	return nil
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

// ReadVerified reads the rows of the shard file f of a set in b, checked
// against the manifest like Fetch, and calls yield with each (ReadFileWith).
// For a local bucket (blob.LocalFiler) the file's SHA-256 is computed on
// another goroutine while its rows are read in place, so rows reach yield
// before the check has ended: a caller publishes nothing it made of them
// until ReadVerified returns nil. A file that differs from the manifest
// gives a *MismatchError (wrapping blob.ErrChecksumMismatch), reported in
// preference to the read's own error, which such damage often causes.
// Other buckets: Fetch, then ReadFileWith.
func ReadVerified(ctx context.Context, b blob.Bucket, f File, tempDir string, opts ReadOptions, yield func(*Row) error) error {
	lf, ok := b.(blob.LocalFiler)
	if !ok {
		path, remove, err := Fetch(ctx, b, f, tempDir)
		if err != nil {
			return err
		}
		defer remove()
		return ReadFileWith(ctx, path, f.Format, opts, yield)
	}
	path, info, err := lf.LocalFile(ctx, f.Key)
	if err != nil {
		return fmt.Errorf("shard: file %s: %w", f.Key, err)
	}
	hctx, stop := context.WithCancel(ctx)
	defer stop()
	checked := make(chan error, 1)
	go func() { // owned by ReadVerified: it waits for checked
		n, sum, err := hashLocal(hctx, path)
		if err == nil {
			err = checkFetched(f, n, sum, info.SHA256)
		}
		checked <- err
	}()
	rerr := ReadFileWith(ctx, path, f.Format, opts, yield)
	if rerr != nil && !errors.Is(rerr, context.Canceled) {
		// A damaged file's own read error says less than the mismatch.
		if herr := <-checked; herr != nil {
			return fmt.Errorf("shard: file %s: %w", f.Key, herr)
		}
		return rerr
	}
	if rerr != nil {
		stop()
		<-checked
		return rerr
	}
	if herr := <-checked; herr != nil {
		return fmt.Errorf("shard: file %s: %w", f.Key, herr)
	}
	return nil
}
