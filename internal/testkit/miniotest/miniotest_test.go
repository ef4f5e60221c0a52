package miniotest

import (
	"context"
	"io"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
)

func TestStartServesBucketAndStops(t *testing.T) {
	start := time.Now()
	s := Start(t)
	t.Logf("MinIO live with bucket %s after %v", s.Bucket, time.Since(start).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ok, err := s.Client(t).BucketExists(ctx, s.Bucket)
	if err != nil || !ok {
		t.Fatalf("bucket %s: exists=%v err=%v", s.Bucket, ok, err)
	}
	if got := s.URL("/a/b/"); got != "s3://"+s.Bucket+"/a/b" {
		t.Errorf("URL = %q", got)
	}
	s.stop()
	if _, err := (&http.Client{Timeout: time.Second}).Get(s.Endpoint + "/minio/health/live"); err == nil {
		t.Errorf("server still answers after stop")
	}
}

func TestBinaryOverride(t *testing.T) {
	t.Setenv(EnvBinary, "/nonexistent/minio")
	_, err := Binary()
	if err == nil || !strings.Contains(err.Error(), EnvBinary) {
		t.Fatalf("Binary() error = %v, want one naming %s", err, EnvBinary)
	}
}

// TestStopRestartKeepsObjects: Stop is an outage (nothing answers), and
// Restart brings the same server back on the same address with the
// objects written before.
func TestStopRestartKeepsObjects(t *testing.T) {
	s := Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c := s.Client(t)
	if _, err := c.PutObject(ctx, s.Bucket, "k", strings.NewReader("v"), 1, minio.PutObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	if _, err := (&http.Client{Timeout: time.Second}).Get(s.Endpoint + "/minio/health/live"); err == nil {
		t.Fatal("server still answers after Stop")
	}
	s.Restart(t)
	o, err := c.GetObject(ctx, s.Bucket, "k", minio.GetObjectOptions{})
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(o)
	if err != nil || string(body) != "v" {
		t.Fatalf("after Restart: %q, %v; want the object written before Stop", body, err)
	}
}

// Setenv points the S3 environment at the server.
func TestSetenv(t *testing.T) {
	s := Start(t)
	s.Setenv(t)
	for k, want := range map[string]string{"AWS_ENDPOINT_URL": s.Endpoint, "AWS_REGION": Region, "AWS_ACCESS_KEY_ID": s.AccessKey, "AWS_SECRET_ACCESS_KEY": s.SecretKey} {
		if got := os.Getenv(k); got != want {
			t.Errorf("%s=%q, want %q", k, got, want)
		}
	}
}
