package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/ledger"
)

// A process that stops between publishing a trajectory and writing its
// ledger record leaves the episode on the stream but not in the ledger.
// The next invocation of the run must take the stream's word for it: it
// records the stored trajectory and does not run the episode again (a
// re-run could end differently from the trajectory the stream keeps, and
// after the de-duplication window it would be stored twice).
func TestAcceptLedgerCatchesUpWithTheStream(t *testing.T) {
	const (
		K   = 2
		run = "accept-reconcile"
	)
	taskIDs := []string{"S01", "S02"}
	total := len(taskIDs) * K
	dir := t.TempDir()
	tasks := simTaskDir(t, acceptApp, taskIDs...)

	cfg := acceptConfig(dir, tasks, run, nil)
	cfg.Group, cfg.Samples = 1, K
	cfg.Log, _ = newLogCapture(slog.LevelInfo)
	sum1 := runOK(t, cfg, nil)
	if sum1.Episodes != total {
		t.Fatalf("first run: %d episodes, want %d", sum1.Episodes, total)
	}

	// The crash: two episodes lose their ledger records.
	b := openTestBus(t, dir)
	ctx := context.Background()
	ps := readPublished(t, b, openStore(t, dir), acceptApp)
	kv, err := b.JetStream().KeyValue(ctx, ledger.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[ledger.EpisodeKey]string{} // → trajectory id on the stream
	for _, p := range ps[:2] {
		key := ledger.EpisodeKey{Task: p.Task, Sample: p.Sample}
		if err := kv.Delete(ctx, fmt.Sprintf("%s.ep.%s.%d", bus.KeyToken(run), bus.KeyToken(key.Task), key.Sample)); err != nil {
			t.Fatal(err)
		}
		lost[key] = p.Traj.ID
	}
	b.Close()

	log2, logs2 := newLogCapture(slog.LevelInfo)
	cfg2 := acceptConfig(dir, tasks, run, log2)
	cfg2.Group, cfg2.Samples = 1, K
	sum2 := runOK(t, cfg2, nil)
	if sum2.Episodes != 0 || sum2.Skipped != total || sum2.OnStream != uint64(total) {
		t.Errorf("second run: %d episodes run, %d already published, %d on the stream; want 0, %d, %d",
			sum2.Episodes, sum2.Skipped, sum2.OnStream, total, total)
	}
	if sum2.Success != sum1.Success || sum2.Outcomes["finished"] != sum1.Outcomes["finished"] {
		t.Errorf("second run's summary %d successes, outcomes %v; the first said %d, %v", sum2.Success, sum2.Outcomes, sum1.Success, sum1.Outcomes)
	}
	recs := logs2.records("rollout: episode on the stream but not in the ledger (the last invocation stopped between the two); recorded, not run again")
	if len(recs) != len(lost) {
		t.Errorf("%d episodes reported as recorded from the stream, want %d", len(recs), len(lost))
	}
	for _, r := range recs {
		key := ledger.EpisodeKey{Task: r.Attrs["task"], Sample: 0}
		fmt.Sscan(r.Attrs["sample"], &key.Sample)
		if id, ok := lost[key]; !ok || r.Attrs["trajectory"] != id {
			t.Errorf("recorded %v as %s; lost were %v", key, r.Attrs["trajectory"], lost)
		}
	}

	// The ledger holds the stream's trajectories again.
	b = openTestBus(t, dir)
	defer b.Close()
	l, err := ledger.Open(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, id := range taskIDs {
		names = append(names, acceptApp+"/"+id)
	}
	done, err := l.Done(ctx, run, names)
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != total {
		t.Errorf("ledger lists %d episodes, want %d", len(done), total)
	}
	for _, p := range ps {
		if got, want := done[ledger.EpisodeKey{Task: p.Task, Sample: p.Sample}], ledger.RecordOf(p.Traj); got != want {
			t.Errorf("ledger %s/%d: %+v, want the stream's %+v", p.Task, p.Sample, got, want)
		}
	}
	if n, err := subjectCount(ctx, b, bus.Raw, bus.Subject(bus.Raw, acceptApp)); err != nil || n != uint64(total) {
		t.Errorf("%d trajectories on the stream (%v), want %d", n, err, total)
	}
}
