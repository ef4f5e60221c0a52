package blob_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/minio/minio-go/v7"
)

// TestS3Checksums uploads 11 MiB streams of unknown size (three parts of at most 5 MiB) with
// each checksum algorithm and checks, with a separate client, that MinIO recorded a multipart object with that checksum,
// and that a small object carries the SHA-256 checksum computed before its single PUT.
func TestS3Checksums(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) { testChecksums(t, srv.Server) })
	}
}

type namedServer struct {
	name string
	*miniotest.Server
}

// servers starts a plain-HTTP and a TLS MinIO server for the test.
func servers(t *testing.T) []namedServer {
	return []namedServer{{"http", miniotest.Start(t)}, {"tls", miniotest.StartTLS(t)}}
}

func testChecksums(t *testing.T, srv *miniotest.Server) {
	raw := srv.Client(t)
	const size = largeSize // three parts of at most partSize
	tests := []struct {
		checksum string
		threads  int
		field    func(minio.ObjectInfo) string
		mode     string
	}{
		{"", 0, func(oi minio.ObjectInfo) string { return oi.ChecksumCRC64NVME }, "FULL_OBJECT"}, // default: crc64nvme
		{"crc32c", 1, func(oi minio.ObjectInfo) string { return oi.ChecksumCRC32C }, "COMPOSITE"},
		{"sha256", 4, func(oi minio.ObjectInfo) string { return oi.ChecksumSHA256 }, "COMPOSITE"},
		{"none", 2, func(oi minio.ObjectInfo) string { return "" }, ""},
	}
	for i, tc := range tests {
		name := tc.checksum
		if name == "" {
			name = "default"
		}
		t.Run(name, func(t *testing.T) {
			ctx := t.Context()
			cfg := srv.Config()
			cfg.PartSize = partSize
			cfg.Checksum = tc.checksum
			cfg.UploadThreads = tc.threads
			b, err := blob.OpenBucket(ctx, srv.URL("checksums/"+name), cfg)
			if err != nil {
				t.Fatal(err)
			}
			seed := uint64(100 + i)
			want := genSum(t, seed, size)
			info, err := b.Put(ctx, "big.bin", gen(seed, size), -1, blob.PutOptions{})
			if err != nil {
				t.Fatalf("Put: %v", err)
			}
			if info.SHA256 != want {
				t.Fatalf("Put sha256 %s, want %s", info.SHA256, want)
			}
			oi, err := raw.StatObject(ctx, srv.Bucket, "checksums/"+name+"/big.bin", minio.StatObjectOptions{Checksum: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("ETag %s, checksum type %q, crc64nvme %q crc32c %q sha256 %q", oi.ETag, oi.ChecksumMode, oi.ChecksumCRC64NVME, oi.ChecksumCRC32C, oi.ChecksumSHA256)
			if !strings.HasSuffix(oi.ETag, "-3") {
				t.Errorf("ETag %q: want a multipart upload of 3 parts (5 MiB parts)", oi.ETag)
			}
			if tc.mode != "" && (tc.field(oi) == "" || oi.ChecksumMode != tc.mode) {
				t.Errorf("checksum %q mode %q recorded, want a %s checksum", tc.field(oi), oi.ChecksumMode, tc.mode)
			}
			rc, _, err := b.Get(ctx, "big.bin")
			if err != nil {
				t.Fatal(err)
			}
			if got := sameStream(t, rc, gen(seed, size)); got != want {
				t.Fatalf("read back sha256 %s, want %s", got, want)
			}
			rc.Close()

			// One PUT: the SHA-256 computed before the upload is the request's checksum.
			small := []byte("a small object in a single PUT")
			if _, err := b.Put(ctx, "small.txt", bytes.NewReader(small), int64(len(small)), blob.PutOptions{}); err != nil {
				t.Fatal(err)
			}
			oi, err = raw.StatObject(ctx, srv.Bucket, "checksums/"+name+"/small.txt", minio.StatObjectOptions{Checksum: true})
			if err != nil {
				t.Fatal(err)
			}
			sum, _ := hex.DecodeString(blob.SumSHA256(small))
			if tc.checksum != "none" && oi.ChecksumSHA256 != base64.StdEncoding.EncodeToString(sum) {
				t.Errorf("small object checksum sha256 %q, want %q", oi.ChecksumSHA256, base64.StdEncoding.EncodeToString(sum))
			}
			if oi.UserMetadata["Sha256"] != blob.SumSHA256(small) {
				t.Errorf("X-Amz-Meta-Sha256 = %q", oi.UserMetadata["Sha256"])
			}
		})
	}
}

// corruptingTransport flips one byte in the body of the first upload request carrying at least
// min bytes.
type corruptingTransport struct {
	rt       http.RoundTripper
	min      int64
	done     atomic.Bool
	rejected atomic.Int64 // 4xx answers to uploads
}

func (c *corruptingTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Body != nil && r.ContentLength >= c.min && c.done.CompareAndSwap(false, true) {
		r = r.Clone(r.Context())
		r.Body = &flipReader{rc: r.Body, at: r.ContentLength / 2}
	}
	resp, err := c.rt.RoundTrip(r)
	if err == nil && r.Method == http.MethodPut && resp.StatusCode >= 400 && resp.StatusCode < 500 {
		c.rejected.Add(1)
	}
	return resp, err
}

type flipReader struct {
	rc  io.ReadCloser
	off int64
	at  int64
}

func (f *flipReader) Read(p []byte) (int, error) {
	n, err := f.rc.Read(p)
	if f.at >= f.off && f.at < f.off+int64(n) {
		p[f.at-f.off] ^= 0x55
	}
	f.off += int64(n)
	return n, err
}

func (f *flipReader) Close() error { return f.rc.Close() }

// TestS3CorruptedUploadRejected corrupts one byte on the wire and checks that MinIO refuses the
// request, so that a corrupt object is never stored: the upload either fails or is retried
// intact.
func TestS3CorruptedUploadRejected(t *testing.T) {
	for _, srv := range servers(t) {
		t.Run(srv.name, func(t *testing.T) { testCorruptedUpload(t, srv.Server) })
	}
}

func testCorruptedUpload(t *testing.T, srv *miniotest.Server) {
	for _, tc := range []struct {
		name string
		size int
	}{
		{"singlePut", 1 * MiB},
		{"multipart", largeSize},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			ct := &corruptingTransport{rt: srv.Transport(), min: 512 << 10}
			cfg := srv.Config()
			cfg.PartSize = partSize
			cfg.Transport = ct
			s, err := blob.Open(ctx, srv.URL("corrupt/"+tc.name), cfg)
			if err != nil {
				t.Fatal(err)
			}
			data := bytes.Repeat([]byte(tc.name), tc.size/len(tc.name))
			ref, err := s.PutBytes(ctx, data)
			if !ct.done.Load() {
				t.Fatal("no request was corrupted")
			}
			if ct.rejected.Load() == 0 {
				t.Errorf("the server accepted a corrupted upload request")
			}
			if err != nil {
				t.Fatalf("Put was not retried after the server refused a damaged request: %v", err)
			}
			got, err := s.GetBytes(ctx, ref.SHA256)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("stored content after a retried upload: %d bytes, %v", len(got), err)
			}
		})
	}
	// A stream cannot be re-read: the Put fails, and nothing is stored.
	t.Run("stream", func(t *testing.T) {
		ctx := t.Context()
		ct := &corruptingTransport{rt: srv.Transport(), min: 512 << 10}
		cfg := srv.Config()
		cfg.PartSize = partSize
		cfg.Transport = ct
		b, err := blob.OpenBucket(ctx, srv.URL("corrupt/stream"), cfg)
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Put(ctx, "stream.bin", gen(9, largeSize), -1, blob.PutOptions{})
		t.Logf("Put of a stream after a corrupted request: %v", err)
		if err == nil {
			t.Fatal("Put of a damaged stream succeeded")
		}
		if _, err := b.Stat(ctx, "stream.bin"); !errors.Is(err, blob.ErrNotFound) {
			t.Fatalf("an object exists after the failed Put (%v)", err)
		}
	})
}

