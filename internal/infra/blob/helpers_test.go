package blob_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/rand/v2"
	"net/http"
	"sync/atomic"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
)

const MiB = 1 << 20

// partSize is the multipart part size of the tests' S3 stores: the smallest S3 accepts, so that
// a multipart upload of three parts takes 11 MiB (largeSize), not 34 MiB at the default 16 MiB.
const partSize = blob.MinPartSize

// largeSize is the size of the tests' large objects: above two parts of partSize, so that an S3
// store sends it as a multipart upload of three parts (5 + 5 + 1 MiB).
const largeSize = 2*partSize + 1*MiB

// backend opens fresh, empty stores of one kind.
type backend struct {
	name string
	open func(t *testing.T) *fixture
	// server is the MinIO server of the S3 backend.
	server *miniotest.Server
}

// fixture is one freshly opened, empty store.
type fixture struct {
	s *blob.Store
	// uploads counts upload requests (PUT and POST) of an S3 store; nil for local.
	uploads *atomic.Int64
	// dir is the directory of a local store.
	dir string
	// bucket is the bucket of an S3 store.
	bucket string
}

// backends returns the local backend and the MinIO backend (one server per calling test, a
// fresh bucket per store).
func backends(t *testing.T) []*backend {
	local := &backend{
		name: "local",
		open: func(t *testing.T) *fixture {
			dir := t.TempDir()
			s, err := blob.Open(context.Background(), "", blob.Config{DefaultDir: dir})
			if err != nil {
				t.Fatal(err)
			}
			return &fixture{s: s, dir: dir}
		},
	}
	return []*backend{local, s3Backend(t, "minio", miniotest.Start), s3Backend(t, "minio-tls", miniotest.StartTLS)}
}

// s3Backend returns a backend on a MinIO server started by start for the calling test, with a
// fresh bucket per store.
func s3Backend(t *testing.T, name string, start func(testing.TB) *miniotest.Server) *backend {
	b := &backend{name: name}
	if _, err := miniotest.Binary(); err == nil {
		b.server = start(t) // lives as long as the calling test
	}
	b.open = func(t *testing.T) *fixture {
		if b.server == nil {
			start(t) // skips, or fails under CI=true
		}
		cfg := b.server.Config()
		cfg.PartSize = partSize
		ct := &countingTransport{rt: b.server.Transport()}
		cfg.Transport = ct
		bucket := b.server.NewBucket(t)
		s, err := blob.Open(context.Background(), "s3://"+bucket+"/conformance", cfg)
		if err != nil {
			t.Fatal(err)
		}
		return &fixture{s: s, uploads: &ct.uploads, bucket: bucket}
	}
	return b
}

// countingTransport counts upload requests.
type countingTransport struct {
	rt      http.RoundTripper
	uploads atomic.Int64
}

func (c *countingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		c.uploads.Add(1)
	}
	return c.rt.RoundTrip(r)
}

// gen returns a reader of n pseudo-random bytes from seed. It has no Size or ReadAt method, so
// the store sees a stream of unknown length.
func gen(seed uint64, n int64) io.Reader {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	return io.LimitReader(rand.NewChaCha8(s), n)
}

// genSum returns the SHA-256 of gen(seed, n), computed by streaming.
func genSum(t testing.TB, seed uint64, n int64) string {
	h := sha256.New()
	if _, err := io.Copy(h, gen(seed, n)); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// sameStream compares got with want chunk by chunk, without holding either whole, and returns the
// SHA-256 of got.
func sameStream(t testing.TB, got, want io.Reader) string {
	t.Helper()
	h := sha256.New()
	a := make([]byte, 1*MiB)
	b := make([]byte, 1*MiB)
	var off int64
	for {
		n, errA := io.ReadFull(got, a)
		m, errB := io.ReadFull(want, b)
		h.Write(a[:n])
		if n != m || !bytes.Equal(a[:n], b[:m]) {
			t.Fatalf("content differs in the MiB at offset %d (got %d bytes, want %d)", off, n, m)
		}
		off += int64(n)
		if errA != errB {
			t.Fatalf("at offset %d: got error %v, want %v", off, errA, errB)
		}
		if errA == io.EOF || errA == io.ErrUnexpectedEOF {
			return hex.EncodeToString(h.Sum(nil))
		}
		if errA != nil {
			t.Fatalf("read at offset %d: %v", off, errA)
		}
	}
}

// readAll reads rc to the end and closes it, returning the content and the read error.
func readAll(rc io.ReadCloser) ([]byte, error) {
	defer rc.Close()
	return io.ReadAll(rc)
}
