package rollout

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/advantage"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// judgeDrain runs judge --sim --drain on dataDir and returns its output.
func judgeDrain(t *testing.T, dataDir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := service.MainContext(ctx, judge.Command(), []string{"--data", dataDir, "--log-level", "warn", "--sim", "--drain", "--max-frames", "4"}, &out, &errb); code != 0 {
		t.Fatalf("judge: exit %d\n%s", code, errb.String())
	}
	return out.String() + errb.String()
}

// judgedCount reads "judge: N trajectories" from judge's output.
func judgedCount(t *testing.T, out string) int {
	t.Helper()
	m := regexp.MustCompile(`judge: (\d+) trajectories`).FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no count in judge's output:\n%s", out)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// Damage (issue 25, acceptance 3): the raw stream's block file loses its
// end while nothing runs. The judge that drains the stream afterwards
// judges what is left and says which sequences are missing (before: 11 of
// 14 judged, exit 0, nothing said); a plain re-run of the rollout trusts
// its ledger; rollout --verify finds the episodes the ledger lists but the
// stream lost, runs them again, and after one more judge drain every
// episode of the run is on the raw stream and judged once.
func TestAcceptVerifyRerunsTrajectoriesLostToStoreDamage(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	const episodes = 6
	cfg, dir, out, judged := damagedRun(t, "damaged", 2, natstest.TruncateStreamBlock)
	lost := episodes - judged
	if lost <= 0 {
		t.Fatalf("the judge judged %d of %d: the damage did not take", judged, episodes)
	}
	wantRange := fmt.Sprintf("sequences %d-%d", judged+1, episodes)
	if lost == 1 {
		wantRange = fmt.Sprintf("sequences %d", episodes)
	}
	if !strings.Contains(out, fmt.Sprintf("the stream %s is missing %d messages (%s)", bus.StreamName(bus.Raw), lost, wantRange)) {
		t.Fatalf("judge does not report the %d lost messages (%s):\n%s", lost, wantRange, out)
	}

	// A plain re-run trusts the ledger: nothing to run.
	if sum := runOK(t, cfg, nil); sum.Episodes != 0 || sum.Skipped != episodes {
		t.Fatalf("a plain re-run ran %d episodes (%d already published), want 0 (%d)", sum.Episodes, sum.Skipped, episodes)
	}
	// The repair: rollout --verify runs the lost episodes again.
	logger, logs := newLogCapture(slog.LevelWarn)
	cfg.Log = logger
	cfg.Verify = true
	sum := runOK(t, cfg, logs)
	if sum.LostRerun != lost || sum.Episodes != lost || sum.Skipped != episodes-lost {
		t.Fatalf("rollout --verify: %d lost and run again, %d episodes run, %d already published; want %d, %d, %d",
			sum.LostRerun, sum.Episodes, sum.Skipped, lost, lost, episodes-lost)
	}
	if n := len(logs.records("rollout: --verify: the ledger lists the episode as published, its trajectory is not on the stream (lost to store damage or purged); it runs again")); n != lost {
		t.Errorf("%d warnings name a lost episode, want %d", n, lost)
	}
	out = judgeDrain(t, dir)
	t.Logf("judge after rollout --verify:\n%s", out)
	if n := judgedCount(t, out); n != lost {
		t.Fatalf("the judge judged %d trajectories after the repair, want the %d lost ones", n, lost)
	}
	if strings.Contains(out, "missing") {
		t.Errorf("the judge that has judged around the gap reports it again:\n%s", out)
	}

	// Whole again: every episode's trajectory once on the raw stream, and
	// judged once.
	b := openTestBus(t, dir)
	defer b.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	raw, err := b.SubjectCount(ctx, bus.Raw, bus.Subject(bus.Raw, acceptApp))
	if err != nil {
		t.Fatal(err)
	}
	jd, err := b.SubjectCount(ctx, bus.Judged, bus.Subject(bus.Judged, acceptApp))
	if err != nil {
		t.Fatal(err)
	}
	if raw != episodes || jd != episodes {
		t.Fatalf("after the repair the raw stream holds %d trajectories and the judged stream %d; want %d each", raw, jd, episodes)
	}
}

// Damage (issue 40, "store damage that goes unnoticed"): one bit flipped
// in the middle of the raw stream's block file, which keeps its length.
// The server reports nothing missing, and the judge drained 17 of 18 with
// no warning. Now the judge's drain compares what it received with the
// run's ledger and says how many trajectories never reached a judge and
// what repairs them; rollout --verify runs those episodes again and the
// next drain judges them.
func TestAcceptByteFlipInTheRawStreamIsReported(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	const episodes = 9
	cfg, dir, out, judged := damagedRun(t, "flipped", 3, natstest.FlipStreamBlockByte)
	lost := episodes - judged
	if lost <= 0 {
		t.Skipf("the judge judged %d of %d: this server read past the flipped bit", judged, episodes)
	}
	if !strings.Contains(out, fmt.Sprintf("run flipped: %d trajectories its ledger lists as published were neither judged nor dead-lettered", lost)) ||
		!strings.Contains(out, "rollout --verify --run flipped runs them again") {
		t.Fatalf("judge does not report the %d trajectories it never received:\n%s", lost, out)
	}

	// advantage, after the judge, says the same of its set.
	adv := advantageDrain(t, dir)
	if !strings.Contains(adv, fmt.Sprintf("run flipped: %d trajectories its ledger lists as published are not in the set", lost)) {
		t.Fatalf("advantage does not report the %d trajectories its set never took in:\n%s", lost, adv)
	}

	logger, logs := newLogCapture(slog.LevelWarn)
	cfg.Log = logger
	cfg.Verify = true
	if sum := runOK(t, cfg, logs); sum.LostRerun != lost || sum.Episodes != lost {
		t.Fatalf("rollout --verify: %d lost and run again, %d episodes run; want %d, %d", sum.LostRerun, sum.Episodes, lost, lost)
	}
	out = judgeDrain(t, dir)
	t.Logf("judge after rollout --verify:\n%s", out)
	if n := judgedCount(t, out); n != lost || strings.Contains(out, "neither judged nor dead-lettered") {
		t.Fatalf("after the repair the judge judged %d trajectories (want the %d lost ones) or still reports some unreceived:\n%s", n, lost, out)
	}
	if adv := advantageDrain(t, dir); strings.Contains(adv, "not in the set") {
		t.Fatalf("after the repair advantage still reports trajectories not in its set:\n%s", adv)
	}
}

// damagedRun runs the acceptance rollout of run (three tasks, samples
// each), damages the raw stream's store with damage, and drains the judge:
// it returns the rollout's config (for the repair), the data folder, the
// judge's output and how many trajectories it judged.
func damagedRun(t *testing.T, run string, samples int, damage func(t testing.TB, storeDir, stream string)) (cfg acceptCfg, dir, out string, judged int) {
	t.Helper()
	dir = t.TempDir()
	cfg = acceptConfig(dir, simTaskDir(t, acceptApp, "S01", "S02", "S03"), run, slog.New(slog.DiscardHandler))
	cfg.Samples = samples
	if sum := runOK(t, cfg, nil); sum.Episodes != 3*samples {
		t.Fatalf("the first invocation ran %d episodes, want %d", sum.Episodes, 3*samples)
	}
	damage(t, filepath.Join(dir, "nats"), bus.StreamName(bus.Raw))
	out = judgeDrain(t, dir)
	t.Logf("judge after the damage:\n%s", out)
	return cfg, dir, out, judgedCount(t, out)
}

// advantageDrain runs advantage --drain (step mode, every judged
// trajectory) on dataDir and returns its output.
func advantageDrain(t *testing.T, dataDir string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := service.MainContext(ctx, advantage.Command(), []string{"--data", dataDir, "--log-level", "warn", "--drain", "--since", advantage.SinceAll}, &out, &errb); code != 0 {
		t.Fatalf("advantage: exit %d\n%s", code, errb.String())
	}
	return out.String() + errb.String()
}
