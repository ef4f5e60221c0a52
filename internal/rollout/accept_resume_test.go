package rollout

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/ledger"
)

// Acceptance 5: a run killed part-way is finished by running it again
// under the same name on the same data directory: the second invocation
// runs only the episodes not yet published, the stream ends with exactly
// one trajectory per (task, sample), and a third invocation runs nothing.
//
// The first invocation talks to an embedded NATS server that the test
// holds on dataDir/nats (so the test can watch the stream while Run
// works); the second and third start Run's own embedded server on the
// same file store, as a restarted process does.
func TestAcceptKillAndResume(t *testing.T) {
	const (
		K    = 2
		run  = "accept-resume"
		kill = 2 // cancel once this many trajectories are on the stream
	)
	taskIDs := []string{"S01", "S02", "S03"}
	total := len(taskIDs) * K
	var names []string
	for _, id := range taskIDs {
		names = append(names, acceptApp+"/"+id)
	}
	dir := t.TempDir()
	tasks := simTaskDir(t, acceptApp, taskIDs...)
	subject := bus.Subject(bus.Raw, acceptApp)

	// Invocation 1, cancelled after `kill` trajectories are published.
	held := openTestBus(t, dir)
	heldOpen := true
	defer func() {
		if heldOpen {
			held.Close()
		}
	}()
	log1, logs1 := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, tasks, run, log1)
	cfg.Group, cfg.Samples = 1, K
	cfg.Common.NATS.URL = held.URL()

	ctx1, cancel1 := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel1()
	type outcome struct {
		sum *Summary
		err error
	}
	done1 := make(chan outcome, 1)
	go func() { // owned: received from below
		sum, err := execute(ctx1, cfg)
		done1 <- outcome{sum, err}
	}()
	var first outcome
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
watch:
	for {
		select {
		case first = <-done1:
			t.Fatalf("the first invocation ended before %d trajectories were published: %+v, %v", kill, first.sum, first.err)
		case <-ctx1.Done():
			t.Fatal("no trajectory was published in time")
		case <-tick.C:
			cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			n, err := subjectCount(cctx, held, bus.Raw, subject)
			cancel()
			if err == nil && n >= kill {
				cancel1() // the kill
				break watch
			}
		}
	}
	first = <-done1
	if !errors.Is(first.err, context.Canceled) {
		t.Errorf("cancelled Run returned %v, want context.Canceled", first.err)
	}

	cctx := context.Background()
	onStream1, err := subjectCount(cctx, held, bus.Raw, subject)
	if err != nil {
		t.Fatal(err)
	}
	runs, err := ledger.Open(cctx, held, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	done, err := runs.Done(cctx, run, names)
	if err != nil {
		t.Fatal(err)
	}
	published1 := len(done)
	if onStream1 < kill || onStream1 >= uint64(total) || published1 == 0 {
		logs1.dump(t, slog.LevelWarn)
		t.Fatalf("after the kill: %d on the stream, %d in the ledger; want some but not all %d episodes", onStream1, published1, total)
	}
	// A stopped run still records what it published: the ledger and the
	// stream agree.
	if uint64(published1) != onStream1 {
		t.Errorf("after the kill: %d on the stream but %d recorded in the ledger", onStream1, published1)
	}
	t.Logf("killed after %d of %d episodes were published", published1, total)
	held.Close()
	heldOpen = false

	// Invocation 2: same run name, same data dir, Run's own embedded NATS.
	resumeStart := time.Now()
	cfg2 := acceptConfig(dir, tasks, run, nil)
	cfg2.Group, cfg2.Samples = 1, K
	log2, logs2 := newLogCapture(slog.LevelInfo)
	cfg2.Log = log2
	sum2, err := runWithin(t, 2*time.Minute, cfg2)
	if err != nil {
		logs2.dump(t, slog.LevelWarn)
		t.Fatalf("resumed Run: %v", err)
	}
	if sum2.Skipped != published1 || sum2.Episodes != total-published1 {
		t.Errorf("resumed run: %d episodes run, %d skipped; want %d run and the %d published before skipped", sum2.Episodes, sum2.Skipped, total-published1, published1)
	}
	if sum2.OnStream != uint64(total) {
		t.Errorf("resumed run reports %d trajectories on the stream, want %d", sum2.OnStream, total)
	}

	// Invocation 3: nothing left to do.
	cfg3 := acceptConfig(dir, tasks, run, nil)
	cfg3.Group, cfg3.Samples = 1, K
	cfg3.Log, _ = newLogCapture(slog.LevelInfo)
	sum3 := runOK(t, cfg3, nil)
	if sum3.Episodes != 0 || sum3.Skipped != total || sum3.OnStream != uint64(total) {
		t.Errorf("third run: %d episodes run, %d skipped, %d on the stream; want 0, %d, %d", sum3.Episodes, sum3.Skipped, sum3.OnStream, total, total)
	}

	// The stream: exactly one trajectory per (task, sample), unique ids,
	// each the one the ledger recorded; the episodes published before the
	// kill were not run again.
	b := openTestBus(t, dir)
	defer b.Close()
	ps := readPublished(t, b, openStore(t, dir), acceptApp)
	if len(ps) != total {
		t.Fatalf("%d trajectories on the stream, want %d tasks × %d samples = %d", len(ps), len(taskIDs), K, total)
	}
	final, err := mustLedger(t, b).Done(cctx, run, names)
	if err != nil {
		t.Fatal(err)
	}
	if len(final) != total {
		t.Errorf("ledger records %d episodes, want %d", len(final), total)
	}
	byHeader := map[ledger.EpisodeKey]bool{}
	ids := map[string]bool{}
	for _, p := range ps {
		tr := p.Traj
		key := ledger.EpisodeKey{Task: p.Task, Sample: p.Sample}
		if byHeader[key] {
			t.Errorf("(task, sample) %v published twice", key)
		}
		byHeader[key] = true
		if key != (ledger.EpisodeKey{Task: tr.Task.ID, Sample: tr.Sample}) {
			t.Errorf("headers say %v, trajectory %s says %s/%d", key, tr.ID, tr.Task.ID, tr.Sample)
		}
		if ids[tr.ID] {
			t.Errorf("trajectory id %s published twice", tr.ID)
		}
		ids[tr.ID] = true
		if final[key].ID != tr.ID {
			t.Errorf("%v: stream holds trajectory %s, ledger records %s", key, tr.ID, final[key].ID)
		}
		if err := tr.Validate(); err != nil {
			t.Errorf("trajectory %s: %v", tr.ID, err)
		}
		if before, ok := done[key]; ok {
			if before.ID != tr.ID || !tr.StartedAt.Before(resumeStart) {
				t.Errorf("%v was published before the kill (trajectory %s) but the stream holds %s started at %v", key, before.ID, tr.ID, tr.StartedAt)
			}
		} else if !tr.StartedAt.After(resumeStart) {
			t.Errorf("%v was not published before the kill, but its trajectory %s started at %v, before the resumed run", key, tr.ID, tr.StartedAt)
		}
	}
	for _, id := range names {
		for k := range K {
			if !byHeader[ledger.EpisodeKey{Task: id, Sample: k}] {
				t.Errorf("episode %s/%d missing from the stream", id, k)
			}
		}
	}
}

func mustLedger(t *testing.T, b *bus.Bus) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(context.Background(), b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	return l
}
