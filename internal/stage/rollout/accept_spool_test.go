package rollout

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// Issue 24: a trajectory that cannot be published is never dropped. The
// NATS server stops in the middle of a run: the trajectories finished
// while it is away are retried, then written to the spool
// (<data>/spool/...); the run fails without recording its end. The next
// start, with the server back, publishes each spooled trajectory exactly
// once, and the run completes with every episode once on the stream.
func TestAcceptSpoolWhenNATSIsAway(t *testing.T) {
	clearRolloutEnv(t)
	srv := natstest.Start(t)
	dir := t.TempDir()
	log, logs := newLogCapture(slog.LevelInfo)
	const run = "accept-spool"
	cfg := acceptConfig(dir, simTaskDir(t, acceptApp, "S01", "S02", "S03"), run, log)
	cfg.Common.NATS.URL = srv.URL()
	cfg.Common.NATS.Timeout = time.Second
	cfg.Samples = 2
	cfg.TimeScale = 0.004
	cfg.PublishRetry = 2 * time.Second
	cfg.Lease = 3 * time.Second // the episodes whose acknowledgement was lost come back soon
	const episodes = 6

	// Watch the stream from another connection; stop the server once the
	// first trajectory is on it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	watch, err := bus.Open(ctx, bus.Config{URL: srv.URL(), Name: "watch"})
	if err != nil {
		t.Fatal(err)
	}
	stopped := make(chan struct{})
	go func() { // owned: ends with the run or when it stops the server
		defer close(stopped)
		subject := bus.Subject(bus.Raw, acceptApp)
		for ctx.Err() == nil {
			if n, err := watch.SubjectCount(ctx, bus.Raw, subject); err == nil && n >= 1 {
				watch.Close()
				srv.Shutdown()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
	}()
	sum, err := runWithin(t, 2*time.Minute, cfg)
	<-stopped
	if err == nil {
		t.Fatal("the run succeeded although the NATS server stopped in its middle")
	}
	spool := filepath.Join(dir, "spool")
	files, _ := spoolFiles(spool)
	if sum == nil || sum.Spooled == 0 || len(files) != sum.Spooled {
		logs.dump(t, slog.LevelWarn)
		t.Fatalf("summary %+v, %d spool files; want the trajectories finished while NATS was away in the spool", sum, len(files))
	}
	kept := logs.records("rollout: trajectory could not be published; kept in the spool, published on the next start")
	if len(kept) != len(files) {
		t.Errorf("%d spool log lines, %d files", len(kept), len(files))
	}
	for _, r := range kept {
		if _, err := os.Stat(r.Attrs["path"]); err != nil {
			t.Errorf("logged spool path %q: %v", r.Attrs["path"], err)
		}
	}
	t.Logf("%d trajectories spooled: %v", len(files), files)

	// The next start, with NATS back.
	srv.Restart()
	log2, logs2 := newLogCapture(slog.LevelInfo)
	cfg.Log = log2
	sum2 := runOK(t, cfg, logs2)
	if left, _ := spoolFiles(spool); len(left) != 0 {
		t.Errorf("spool files left after the next start: %v", left)
	}
	flushed := logs2.records("rollout: spooled trajectory published")
	if len(flushed) != len(files) {
		t.Errorf("%d spooled trajectories published on the next start, want %d", len(flushed), len(files))
	}
	if sum2.SpoolLeft != 0 {
		t.Errorf("spool_left %d", sum2.SpoolLeft)
	}

	b, err := bus.Open(ctx, bus.Config{URL: srv.URL(), Name: "check"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	per := map[ledger.EpisodeKey]int{}
	for _, p := range readPublished(t, b, openStore(t, dir), acceptApp) {
		per[ledger.EpisodeKey{Task: p.Task, Sample: p.Sample}]++
	}
	if len(per) != episodes {
		t.Errorf("%d episodes on the stream, want %d", len(per), episodes)
	}
	for k, n := range per {
		if n != 1 {
			t.Errorf("episode %v: %d trajectories on the stream, want 1", k, n)
		}
	}
	runs, err := ledger.Open(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for k := range per {
		names = append(names, k.Task)
	}
	done, err := runs.Done(ctx, run, names)
	if err != nil || len(done) != episodes {
		t.Errorf("ledger lists %d episodes (%v), want %d", len(done), err, episodes)
	}
	if fin, err := runs.Finished(ctx, run); err != nil || !fin {
		t.Errorf("run finished = %v (%v)", fin, err)
	}
}
