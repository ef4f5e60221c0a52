package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/clock"
)

// uploadAttempts is how many times one file's upload is tried when it fails for a reason that a
// new attempt may not meet again (see retryable).
const uploadAttempts = 3

// retryPause is the pause before the second attempt of an upload; it doubles for each further
// one.
const retryPause = 250 * time.Millisecond

// progressStep is how many bytes read for upload, across all files, make a progress event
// between the events of completed files.
const progressStep = 8 << 20

// streamAbove is the size above which a file is uploaded as a stream rather than with PutFile:
// the blob store's default part size, above which S3 uploads are multipart.
const streamAbove = blob.DefaultPartSize

// upload stores the file f at f.key with the manifest's size and SHA-256 (PutOptions.SHA256, so
// that the content is verified against it): files up to streamAbove with Bucket.PutFile, larger
// ones as a plain stream of the open file through Bucket.Put. count is told how many bytes have
// been read (negative after a failed attempt, to take them back).
//
// Why a stream for large files: the S3 backend hashes a rewindable source completely before
// uploading it, so that it knows the SHA-256 it records; given PutOptions.SHA256, a stream larger
// than the part size is hashed once, as it is sent, and still verified (a mismatch fails the
// upload before its last part, and the multipart upload is aborted). That saves a full read and
// hash of every large file: about 10 % of the export's rate in BenchmarkExport. Smaller files would be
// read into memory as a stream; PutFile sends them from the file. What the stream loses, the
// backend's own retry of an upload the server found damaged in transit, upload does itself, for
// every file.
func upload(ctx context.Context, dst blob.Bucket, f file, count func(int64)) error {
	var err error
	pause := retryPause
	for attempt := 1; attempt <= uploadAttempts; attempt++ {
		if attempt > 1 {
			if cerr := clock.Sleep(ctx, pause); cerr != nil {
				return fmt.Errorf("export: %s: %w (after: %w)", f.path, cerr, err)
			}
			pause *= 2
		}
		var n int64
		n, err = uploadOnce(ctx, dst, f, count)
		if err == nil {
			return nil
		}
		count(-n)
		if !retryable(ctx, err) {
			break
		}
		if errors.Is(err, blob.ErrChecksumMismatch) {
			// Damaged on the way, or the file is not what the manifest says: hash it to tell.
			sum, size, herr := hashFile(ctx, f.local)
			switch {
			case herr != nil:
				return fmt.Errorf("export: %s: %w", f.path, herr)
			case size != f.size || sum != f.sha256:
				return fmt.Errorf("export: %s: the file does not match the manifest: %d bytes with sha256 %s, the manifest says %d bytes, sha256 %s; was it changed after the build? (%w)",
					f.path, size, sum, f.size, f.sha256, err)
			}
		}
	}
	return fmt.Errorf("export: %s: %w", f.path, err)
}

// uploadOnce makes one attempt and returns how many bytes of the file it read.
func uploadOnce(ctx context.Context, dst blob.Bucket, f file, count func(int64)) (int64, error) {
	fh, err := os.Open(f.local)
	if err != nil {
		return 0, localError{err}
	}
	defer fh.Close()
	fi, err := fh.Stat()
	if err != nil {
		return 0, localError{err}
	}
	if fi.Size() != f.size {
		return 0, localError{fmt.Errorf("%s has %d bytes, the manifest says %d; was it changed after the build?", f.local, fi.Size(), f.size)}
	}
	po := blob.PutOptions{SHA256: f.sha256, ContentType: contentType(f.path)}
	var info blob.Info
	var n int64
	if f.size <= streamAbove {
		fh.Close()
		info, err = dst.PutFile(ctx, f.key, f.local, po)
		if err == nil {
			n = f.size
			count(n)
		}
	} else {
		r := &countingReader{r: fh, count: count}
		info, err = dst.Put(ctx, f.key, r, f.size, po)
		n = r.n
	}
	if err != nil {
		return n, err
	}
	if info.Size != f.size || info.SHA256 != f.sha256 {
		return n, fmt.Errorf("stored %d bytes with sha256 %s, the manifest says %d bytes, sha256 %s", info.Size, info.SHA256, f.size, f.sha256)
	}
	return n, nil
}

// retryable reports whether a failed upload is worth another attempt: not when the export is
// cancelled or out of time (a deadline is a whole TransferTimeout), the local file cannot be
// read, the credentials are refused, the bucket is missing or the key invalid. Everything else
// is: a request the server found damaged in transit (ErrChecksumMismatch, which upload tells
// apart from a file that does not match the manifest), or a network or server error that
// outlasted the client's own retries.
func retryable(ctx context.Context, err error) bool {
	var le localError
	switch {
	case ctx.Err() != nil, errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded), errors.As(err, &le),
		errors.Is(err, blob.ErrAccessDenied), errors.Is(err, blob.ErrBucketNotFound), errors.Is(err, blob.ErrInvalidKey):
		return false
	}
	return true
}

// localError marks an error reading the local file.
type localError struct{ err error }

func (e localError) Error() string { return e.err.Error() }
func (e localError) Unwrap() error { return e.err }

// countingReader passes reads through and tells count how many bytes each returned. It has no
// other methods than Read, so that the bucket sees a stream.
type countingReader struct {
	r     io.Reader
	n     int64
	count func(int64)
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	if n > 0 {
		c.n += int64(n)
		c.count(int64(n))
	}
	return n, err
}
