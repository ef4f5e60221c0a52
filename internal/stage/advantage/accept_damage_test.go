package advantage

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
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
	checkWrittenOnce(t, filepath.Join(dir, "shards"), want)
	if !strings.Contains(again, fmt.Sprintf("holds %d rows", len(want))) {
		t.Errorf("the repair run does not report %d rows:\n%s", len(want), again)
	}
}

// advantageExport runs advantage export of the set in setDir to a fresh
// folder; it returns the exit code and stderr.
func advantageExport(t *testing.T, dir, setDir string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	args := []string{"export", "--data", dir, "--log-level", "warn", "--set", setDir, "--format", "openrlhf", "--out", filepath.Join(t.TempDir(), "export")}
	code := service.MainContext(ctx, Command(), args, &out, &errb)
	return code, errb.String()
}

// Damage (issue 25, acceptance 3): a truncated shard file and a truncated
// shard-set manifest each end in a clear error of the reader (advantage
// export) naming the file and what was expected. The repairs: the
// manifest is written again from the set's commit records by the next
// advantage drain of the set; a set with a damaged shard file is written
// again to a new place, and holds every row.
func TestAcceptDamagedShardAndManifest(t *testing.T) {
	dir, judged := corpus(t)
	want := expectedKeys(t, judged)
	advantageCLI(t, dir)
	ctx := context.Background()
	bucket, err := blob.OpenBucket(ctx, filepath.Join(dir, "shards"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	setDir := filepath.Join(dir, "shards", filepath.FromSlash(m.Set))
	if code, errText := advantageExport(t, dir, setDir); code != 0 {
		t.Fatalf("export of the intact set: exit %d\n%s", code, errText)
	}

	// A truncated manifest.
	manifest := filepath.Join(setDir, "manifest.json")
	good, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(manifest, good[:len(good)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	code, errText := advantageExport(t, dir, setDir)
	t.Logf("export with a truncated manifest: exit %d\n%s", code, errText)
	if code == 0 || !strings.Contains(errText, "manifest.json") || !strings.Contains(errText, "checksum mismatch") && !strings.Contains(errText, "unexpected end of JSON") {
		t.Fatalf("export of a set with a truncated manifest: exit %d, want an error naming manifest.json and the damage:\n%s", code, errText)
	}
	// Repair: the next drain of the set writes its manifest again.
	advantageCLI(t, dir)
	if code, errText := advantageExport(t, dir, setDir); code != 0 {
		t.Fatalf("export after the manifest was written again: exit %d\n%s", code, errText)
	}
	if got := onlyManifest(t, bucket); got.Counts.Rows != len(want) {
		t.Fatalf("the rewritten manifest counts %d rows, want %d", got.Counts.Rows, len(want))
	}

	// A truncated shard file.
	f := m.Files[0]
	path := filepath.Join(setDir, filepath.FromSlash(f.Path))
	body, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, body[:len(body)*3/4], 0o644); err != nil {
		t.Fatal(err)
	}
	code, errText = advantageExport(t, dir, setDir)
	t.Logf("export with a truncated shard: exit %d\n%s", code, errText)
	if code == 0 || !strings.Contains(errText, f.Path) || !strings.Contains(errText, f.SHA256) || !strings.Contains(errText, "checksum mismatch") {
		t.Fatalf("export of a set with a truncated shard: exit %d, want an error naming %s, its SHA-256 %s and the mismatch:\n%s", code, f.Path, f.SHA256, errText)
	}
	// Repair: the set written again to a new place holds every row.
	out := filepath.Join(t.TempDir(), "shards")
	advantageCLI(t, dir, "--out", out)
	nb, err := blob.OpenBucket(ctx, out, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	nm := onlyManifest(t, nb)
	got := readKeys(t, nb, nm)
	if len(got) != len(want) || nm.Counts.Rows != len(want) {
		t.Fatalf("the set written again holds %d distinct rows (manifest %d), want %d", len(got), nm.Counts.Rows, len(want))
	}
	if code, errText := advantageExport(t, dir, filepath.Join(out, filepath.FromSlash(nm.Set))); code != 0 {
		t.Fatalf("export of the set written again: exit %d\n%s", code, errText)
	}
}