func TestS3OpenErrors(t *testing.T) {
	srv := miniotest.Start(t)
	closed := func() string { // an endpoint nobody listens on
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		return "http://" + l.Addr().String()
	}()
	tests := []struct {
		name   string
		url    string
		modify func(*blob.Config)
		is     error
		want   []string // substrings of the message
	}{
		{"wrongSecret", srv.URL(""), func(c *blob.Config) { c.SecretAccessKey = "wrong-secret-key" },
			blob.ErrAccessDenied, []string{"SignatureDoesNotMatch", "check the credentials (Config)", srv.Endpoint, srv.Bucket}},
		{"unknownAccessKey", srv.URL(""), func(c *blob.Config) { c.AccessKeyID = "nobody" },
			blob.ErrAccessDenied, []string{"InvalidAccessKeyId", "check the credentials", srv.Endpoint}},
		{"missingBucket", "s3://no-such-bucket/p", nil,
			blob.ErrBucketNotFound, []string{`bucket "no-such-bucket"`, srv.Endpoint, blob.CreateBucketEnv + "=true"}},
		{"unreachable", "s3://bucket", func(c *blob.Config) { c.Endpoint = closed; c.MaxRetries = 2 },
			nil, []string{"cannot reach " + closed, "check the endpoint"}},
		{"httpsToHTTP", srv.URL(""), func(c *blob.Config) { c.Endpoint = strings.TrimPrefix(srv.Endpoint, "http://") },
			nil, []string{"plain HTTP", "http://host:port"}},
		{"noCredentials", srv.URL(""), func(c *blob.Config) {
			c.AccessKeyID, c.SecretAccessKey = "", ""
			c.Getenv = func(k string) string {
				if k == "AWS_SHARED_CREDENTIALS_FILE" {
					return "/nonexistent/credentials"
				}
				return ""
			}
		}, nil, []string{"no S3 credentials", "AWS_ACCESS_KEY_ID"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cfg := srv.Config()
			cfg.OpTimeout = 10 * time.Second
			if tc.modify != nil {
				tc.modify(&cfg)
			}
			start := time.Now()
			_, err := blob.Open(t.Context(), tc.url, cfg)
			t.Logf("after %v: %v", time.Since(start).Round(time.Millisecond), err)
			if err == nil {
				t.Fatal("Open succeeded")
			}
			if tc.is != nil && !errors.Is(err, tc.is) {
				t.Errorf("error is not %v", tc.is)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error does not mention %q", w)
				}
			}
		})
	}
	t.Run("createBucket", func(t *testing.T) {
		cfg := srv.Config()
		cfg.CreateBucket = true
		s, err := blob.Open(t.Context(), "s3://created-on-open/x", cfg)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.PutBytes(t.Context(), []byte("ok")); err != nil {
			t.Fatal(err)
		}
		if _, err := blob.Open(t.Context(), "s3://created-on-open/x", cfg); err != nil {
			t.Fatalf("second Open with CreateBucket: %v", err)
		}
	})
	t.Run("createBucketEnv", func(t *testing.T) {
		cfg := srv.Config()
		env := map[string]string{blob.CreateBucketEnv: "true"}
		cfg.Getenv = func(k string) string { return env[k] }
		if _, err := blob.Open(t.Context(), "s3://created-by-env/x", cfg); err != nil {
			t.Fatalf("Open with %s=true: %v", blob.CreateBucketEnv, err)
		}
		env[blob.CreateBucketEnv] = ""
		if _, err := blob.Open(t.Context(), "s3://created-by-env/x", cfg); err != nil {
			t.Fatalf("the bucket %s=true created is not there: %v", blob.CreateBucketEnv, err)
		}
	})
}

