package rollout

import (
	"log/slog"
	"testing"
	"time"
)

// An episode that ends by an environment error goes to another VM: the
// faulty VM resets in milliseconds and is ready first while the healthy VMs
// are busy, so a scheduler that took whatever VM came first would spend
// every retry on the broken one.
//
// World: sim-0 answers HTTP 500 on every call; sim-1 is healthy (and slow,
// 0.2 s per call). Two episodes: one starts on each VM; the one on sim-0
// must finish on sim-1 after its first failure.
func TestAcceptRetryGoesToAnotherVM(t *testing.T) {
	simCfg := writeSimConfig(t, `{
  "guest": {"faults": {"latency": {"kind": "fixed", "fixed": 200000000000}}},
  "per_vm": {"0": {"faults": {"error_prob": 1}}}
}`)
	dir := t.TempDir()
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, simTaskDir(t, acceptApp, "S01"), "accept-bug-retry", log)
	cfg.Group, cfg.Samples, cfg.VMs, cfg.SimConfig = 1, 2, 2, simCfg
	sum := runOK(t, cfg, nil)
	last := map[string]string{} // task/sample → VM of the failed attempt
	for _, r := range logs.records("environment error; the episode goes to another VM") {
		key := r.Attrs["task"] + "/" + r.Attrs["sample"]
		if last[key] == r.Attrs["vm"] {
			t.Errorf("episode %s retried on %s again", key, r.Attrs["vm"])
		}
		last[key] = r.Attrs["vm"]
	}
	if sum.EnvErrors != 0 {
		t.Errorf("%d of %d episodes published as env_error although healthy sim-1 was there (outcomes %v, %d retries)", sum.EnvErrors, sum.Episodes, sum.Outcomes, sum.Retries)
	}
}

// The summary of a re-run covers the whole run, not only the episodes of
// this invocation: a re-run that finds everything published still reports
// the run's tasks and successes.
func TestAcceptSummaryCoversTheWholeRun(t *testing.T) {
	dir := t.TempDir()
	tasks := simTaskDir(t, acceptApp, "S01")
	for i := range 2 {
		log, _ := newLogCapture(slog.LevelInfo)
		cfg := acceptConfig(dir, tasks, "accept-bug-tasks", log)
		cfg.Group = 1
		sum, err := runWithin(t, 2*time.Minute, cfg)
		if err != nil {
			t.Fatalf("Run %d: %v", i+1, err)
		}
		if sum.Tasks != 1 {
			t.Errorf("invocation %d: summary says %d tasks (episodes run %d, already published %d); the run has 1", i+1, sum.Tasks, sum.Episodes, sum.Skipped)
		}
		if n := sum.Episodes + sum.Skipped; n != cfg.Samples {
			t.Errorf("invocation %d: %d episodes run + %d already published, want %d", i+1, sum.Episodes, sum.Skipped, cfg.Samples)
		}
		if got := sum.Outcomes; len(got) == 0 {
			t.Errorf("invocation %d: no outcomes in the summary of the run", i+1)
		}
	}
}
