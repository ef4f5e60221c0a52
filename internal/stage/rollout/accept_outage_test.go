package rollout

import (
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
)

// Acceptance 1 of issue 36: the planner endpoint goes down for 60 s in
// the middle of a 60-episode simulated run. No episode may end as an
// environment error because of it: the run pauses (one WARN), the
// episodes it interrupted run again once the planner answers, the run
// finishes, and every episode is on the stream exactly once.
//
// It runs beside the other parallel acceptance tests of the package: most
// of its time it waits for the planner.
func TestAcceptPlannerOutageIsWaitedOut(t *testing.T) {
	t.Parallel()
	const (
		K       = 10
		outage  = 60 * time.Second
		downAt  = 100 // planner requests before the outage: about a third of the run
		episode = 60
	)
	taskIDs := []string{"S01", "S02", "S03", "S04", "S05", "S06"}
	proxy := servertest.NewProxy(t)
	var requests atomic.Int64
	var downSince atomic.Int64
	dir := t.TempDir()
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, simTaskDir(t, acceptApp, taskIDs...), "accept-outage", log)
	cfg.Group, cfg.Samples, cfg.VMs = 1, K, 4 // G = 1: the run's CPU is not what is tested
	cfg.simPlanner = proxy.Route
	cfg.outageProbe = 500 * time.Millisecond
	cfg.Planner.Backoff = 100 * time.Millisecond // a call fails in ~0.7 s, not ~7 s
	cfg.simRequests = func(kind string, _ []byte) {
		if kind == "planner" && requests.Add(1) == downAt {
			downSince.Store(time.Now().UnixNano())
			proxy.Down()
			time.AfterFunc(outage, proxy.Up)
		}
	}
	sum, err := runWithin(t, 5*time.Minute, cfg)
	if err != nil {
		logs.dump(t, slog.LevelWarn)
		t.Fatalf("Run: %v", err)
	}
	if downSince.Load() == 0 {
		t.Fatalf("the planner never went down (%d requests)", requests.Load())
	}
	if d := time.Since(time.Unix(0, downSince.Load())); d < outage {
		t.Errorf("the run ended %v after the outage began, before the planner came back (%v)", d, outage)
	}
	ps := publishedEachOnce(t, dir, episode)
	if sum.EnvErrors != 0 || sum.Outages != 1 || sum.OutageRequeued == 0 || sum.Stopped != "" {
		t.Errorf("summary: env_errors %d, outages %d, requeued %d, stopped %q; want 0, 1, >0, \"\"", sum.EnvErrors, sum.Outages, sum.OutageRequeued, sum.Stopped)
	}
	if w := logs.records("model endpoint unavailable for every VM: the run pauses and resumes when it answers; the episodes it interrupted run again"); len(w) != 1 {
		t.Errorf("%d WARN lines for the outage, want 1", len(w))
	}
	checkSummaryAgrees(t, sum, ps)
}

// Acceptance 1 of issue 36, the other half: the planner endpoint is down
// for good. The run stops with an *OutageError within the outage budget,
// publishes nothing it ran during the outage, and says what is left; the
// same run started again once the planner answers completes every
// episode, each once.
func TestAcceptPlannerDownStopsAndResumes(t *testing.T) {
	t.Parallel()
	const K = 4
	taskIDs := []string{"S01", "S02", "S03"}
	proxy := servertest.NewProxy(t)
	var requests atomic.Int64
	dir := t.TempDir()
	tasks := simTaskDir(t, acceptApp, taskIDs...)
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, tasks, "accept-down", log)
	cfg.Samples, cfg.VMs = K, 2
	cfg.simPlanner = proxy.Route
	cfg.outageProbe = 200 * time.Millisecond
	cfg.Planner.Backoff = 100 * time.Millisecond
	cfg.OutageBudget = 5 * time.Second
	var downOnce sync.Once
	cfg.simRequests = func(kind string, _ []byte) {
		if kind == "planner" && requests.Add(1) >= 20 {
			downOnce.Do(proxy.Down)
		}
	}
	start := time.Now()
	sum, err := runWithin(t, 3*time.Minute, cfg)
	var oe *model.OutageError
	if !errors.As(err, &oe) || !errors.Is(err, model.ErrOutage) {
		logs.dump(t, slog.LevelWarn)
		t.Fatalf("Run with the planner down for good: %v, want an OutageError", err)
	}
	t.Logf("stopped after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if sum == nil || !strings.Contains(sum.Stopped, "outage budget") || sum.Left == 0 || sum.EnvErrors != 0 {
		t.Fatalf("summary of the stopped run: %+v", sum)
	}
	var out strings.Builder
	sum.Print(&out)
	if !strings.Contains(out.String(), "run the same command again (same --run accept-down)") {
		t.Errorf("the summary does not say how to finish the run:\n%s", out.String())
	}
	left := sum.Left

	proxy.Up()
	cfg.simRequests = nil
	sum2 := runOK(t, cfg, logs)
	if sum2.Episodes != left || sum2.Skipped != len(taskIDs)*K-left {
		t.Errorf("the second start ran %d episodes (%d already published), want the %d left", sum2.Episodes, sum2.Skipped, left)
	}
	publishedEachOnce(t, dir, len(taskIDs)*K)
}

// publishedEachOnce reads what the run in dir published for acceptApp and
// checks that each of the want episodes is there once and none is an
// environment error.
func publishedEachOnce(t *testing.T, dir string, want int) []published {
	t.Helper()
	b := openTestBus(t, dir)
	defer b.Close()
	ps := readPublished(t, b, openStore(t, dir), acceptApp)
	seen := map[ledger.EpisodeKey]int{}
	for _, p := range ps {
		seen[ledger.EpisodeKey{Task: p.Traj.Task.ID, Sample: p.Traj.Sample}]++
		if p.Traj.Outcome.IsEnvError() {
			t.Errorf("trajectory %s (%s/%d): env_error %q", p.Traj.ID, p.Traj.Task.ID, p.Traj.Sample, p.Traj.Outcome.Reason)
		}
	}
	if len(ps) != want || len(seen) != want {
		t.Errorf("%d trajectories of %d episodes on the stream, want each of the %d once", len(ps), len(seen), want)
	}
	return ps
}
