package advantage

import (
	"bytes"
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/tmpfs"
)

// TestDiskFullStopsWithinTheBudget (issue 40, "work that never ends"):
// advantage --drain writing onto a full disk (a 64 KB tmpfs under the
// shard spool and the set's folder) retried "no space left on device"
// every 5 s forever. Now it stops once writes have failed for want of space
// for --disk-full-budget, exit 1, with a message that says so; nothing is
// lost: once there is space, the same command writes every row, once.
func TestDiskFullStopsWithinTheBudget(t *testing.T) {
	p := pipetest.Shared(t, smallSpec) // the race pass's corpus
	dir, judged := p.Dir, p.Judged
	full := filepath.Join(dir, "tmp")
	unmount := tmpfs.Mount(t, full, "64k")
	out := filepath.Join(full, "shards")
	// --ack-wait 2s: the messages the stopped drain held are delivered again after 2 s, not a minute.
	args := []string{"--data", dir, "--log-level", "warn", "--drain", "--since", SinceAll, "--embed-images", "--out", out, "--ack-wait", "2s"}

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := service.MainContext(ctx, Command(), append(args, "--disk-full-budget", "2s"), &stdout, &stderr)
	took := time.Since(start)
	t.Logf("on a full disk: exit %d after %v\n%s", code, took.Round(time.Millisecond), stderr.String())
	if code != 1 || !strings.Contains(stderr.String(), "failed for want of space for 2s (--disk-full-budget)") {
		t.Fatalf("exit %d, want 1 with the disk-full message", code)
	}

	unmount() // space again: the folder is on the test's disk now
	if code := service.MainContext(ctx, Command(), args, &stdout, &stderr); code != 0 {
		t.Fatalf("with space again: exit %d\n%s", code, stderr.String())
	}
	checkWrittenOnce(t, out, expectedKeys(t, judged))
}