// TestS3EnvironmentFallback reaches MinIO through the environment variables alone.
func TestS3EnvironmentFallback(t *testing.T) {
	srv := miniotest.Start(t)
	for _, tc := range []struct {
		name string
		env  map[string]string
	}{
		{"aws", map[string]string{"AWS_ENDPOINT_URL": srv.Endpoint, "AWS_ACCESS_KEY_ID": srv.AccessKey, "AWS_SECRET_ACCESS_KEY": srv.SecretKey, "AWS_REGION": miniotest.Region}},
		{"minioRoot", map[string]string{"MINIO_ENDPOINT": srv.Endpoint, "MINIO_ROOT_USER": srv.AccessKey, "MINIO_ROOT_PASSWORD": srv.SecretKey}},
		{"s3EndpointMinioKeys", map[string]string{"S3_ENDPOINT": srv.Endpoint, "MINIO_ACCESS_KEY": srv.AccessKey, "MINIO_SECRET_KEY": srv.SecretKey, "S3_FORCE_PATH_STYLE": "true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := blob.Config{Getenv: func(k string) string { return tc.env[k] }}
			s, err := blob.Open(t.Context(), srv.URL("env/"+tc.name), cfg)
			if err != nil {
				t.Fatal(err)
			}
			ref, err := s.PutBytes(t.Context(), []byte(tc.name))
			if err != nil {
				t.Fatal(err)
			}
			if got, err := s.GetBytes(t.Context(), ref.SHA256); err != nil || string(got) != tc.name {
				t.Fatalf("GetBytes = %q, %v", got, err)
			}
		})
	}
}

