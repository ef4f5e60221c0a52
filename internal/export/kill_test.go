package export_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/export"
	"github.com/codapipe/codapipe/internal/miniotest"
	"golang.org/x/time/rate"
)

// childEnv makes the test binary run childExport instead of the tests (see TestMain): the kill
// test starts it as a child process. Its value is a JSON childConfig.
const childEnv = "CODAPIPE_EXPORT_TEST_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(childExport(cfg))
	}
	os.Exit(m.Run())
}

// childConfig tells the child what to export where.
type childConfig struct {
	Endpoint, AccessKey, SecretKey, Bucket string
	Dir, Prefix                            string
	// Slow names the file whose upload is throttled to Rate bytes/s; the child prints
	// "SENT <bytes>" each MiB of its request bodies.
	Slow string
	Rate int
}

// childExport runs one export as the kill test's child and returns the exit status. It prints
// "DONE <path>" for each file uploaded and "SENT <bytes>" as the slow file's bytes go out.
func childExport(raw string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", childEnv, err)
		return 2
	}
	ctx := context.Background()
	tr := &slowTransport{rt: http.DefaultTransport.(*http.Transport).Clone(), match: c.Slow,
		lim: rate.NewLimiter(rate.Limit(c.Rate), 256<<10)}
	b, err := blob.OpenBucket(ctx, "s3://"+c.Bucket, blob.Config{
		Endpoint: c.Endpoint, Region: miniotest.Region, AccessKeyID: c.AccessKey, SecretAccessKey: c.SecretKey,
		PathStyle: true, Transport: tr, Getenv: func(string) string { return "" },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	st, err := export.Dir(ctx, c.Dir, b, c.Prefix, export.Options{Parallel: 1, Progress: func(p export.Progress) {
		if p.Path != "" {
			fmt.Printf("DONE %s\n", p.Path)
		}
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("FINISHED %+v\n", st)
	return 0
}

// slowTransport throttles the request bodies of URLs containing match and prints how many of
// their bytes have been sent, every MiB.
type slowTransport struct {
	rt    http.RoundTripper
	match string
	lim   *rate.Limiter
	sent  atomic.Int64
}

func (s *slowTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || !strings.Contains(r.URL.Path, s.match) {
		return s.rt.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.Body = &slowBody{ReadCloser: r.Body, t: s, ctx: r.Context()}
	return s.rt.RoundTrip(r2)
}

type slowBody struct {
	io.ReadCloser
	t   *slowTransport
	ctx context.Context
}

func (b *slowBody) Read(p []byte) (int, error) {
	p = p[:min(len(p), b.t.lim.Burst())]
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if werr := b.t.lim.WaitN(b.ctx, n); werr != nil && err == nil {
			err = werr
		}
		after := b.t.sent.Add(int64(n))
		if after>>20 != (after-int64(n))>>20 {
			fmt.Printf("SENT %d\n", after)
		}
	}
	return n, err
}

// TestExportResumesAfterKill runs the export in a child process (one file at a time), kills it
// (SIGKILL) while a 64 MiB file is halfway through its multipart upload, and runs it again: the interrupted run
// leaves no manifest and no partial object, the re-run uploads exactly the objects that were not
// complete, every object verifies and the manifest is written last.
func TestExportResumesAfterKill(t *testing.T) {
	srv := miniotest.Start(t)
	const prefix = "sft/v1"
	const big = "b/train-00000.parquet"
	specs := []spec{
		{"a/0001.png", 100 << 10}, {"a/0002.png", 120 << 10}, {"a/0003.png", 90 << 10},
		{big, 64 * MiB},
		{"c/0001.png", 80 << 10}, {"c/0002.png", 110 << 10},
		{"train.jsonl", 1 * MiB}, {"val.jsonl", 64 << 10},
	}
	d := writeDataset(t, t.TempDir(), "v1", specs)
	bucket := srv.NewBucket(t)
	cfg, err := json.Marshal(childConfig{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		Bucket: bucket, Dir: d.dir, Prefix: prefix, Slow: big, Rate: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}

	// The child uploads the big file at 16 MiB/s; kill it once 24 MiB of it are out (16 MiB
	// parts, 4 in flight: no part is complete yet, or one or two are).
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(cfg))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var lines []string
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if n, ok := strings.CutPrefix(line, "SENT "); ok && !killed {
			if sent, _ := strconv.ParseInt(n, 10, 64); sent >= 24*MiB {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
	}
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !killed || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child not killed mid-upload (wait: %v)\nstdout:\n%s\nstderr:\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	t.Logf("child killed after: %s", strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "SENT") }), ", "))

	w := &wire{rt: srv.Transport(), bucket: bucket, keys: map[string]int{}}
	bcfg := srv.Config()
	bcfg.Transport = w
	b, err := blob.OpenBucket(t.Context(), "s3://"+bucket, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	noManifest(t, b, prefix)
	if _, err := b.Stat(t.Context(), key(prefix, big)); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("%s after the kill: Stat error %v, want not found (no partial object)", big, err)
	}
	var incomplete []string
	for u := range srv.Client(t).ListIncompleteUploads(t.Context(), bucket, key(prefix, big), true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		incomplete = append(incomplete, u.Key)
	}
	if !slices.Contains(incomplete, key(prefix, big)) {
		t.Errorf("incomplete multipart uploads %v, want the one of %s the child was killed in", incomplete, big)
	}
	done := complete(t, b, prefix, d)
	// One file at a time, in path order: the files before the big one are complete, the others
	// are not at the destination.
	if want := []string{"a/0001.png", "a/0002.png", "a/0003.png"}; !slices.Equal(done, want) {
		t.Errorf("complete after the kill: %v, want %v", done, want)
	}

	checkResumed(t, d, b, w, prefix, done, export.Options{})
}
