// Package blob is codapipe's object storage: a named-object layer (Bucket) used for shards,
// manifests and the SFT dataset, and a content-addressed layer on top of it (Store) used for
// screenshots and large message bodies, keyed by SHA-256.
//
// Two backends sit behind the same interface, selected by URL (see ParseURL and Open):
//
//   - a local directory ("" → the caller's default, a plain path, or file:///path), with atomic
//     writes (temporary file in the target directory, fsync, rename, fsync of the directory);
//   - S3 or MinIO through github.com/minio/minio-go/v7 (s3://bucket/prefix), with the endpoint,
//     region and credentials from Config or the usual environment variables, multipart uploads with
//     checksums, retries, and a deadline on every network call.
//
// Keys are slash-separated relative names such as "shards/run-1/part-0000.arrow". The Store puts
// its objects under "sha256/<first 2 hex digits>/<64 hex digits>" in the same bucket.
//
// Missing objects are reported with an error wrapping ErrNotFound; content that does not match its
// recorded SHA-256 is reported at EOF of the reader with an error wrapping ErrChecksumMismatch.
// docs/storage.md describes the behaviour in full.
package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"iter"
	"os"
	"strings"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/minio/minio-go/v7"
)

// Sentinel errors. Every error returned by this package is wrapped with the operation and key,
// for example "blob: get sha256/ab/ab12…: not found"; test for these with errors.Is.
var (
	// ErrNotFound reports that the object (or, for Store, the hash) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrChecksumMismatch reports content whose SHA-256 (or size) differs from the one expected:
	// returned by a reader at EOF when stored content is corrupt, or by Put when
	// PutOptions.SHA256 does not match what was written.
	ErrChecksumMismatch = errors.New("checksum mismatch")
	// ErrBucketNotFound reports that the S3 bucket named in the URL does not exist
	// (see Config.CreateBucket).
	ErrBucketNotFound = errors.New("bucket does not exist")
	// ErrAccessDenied reports that the S3 server rejected the credentials or denied the operation.
	ErrAccessDenied = errors.New("access denied")
	// ErrInvalidKey reports a key or prefix that is not a valid object name (see ValidateKey).
	ErrInvalidKey = errors.New("invalid key")
)

// Damaged reports whether err says that stored content does not match its checksum: damage in
// the store that no later read repairs (Store.GetBytes reads twice before it says so). Every
// stage treats it as permanent — a dead letter or a clear error naming the content, never a
// retry. An upload the server refused as damaged in transit is not stored damage and is not
// Damaged (the upload is repeated).
func Damaged(err error) bool {
	return errors.Is(err, ErrChecksumMismatch) && !errors.Is(err, errInTransit)
}

// Refused reports whether err is a store refusing writes whatever their key
// or content: full (ENOSPC, EDQUOT, MinIO's XMinioStorageFull, a quota),
// read-only (EROFS), or not ours to write (permissions, access denied, no
// such bucket). Every writer would meet it again, unlike a transient
// failure or damaged content.
func Refused(err error) bool {
	for _, e := range []error{syscall.ENOSPC, syscall.EDQUOT, syscall.EROFS, syscall.EACCES, syscall.EPERM, ErrAccessDenied, ErrBucketNotFound} {
		if errors.Is(err, e) {
			return true
		}
	}
	var er minio.ErrorResponse
	if errors.As(err, &er) {
		switch er.Code {
		case "XMinioStorageFull", "QuotaExceeded", "XMinioAdminBucketQuotaExceeded", "StorageFull":
			return true
		}
	}
	return false
}

// Info describes a stored object.
type Info struct {
	// Key is the object's name within the bucket (without the URL's prefix).
	Key string
	// Size is the object's length in bytes.
	Size int64
	// SHA256 is the lower-case hex SHA-256 of the content when it is known: always in the result of
	// Put and for Store objects; from Stat and Get when it was recorded at write time (S3 user
	// metadata X-Amz-Meta-Sha256, a user.codapipe.sha256 extended attribute on local files);
	// empty in Bucket.List results.
	SHA256 string
	// ModTime is when the object was last written.
	ModTime time.Time
}

// Ref is a reference to content in a Store: its SHA-256 (lower-case hex) and size.
type Ref struct {
	// SHA256 is the lower-case hex SHA-256 of the content; it is also the content's name.
	SHA256 string
	// Size is the content length in bytes.
	Size int64
}

// PutOptions are optional settings for Bucket.Put and Bucket.PutFile.
type PutOptions struct {
	// ContentType is recorded on S3 objects (default application/octet-stream); the local backend
	// ignores it.
	ContentType string
	// SHA256, when set, is the lower-case hex SHA-256 the caller expects the content to have. It is
	// recorded before the upload starts (so Stat returns it even for large streamed S3 objects) and
	// it is verified: a mismatch fails the Put with ErrChecksumMismatch and the object is not
	// left behind.
	SHA256 string
}

