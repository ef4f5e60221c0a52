package advantage

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/archive"
	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Damage (issue 25, acceptance 3): a bit-flipped screenshot that
// advantage --embed-images must read is a permanent fault: the judged
// trajectory is dead-lettered at once with a reason naming the
// screenshot and the mismatch, and nothing is retried (the run reports 0
// retried; before, the checksum mismatch was retried with back-off for
// some 20 minutes). The repair (docs/operations.md, Damage and repair):
// the screenshot restored, advantage run again on the same set with a
// new consumer; the set then holds every row the judged trajectories
// give, each once.
func TestAcceptDamagedScreenshotDeadLettered(t *testing.T) {
	dir, judged := corpus(t)
	// A screenshot that the rows of exactly one judged trajectory show.
	users := map[string]map[string]bool{}
	for _, jd := range judged {
		for _, s := range jd.Trajectory.Steps {
			if users[s.Screenshot.SHA256] == nil {
				users[s.Screenshot.SHA256] = map[string]bool{}
			}
			users[s.Screenshot.SHA256][jd.Trajectory.ID] = true
		}
	}
	var victim *traj.Judged
	var sha string
	for _, jd := range judged {
		labels, err := grpo.LabelSteps(&jd.Trajectory, &jd.Judgement, grpo.LabelModeClean)
		if err != nil {
			continue
		}
		for _, ref := range promptImages(&jd.Trajectory, func(i int) bool { return labels[i] != grpo.LabelNone }) {
			if len(users[ref.SHA256]) == 1 {
				victim, sha = jd, ref.SHA256
				break
			}
		}
		if victim != nil {
			break
		}
	}
	if victim == nil {
		t.Fatal("no screenshot of a labelled step belongs to one trajectory alone: the test needs one")
	}
	path := filepath.Join(dir, "blobs", filepath.FromSlash(blob.Key(sha)))
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	bad := append([]byte(nil), good...)
	bad[len(bad)/2] ^= 0x10 // one bit
	if err := os.WriteFile(path, bad, 0o644); err != nil {
		t.Fatal(err)
	}

	out := advantageCLI(t, dir, "--embed-images")
	t.Logf("with the damaged screenshot:\n%s", out)
	if !strings.Contains(out, "1 dead-lettered, 0 retried") {
		t.Fatalf("advantage did not dead-letter the damaged screenshot's trajectory at once, without a retry:\n%s", out)
	}
	id := archive.MessageID(victim.Trajectory.ID, victim.Judgement.Judge.ID())
	env, b, _ := pipetest.Open(t, &service.Common{DataDir: dir})
	pipetest.CheckDeadLetters(t, b, map[string][]string{
		id: {"screenshot " + sha, "damaged", "checksum mismatch", victim.Trajectory.ID},
	})
	env.Close() // the embedded server's data directory is the next command's

	// Repair: the screenshot restored (from a backup or replica), the set
	// run again with a new consumer: what was written is skipped, the
	// dead-lettered trajectory's rows are written.
	if err := os.WriteFile(path, good, 0o644); err != nil {
		t.Fatal(err)
	}
	again := advantageCLI(t, dir, "--embed-images", "--durable", "advantage_repair")
	t.Logf("after the repair:\n%s", again)
	want := expectedKeys(t, judged)
	bucket, err := blob.OpenBucket(context.Background(), filepath.Join(dir, "shards"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	got := readKeys(t, bucket, m)
	for k := range want {
		if got[k] != 1 {
			t.Errorf("row %v written %d times, want once", k, got[k])
		}
	}
	if len(got) != len(want) || m.Counts.Rows != len(want) {
		t.Errorf("the set holds %d distinct rows (manifest: %d), want %d", len(got), m.Counts.Rows, len(want))
	}
	if !strings.Contains(again, fmt.Sprintf("holds %d rows", len(want))) {
		t.Errorf("the repair run does not report %d rows:\n%s", len(want), again)
	}
}
