// Package miniotest starts a real MinIO server for tests of the S3 code paths.
//
// Each call to Start launches its own server process (about half a second on 2 cores) on
// 127.0.0.1 with free random ports for the API and the console, a data directory in t.TempDir(),
// a random root user and password, and one freshly created bucket; Server.NewBucket adds more.
// The server is stopped when the test ends (SIGTERM, then SIGKILL after 5 s) and its log is
// printed if the test failed. A per-test server keeps tests independent (no shared state, no
// ordering effects) at a cost that is small next to the tests themselves; tests that want many
// buckets share one server through NewBucket. Server.Stop kills a server (a blob-store outage) and
// Server.Restart brings it back on the same address and data directory.
//
// StartTLS starts the server with HTTPS and a self-signed certificate for 127.0.0.1 instead;
// Server.Transport trusts it, and Server.Config uses that transport. This exercises the code path
// of real S3 endpoints, where minio-go sends unsigned payloads protected by checksums instead of
// signing every chunk of the body.
//
// The binary is <repo root>/.bin/minio (built by `make tools`; the repo root is the nearest
// directory above the working directory holding go.mod), or the path in $CODAPIPE_MINIO. When it
// is missing the test is skipped, except under CI=true, where it fails: a missing MinIO is a CI
// failure, not a reason to skip the S3 tests silently.
package miniotest

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/codapipe/codapipe/internal/testkit/toolbin"
	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

// EnvBinary names the environment variable that overrides the MinIO binary's path.
const EnvBinary = "CODAPIPE_MINIO"

// Region is the region the test server reports.
const Region = "us-east-1"

// readyTimeout bounds the wait for a started server to answer its liveness probe.
const readyTimeout = 30 * time.Second

// Server is a running MinIO server owned by one test.
type Server struct {
	// Endpoint is the API's base URL, "http://127.0.0.1:<port>".
	Endpoint string
	// AccessKey and SecretKey are the root credentials.
	AccessKey string
	SecretKey string
	// Bucket is a bucket created for the test.
	Bucket string
	// Dir is the server's data directory.
	Dir string

	mu   sync.Mutex          // guards proc across Stop and Restart
	proc *servertest.Process // the current process
	bin  string              // the binary, its arguments and environment, for Restart
	args []string            //
	env  []string            //
	log  *syncio.Buffer
	ca   *x509.CertPool // the certificate to trust, for a TLS server
}

// URL returns the blob store URL of the test bucket under prefix: "s3://<bucket>/<prefix>"
// ("s3://<bucket>" for an empty prefix).
func (s *Server) URL(prefix string) string {
	u := "s3://" + s.Bucket
	if p := strings.Trim(prefix, "/"); p != "" {
		u += "/" + p
	}
	return u
}

// Transport returns a new HTTP transport for this server: one that trusts its certificate when it
// runs TLS.
func (s *Server) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	if s.ca != nil {
		tr.TLSClientConfig = &tls.Config{RootCAs: s.ca, MinVersion: tls.VersionTLS12}
	}
	return tr
}

// Config returns a blob.Config that reaches this server with its root credentials. It sets every
// S3 field explicitly and ignores the process environment, so tests do not pick up a developer's
// AWS_* or MINIO_* variables. For a TLS server it carries a Transport that trusts the server.
func (s *Server) Config() blob.Config {
	var rt http.RoundTripper
	if s.ca != nil {
		rt = s.Transport()
	}
	return blob.Config{
		Transport:       rt,
		Endpoint:        s.Endpoint,
		Region:          Region,
		AccessKeyID:     s.AccessKey,
		SecretAccessKey: s.SecretKey,
		PathStyle:       true,
		Getenv:          func(string) string { return "" },
	}
}