// stallTransport never answers HEAD requests once armed; it waits for the request's context.
type stallTransport struct {
	rt    http.RoundTripper
	armed atomic.Bool
}

func (s *stallTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.armed.Load() && r.Method == http.MethodHead {
		<-r.Context().Done()
		return nil, r.Context().Err()
	}
	return s.rt.RoundTrip(r)
}

// TestS3Deadline checks that a server that stops answering costs an
// OpTimeout, not forever. The timeout is long enough for blob.Open's own
// calls on a loaded machine; the bound on the stalled call only proves it
// ends (a hang would last until the test binary's timeout).
func TestS3Deadline(t *testing.T) {
	srv := miniotest.Start(t)
	st := &stallTransport{rt: http.DefaultTransport.(*http.Transport).Clone()}
	cfg := srv.Config()
	cfg.Transport = st
	cfg.OpTimeout = 2 * time.Second
	s, err := blob.Open(t.Context(), srv.URL(""), cfg)
	if err != nil {
		t.Fatal(err)
	}
	st.armed.Store(true)
	start := time.Now()
	_, err = s.Stat(t.Context(), blob.SumSHA256(nil))
	took := time.Since(start)
	t.Logf("after %v: %v", took.Round(time.Millisecond), err)
	if err == nil || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "deadline") {
		t.Errorf("Stat against a stalled server: %v, want a deadline error", err)
	}
	if took > time.Minute {
		t.Errorf("Stat took %v with OpTimeout %v", took, cfg.OpTimeout)
	}
}

// TestS3SpoolCleanup checks that Store.Put leaves nothing in TempDir, whether it uploads or not.
func TestS3SpoolCleanup(t *testing.T) {
	srv := miniotest.Start(t)
	cfg := srv.Config()
	cfg.TempDir = t.TempDir()
	s, err := blob.Open(t.Context(), srv.URL("spool"), cfg)
	if err != nil {
		t.Fatal(err)
	}
	for range 2 { // the second Put is the no-op path
		if _, err := s.Put(t.Context(), gen(7, 3*MiB)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Put(ctx, gen(8, 3*MiB)); !errors.Is(err, context.Canceled) {
		t.Errorf("Put with a cancelled context: %v", err)
	}
	if entries, _ := os.ReadDir(cfg.TempDir); len(entries) != 0 {
		t.Errorf("TempDir holds %d files after Put", len(entries))
	}
}