// Bucket stores named objects. Implementations are safe for concurrent use. A Put replaces an
// existing object atomically: readers see either the old or the new content, never a mix.
type Bucket interface {
	// Put stores the content of r under key. size is the content length, or -1 when unknown; when
	// it is given and r yields a different number of bytes the Put fails and stores nothing.
	// The returned Info always carries the SHA-256 of what was stored.
	Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (Info, error)
	// PutFile stores the content of the local file at path under key.
	PutFile(ctx context.Context, key, path string, opts PutOptions) (Info, error)
	// Get opens the object for reading. The caller must close the reader. When the object's
	// SHA-256 was recorded at write time the reader verifies it and returns an error wrapping
	// ErrChecksumMismatch instead of io.EOF if the content does not match.
	Get(ctx context.Context, key string) (io.ReadCloser, Info, error)
	// Stat returns the object's Info, or an error wrapping ErrNotFound.
	Stat(ctx context.Context, key string) (Info, error)
	// List yields every object whose key starts with prefix (a plain string prefix, "" for all),
	// sorted by key (byte order). An error is yielded once, with a zero Info, and ends the listing.
	List(ctx context.Context, prefix string) iter.Seq2[Info, error]
	// Delete removes the object. Deleting a missing object is not an error.
	Delete(ctx context.Context, key string) error
	// String describes the location for logs and messages, e.g. "file:///data/blobs" or
	// "s3://bucket/prefix at http://127.0.0.1:9000".
	String() string
}

// maxKeyLen bounds keys so that S3 (1024 bytes including the URL prefix) and local file systems
// (255 bytes per path element on most) accept them.
const maxKeyLen = 900

// tmpPrefix starts the names of temporary files and of the spool directory of the local backend;
// keys whose segments start with it are reserved.
const tmpPrefix = ".tmp"

// ValidateKey reports whether key is a valid object name: non-empty, at most 900 bytes of UTF-8
// without control characters or backslashes, slash-separated segments that are neither empty,
// "." nor "..", and no segment starting with ".tmp" (reserved for temporary files). The same rules
// apply to both backends so that code behaves identically on each. The returned error wraps
// ErrInvalidKey.
func ValidateKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty", ErrInvalidKey)
	}
	if err := validatePrefix(key); err != nil {
		return err
	}
	if strings.HasSuffix(key, "/") {
		return fmt.Errorf("%w %q: ends with a slash", ErrInvalidKey, key)
	}
	if last := key[strings.LastIndexByte(key, '/')+1:]; last == "." || last == ".." {
		return fmt.Errorf("%w %q: %q segment", ErrInvalidKey, key, last)
	}
	return nil
}

// validatePrefix checks a List prefix: the rules of ValidateKey, except that it may be empty, may
// end with a slash and its last segment may be incomplete.
func validatePrefix(p string) error {
	if len(p) > maxKeyLen {
		return fmt.Errorf("%w: %d bytes, limit %d", ErrInvalidKey, len(p), maxKeyLen)
	}
	if !utf8.ValidString(p) {
		return fmt.Errorf("%w %q: not UTF-8", ErrInvalidKey, p)
	}
	for _, r := range p {
		if r < 0x20 || r == 0x7f || r == '\\' {
			return fmt.Errorf("%w %q: control character or backslash", ErrInvalidKey, p)
		}
	}
	if strings.HasPrefix(p, "/") {
		return fmt.Errorf("%w %q: starts with a slash", ErrInvalidKey, p)
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		switch {
		case s == "" && !last:
			return fmt.Errorf("%w %q: empty path segment", ErrInvalidKey, p)
		case (s == "." || s == "..") && !last:
			return fmt.Errorf("%w %q: %q segment", ErrInvalidKey, p, s)
		case strings.HasPrefix(s, tmpPrefix):
			return fmt.Errorf("%w %q: segments starting with %q are reserved", ErrInvalidKey, p, tmpPrefix)
		}
	}
	return nil
}

// opError wraps err with the operation and key: "blob: get shards/x: not found".
func opError(op, key string, err error) error {
	return fmt.Errorf("blob: %s %s: %w", op, key, err)
}

// putFile is Bucket.PutFile for a bucket whose Put needs nothing more: it
// Puts the content of the regular file at path with its size.
func putFile(ctx context.Context, b Bucket, key, path string, opts PutOptions) (Info, error) {
	f, err := os.Open(path)
	if err != nil {
		return Info{}, opError("put", key, err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Info{}, opError("put", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, opError("put", key, fmt.Errorf("%s is not a regular file", path))
	}
	return b.Put(ctx, key, f, fi.Size(), opts)
}

// ReadAll reads the object under key whole, verified as Bucket.Get
// verifies it: its errors wrap ErrNotFound and ErrChecksumMismatch.
func ReadAll(ctx context.Context, b Bucket, key string) ([]byte, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	body, err := io.ReadAll(rc)
	if err != nil {
		return nil, fmt.Errorf("blob: read %s in %s: %w", key, b, err)
	}
	return body, nil
}
