package blob

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
)

// hashReader hashes and counts what passes through it. At EOF it checks the expected size and
// SHA-256 (when set) and returns an error wrapping ErrChecksumMismatch instead of io.EOF when they
// differ; reading more than the expected size fails at once. It also stops with the context's
// error once ctx is done. Errors are sticky.
type hashReader struct {
	ctx      context.Context // nil: not checked
	r        io.Reader
	h        hash.Hash
	n        int64
	wantSize int64  // -1: unknown
	wantSHA  string // "": unknown
	err      error
	done     bool // EOF reached and verified
}

func newHashReader(ctx context.Context, r io.Reader, wantSize int64, wantSHA string) *hashReader {
	return &hashReader{ctx: ctx, r: r, h: sha256.New(), wantSize: wantSize, wantSHA: wantSHA}
}

func (v *hashReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.ctx != nil {
		if err := v.ctx.Err(); err != nil {
			v.err = err
			return 0, err
		}
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	if v.wantSize >= 0 && v.n > v.wantSize {
		err = fmt.Errorf("%w: content longer than the expected %d bytes", ErrChecksumMismatch, v.wantSize)
	} else if err == io.EOF {
		err = v.check()
	}
	if err != nil {
		v.err = err
	}
	return n, err
}

// check compares what was read with the expectations; it returns io.EOF when they hold.
func (v *hashReader) check() error {
	if v.wantSize >= 0 && v.n != v.wantSize {
		return fmt.Errorf("%w: got %d bytes, want %d", ErrChecksumMismatch, v.n, v.wantSize)
	}
	if v.wantSHA != "" {
		if got := v.sum(); got != v.wantSHA {
			return fmt.Errorf("%w: content has sha256 %s, want %s", ErrChecksumMismatch, got, v.wantSHA)
		}
	}
	v.done = true
	return io.EOF
}

// sum returns the hex SHA-256 of what has been read so far.
func (v *hashReader) sum() string { return hex.EncodeToString(v.h.Sum(nil)) }

// verifyingReadCloser is the reader returned by Get: a hashReader over an object's body whose
// errors are wrapped with the operation and key.
type verifyingReadCloser struct {
	hr      *hashReader
	closer  io.Closer
	op, key string
	cancel  context.CancelFunc // released on Close; may be nil
}

func newVerifyingReadCloser(rc io.ReadCloser, op, key string, wantSize int64, wantSHA string, cancel context.CancelFunc) *verifyingReadCloser {
	return &verifyingReadCloser{hr: newHashReader(nil, rc, wantSize, wantSHA), closer: rc, op: op, key: key, cancel: cancel}
}

func (v *verifyingReadCloser) Read(p []byte) (int, error) {
	n, err := v.hr.Read(p)
	if err != nil && err != io.EOF {
		err = opError(v.op, v.key, err)
	}
	return n, err
}

func (v *verifyingReadCloser) Close() error {
	err := v.closer.Close()
	if v.cancel != nil {
		v.cancel()
	}
	if err != nil {
		return opError(v.op, v.key, err)
	}
	return nil
}

// SumSHA256 returns the lower-case hex SHA-256 of b, the name a Store gives to b.
func SumSHA256(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
