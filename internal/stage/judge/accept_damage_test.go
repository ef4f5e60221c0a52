package judge

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
)

// Damage (issue 25, acceptance 3): an archived judgement cut short in the
// blob store is found at once — reading it fails with a checksum mismatch
// naming the key, and readers (sftpack, advantage in outcome mode) leave
// it out — and the documented repair, judging the stream again with a new
// consumer, republishes the intact records as they are and judges the
// damaged one again: the archive is whole, with the same decisions.
func TestAcceptTruncatedArchiveRecordJudgedAgain(t *testing.T) {
	dir := t.TempDir()
	judgeCmd := Command()
	p := pipetest.Run(t, dir, pipetest.Spec{
		App: acceptApp, Tasks: []string{"S01", "S02", "S03"}, Samples: 2, Group: -1, Run: "damaged-archive",
		TimeScale: 0.0002, Judge: &judgeCmd,
	})
	n := len(p.Judged)
	if n == 0 {
		t.Fatal("nothing judged")
	}
	store := p.Store(t)
	before, damaged := pipetest.Archived(t, store.Bucket())
	if len(before) != n || len(damaged) != 0 {
		t.Fatalf("the archive holds %d records (%d damaged), want %d intact", len(before), len(damaged), n)
	}
	var key string
	for k := range before {
		key = k
		break
	}
	path := filepath.Join(dir, "blobs", filepath.FromSlash(key))
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, body[:len(body)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	_, _, err = archive.Read(ctx, store.Bucket(), key)
	if !blob.Damaged(err) || !strings.Contains(err.Error(), key) || !errors.Is(err, blob.ErrChecksumMismatch) {
		t.Fatalf("reading the truncated record %s: %v; want a checksum mismatch naming it", key, err)
	}
	if _, damaged := pipetest.Archived(t, store.Bucket()); len(damaged) != 1 || damaged[0] != key {
		t.Fatalf("damaged records %q, want [%s]", damaged, key)
	}

	// The repair: judge the stream again with a new consumer.
	var out, errb bytes.Buffer
	args := []string{"--data", dir, "--log-level", "warn", "--sim", "--drain", "--max-frames", "4", "--durable", "rejudge"}
	if code := service.MainContext(ctx, Command(), args, &out, &errb); code != 0 {
		t.Fatalf("judge %v: exit %d\n%s", args, code, errb.String())
	}
	t.Logf("judge again:\n%s%s", out.String(), errb.String())
	if !strings.Contains(out.String(), "judge: "+strconv.Itoa(n)+" trajectories") || !strings.Contains(out.String(), strconv.Itoa(n-1)+" republished from the archive") {
		t.Fatalf("judge again: want %d trajectories, %d of them republished from the archive:\n%s", n, n-1, out.String())
	}
	after, damaged := pipetest.Archived(t, store.Bucket())
	if len(after) != n || len(damaged) != 0 {
		t.Fatalf("after the repair the archive holds %d intact records (%d damaged), want %d", len(after), len(damaged), n)
	}
	if a, b := after[key].Judgement.Decision, before[key].Judgement.Decision; a != b {
		t.Errorf("the record judged again says %s, before the damage %s", a, b)
	}
}