// Setenv points the S3 settings of the process environment (AWS_ENDPOINT_URL, AWS_REGION,
// AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY) at this server and its root credentials until the test
// ends, for tests of the commands, which read them there. Like t.Setenv, it cannot be used in
// parallel tests.
func (s *Server) Setenv(t testing.TB) {
	t.Helper()
	for _, kv := range [][2]string{
		{"AWS_ENDPOINT_URL", s.Endpoint},
		{"AWS_REGION", Region},
		{"AWS_ACCESS_KEY_ID", s.AccessKey},
		{"AWS_SECRET_ACCESS_KEY", s.SecretKey},
	} {
		t.Setenv(kv[0], kv[1])
	}
}

// Log returns what the server has written to stdout and stderr so far.
func (s *Server) Log() string { return s.log.String() }

// Client returns a minio-go client with the root credentials, for tests that inspect objects
// directly.
func (s *Server) Client(t testing.TB) *minio.Client {
	t.Helper()
	host, _ := strings.CutPrefix(s.Endpoint, "http://")
	host, _ = strings.CutPrefix(host, "https://")
	c, err := minio.New(host, &minio.Options{
		Creds:        credentials.NewStaticV4(s.AccessKey, s.SecretKey, ""),
		Region:       Region,
		BucketLookup: minio.BucketLookupPath,
		Secure:       s.ca != nil,
		Transport:    s.Transport(),
	})
	if err != nil {
		t.Fatalf("miniotest: client: %v", err)
	}
	return c
}

// NewBucket creates another empty bucket on the server and returns its name.
func (s *Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := "test-" + randHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := s.Client(t).MakeBucket(ctx, name, minio.MakeBucketOptions{Region: Region}); err != nil {
		t.Fatalf("miniotest: create bucket %s: %v\nserver log:\n%s", name, err, s.Log())
	}
	return name
}

// Binary returns the path of the MinIO binary: $CODAPIPE_MINIO, or .bin/minio in the repository
// root found by walking up from the working directory to go.mod. The error says how to get it.
func Binary() (string, error) { return toolbin.Find(EnvBinary, binName) }

// binName is the binary's name in .bin/.
const binName = "minio"

// Start launches a MinIO server for the test (or benchmark) and creates one bucket. When the
// binary is missing it skips the test, or fails it when CI=true.
func Start(t testing.TB) *Server {
	t.Helper()
	return start(t, false)
}

// StartTLS is Start with HTTPS (see the package documentation).
func StartTLS(t testing.TB) *Server {
	t.Helper()
	return start(t, true)
}

func start(t testing.TB, useTLS bool) *Server {
	t.Helper()
	bin := servertest.Binary(t, EnvBinary, binName, "MinIO")
	var s *Server
	var err error
	for attempt := 1; ; attempt++ {
		s, err = launch(t, bin, useTLS)
		if err == nil {
			break
		}
		if !errors.Is(err, errPortTaken) || attempt == 5 {
			t.Fatalf("miniotest: start %s: %v", bin, err)
		}
	}
	s.Bucket = s.NewBucket(t)
	return s
}

var errPortTaken = errors.New("port already in use")

// launch starts one server process and waits until it is live. It returns errPortTaken when the
// chosen ports were grabbed by someone else in the meantime, so that Start can retry.
func launch(t testing.TB, bin string, useTLS bool) (*Server, error) {
	t.Helper()
	addrs, err := servertest.FreeAddrs(2)
	if err != nil {
		return nil, err
	}
	api, console := addrs[0], addrs[1]
	base := t.TempDir()
	s := &Server{
		Endpoint:  "http://" + api,
		AccessKey: "codapipe" + randHex(4),
		SecretKey: randHex(16),
		Dir:       filepath.Join(base, "data"),
		log:       &syncio.Buffer{},
	}
	if useTLS {
		s.Endpoint = "https://" + api
		if s.ca, err = writeCert(filepath.Join(base, "certs")); err != nil {
			return nil, err
		}
	}
	s.bin = bin
	s.args = []string{"server", s.Dir,
		"--address", api,
		"--console-address", console,
		"--certs-dir", filepath.Join(base, "certs")}
	s.env = append(filteredEnv(),
		"MINIO_ROOT_USER="+s.AccessKey,
		"MINIO_ROOT_PASSWORD="+s.SecretKey,
		"MINIO_UPDATE=off",
		"MINIO_BROWSER=off",
		"HOME="+base, // anything MinIO writes under $HOME stays in the test's directory
	)
	if err := s.spawn(); err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		s.stop()
		if t.Failed() {
			t.Logf("miniotest: MinIO server log (%s):\n%s", s.Endpoint, s.log.Tail(64<<10))
		}
	})
	if err := s.waitLive(); err != nil {
		s.stop()
		if strings.Contains(s.Log(), "already in use") {
			return nil, fmt.Errorf("%w: %v", errPortTaken, err)
		}
		return nil, fmt.Errorf("%v\nserver log:\n%s", err, s.log.Tail(16<<10))
	}
	return s, nil
}

// waitLive polls GET /minio/health/live until it answers 200, the process exits, or
// readyTimeout passes.
func (s *Server) waitLive() error {
	s.mu.Lock()
	proc := s.proc
	s.mu.Unlock()
	client := &http.Client{Timeout: time.Second, Transport: s.Transport()}
	deadline := time.Now().Add(readyTimeout)
	for delay := 10 * time.Millisecond; ; delay = min(delay*2, 200*time.Millisecond) {
		resp, err := client.Get(s.Endpoint + "/minio/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-proc.Done():
			return fmt.Errorf("MinIO exited before it was ready (%v)", proc.State())
		case <-time.After(delay):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("MinIO at %s not live after %v (last probe: %v)", s.Endpoint, readyTimeout, err)
		}
	}
}

// spawn starts the server process with the recorded binary, arguments and
// environment (the same port and data directory every time).
func (s *Server) spawn() error {
	cmd := exec.Command(s.bin, s.args...)
	cmd.Env = s.env
	cmd.Stdout = s.log
	cmd.Stderr = s.log
	proc, err := servertest.Start(cmd)
	if err != nil {
		return err
	}
	s.mu.Lock()
	s.proc = proc
	s.mu.Unlock()
	return nil
}

// current is the current process.
func (s *Server) current() *servertest.Process {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.proc
}

// stop sends SIGTERM to the server's process group, and SIGKILL if it has not exited after 5 s.
func (s *Server) stop() { s.current().Signal(syscall.SIGTERM, 5*time.Second) }

// Stop kills the server (SIGKILL to its process group, as a crash or a
// lost machine would) and waits until it has exited: a blob-store outage
// until Restart. Calling it on a stopped server does nothing.
func (s *Server) Stop() { s.current().Signal(syscall.SIGKILL, 0) }

// Restart starts a stopped server again on the same address, data
// directory and credentials, and waits until it is live; the objects
// written before the stop are there again. A server still running is
// stopped first.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	s.Stop()
	// The port may linger for a moment after the kill: retry briefly.
	deadline := time.Now().Add(readyTimeout)
	for {
		err := s.spawn()
		if err == nil {
			err = s.waitLive()
		}
		if err == nil {
			return
		}
		s.Stop()
		if time.Now().After(deadline) {
			t.Fatalf("miniotest: restart %s: %v\nserver log:\n%s", s.Endpoint, err, s.log.Tail(16<<10))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// writeCert writes a fresh self-signed certificate for 127.0.0.1 and localhost into dir as
// public.crt and private.key, where MinIO looks for them, and returns a pool trusting it.
func writeCert(dir string) (*x509.CertPool, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(time.Now().UnixNano()),
		Subject:               pkix.Name{CommonName: "miniotest"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1)},
		DNSNames:              []string{"localhost"},
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	pk, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "public.crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(dir, "private.key"), pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: pk}), 0o600); err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return pool, nil
}

// filteredEnv is the process environment without MINIO_* and AWS_* variables, which would
// otherwise reconfigure the test server.
func filteredEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "MINIO_") || strings.HasPrefix(kv, "AWS_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

func randHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
