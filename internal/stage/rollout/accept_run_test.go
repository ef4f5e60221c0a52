package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/nats-io/nats.go/jetstream"
)

// Acceptance 6: every trajectory a run publishes on coda.traj.<app> is a
// valid document with G+1 candidates per step, its screenshots are in the
// blob store, every (task, sample) is there once, and the summary agrees
// with the stream.
func TestAcceptPublishedTrajectoriesAreValid(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	const (
		G = 2
		K = 2
	)
	taskIDs := []string{"S01", "S05"} // a finished() task and a question (ANS) task
	dir := t.TempDir()
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, simTaskDir(t, acceptApp, taskIDs...), "accept-valid", log)
	cfg.Group, cfg.Samples = G, K
	sum := runOK(t, cfg, logs)

	b := openTestBus(t, dir)
	defer b.Close()
	store := openStore(t, dir)
	ps := readPublished(t, b, store, acceptApp)
	total := len(taskIDs) * K
	if len(ps) != total {
		t.Fatalf("%d trajectories on %s, want %d tasks × %d samples = %d", len(ps), bus.Subject(bus.Raw, acceptApp), len(taskIDs), K, total)
	}

	ctx := context.Background()
	names := taskNames(acceptApp, taskIDs)
	done, err := mustLedger(t, b).Done(ctx, cfg.Run, names)
	if err != nil {
		t.Fatal(err)
	}

	ids := map[string]bool{}
	samples := map[string]map[int]bool{}
	blobsChecked := map[string]bool{}
	for _, p := range ps {
		tr := p.Traj
		where := fmt.Sprintf("message %d (%s/%d, trajectory %s)", p.Seq, tr.Task.ID, tr.Sample, tr.ID)
		if err := tr.Validate(); err != nil {
			t.Errorf("%s: Validate: %v", where, err)
		}
		if ids[tr.ID] {
			t.Errorf("%s: trajectory id published twice", where)
		}
		ids[tr.ID] = true
		if got := p.Header.Get(jetstream.MsgIDHeader); got != tr.ID {
			t.Errorf("%s: message id %q, want the trajectory id", where, got)
		}
		if p.Task != tr.Task.ID || p.Sample != tr.Sample || p.Header.Get("Coda-Run") != cfg.Run || p.Header.Get("Coda-Outcome") != string(tr.Outcome.Kind) {
			t.Errorf("%s: headers %v disagree with the trajectory", where, p.Header)
		}
		if tr.Run != cfg.Run || tr.Task.App != acceptApp || tr.Group != G || tr.Samples != K {
			t.Errorf("%s: run %q app %q G %d K %d, want %q %q %d %d", where, tr.Run, tr.Task.App, tr.Group, tr.Samples, cfg.Run, acceptApp, G, K)
		}
		rec := done[ledger.EpisodeKey{Task: tr.Task.ID, Sample: tr.Sample}]
		if withoutPrediction(rec) != ledger.RecordOf(tr) {
			t.Errorf("%s: the ledger records %+v for this episode, want %+v", where, rec, ledger.RecordOf(tr))
		}
		if rec.PredictedS <= 0 {
			t.Errorf("%s: the ledger records no length prediction: %+v", where, rec)
		}
		if tr.Outcome.IsEnvError() {
			t.Errorf("%s: env_error (%s) in a world without faults", where, tr.Outcome.Reason)
		}
		if len(tr.Steps) == 0 {
			t.Errorf("%s: no steps", where)
		}
		if samples[tr.Task.ID] == nil {
			samples[tr.Task.ID] = map[int]bool{}
		}
		samples[tr.Task.ID][tr.Sample] = true

		for i, s := range tr.Steps {
			sw := fmt.Sprintf("%s step %d", where, i)
			if len(s.Candidates) != G+1 {
				t.Errorf("%s: %d candidates, want G+1 = %d", sw, len(s.Candidates), G+1)
			}
			for j, c := range s.Candidates {
				if (c.Action == nil) == (c.ParseError == "") {
					t.Errorf("%s candidate %d: want a parsed action or a parse error, got action %v, parse error %q", sw, j, c.Action, c.ParseError)
				}
				if c.Plan == "" && c.ParseError == "" {
					t.Errorf("%s candidate %d: empty plan", sw, j)
				}
			}
			switch {
			case s.Executed == 0:
				if s.Candidates[0].Action == nil {
					t.Errorf("%s: candidate 0 executed without an action", sw)
				}
				if s.Code == "" {
					t.Errorf("%s: candidate 0 executed but no code recorded", sw)
				}
			case s.Executed == -1:
				if s.Error == "" {
					t.Errorf("%s: nothing executed and no error", sw)
				}
			default:
				t.Errorf("%s: executed candidate %d, want 0 (plan 0 drives the VM) or -1", sw, s.Executed)
			}
			if s.Screenshot.Width != 1280 || s.Screenshot.Height != 800 {
				t.Errorf("%s: screenshot %dx%d, want the simulator's 1280x800", sw, s.Screenshot.Width, s.Screenshot.Height)
			}
			if blobsChecked[s.Screenshot.SHA256] {
				continue
			}
			blobsChecked[s.Screenshot.SHA256] = true
			info, err := store.Stat(ctx, s.Screenshot.SHA256)
			if err != nil {
				t.Errorf("%s: screenshot %s not in the blob store: %v", sw, s.Screenshot.SHA256, err)
			} else if info.Size != s.Screenshot.Size {
				t.Errorf("%s: screenshot %s is %d bytes in the store, the trajectory says %d", sw, s.Screenshot.SHA256, info.Size, s.Screenshot.Size)
			}
		}
		// The last step of an episode that ended by the agent's action is
		// that action.
		if n := len(tr.Steps); n > 0 {
			last := tr.Steps[n-1]
			var want traj.ActionType
			switch tr.Outcome.Kind {
			case traj.OutcomeFinished:
				want = traj.Finished
			case traj.OutcomeAnswered:
				want = traj.Answer
			case traj.OutcomeFailed:
				want = traj.CallUser
			}
			if want != "" && (last.Executed != 0 || last.Candidates[0].Action == nil || last.Candidates[0].Action.Type != want) {
				t.Errorf("%s: outcome %s but the last step executed %+v", where, tr.Outcome.Kind, last.Candidates[0].Action)
			}
		}
	}
	for _, id := range names {
		for k := range K {
			if !samples[id][k] {
				t.Errorf("task %s: sample %d missing on the stream", id, k)
			}
		}
		if len(samples[id]) != K {
			t.Errorf("task %s: samples %v, want 0..%d", id, samples[id], K-1)
		}
	}
	if len(blobsChecked) == 0 {
		t.Error("no screenshot referenced")
	}

	checkSummaryAgrees(t, sum, ps)
	if sum.Run != cfg.Run || sum.App != acceptApp || sum.Tasks != len(taskIDs) || sum.Samples != K || sum.Group != G || sum.Skipped != 0 || sum.Retries != 0 || len(sum.Quarantined) != 0 {
		t.Errorf("summary %+v: want run %s, app %s, %d tasks, K %d, G %d, nothing skipped, retried or quarantined", sum, cfg.Run, acceptApp, len(taskIDs), K, G)
	}
	if dead, err := b.SubjectCount(ctx, bus.Dead, bus.DeadSubject(bus.Subject(bus.Raw, acceptApp))); err != nil || dead != 0 {
		t.Errorf("dead letters of %s: %d (%v), want none (an invalid trajectory goes there)", acceptApp, dead, err)
	}
	t.Logf("summary: %d episodes, outcomes %v, success rate %.2f, mean steps %.2f, %d distinct screenshots", sum.Episodes, sum.Outcomes, sum.Rate, sum.MeanSteps, len(blobsChecked))
}

// A process that stops between publishing a trajectory and writing its
// ledger record leaves the episode on the stream but not in the ledger.
// The next invocation of the run must take the stream's word for it: it
// records the stored trajectory and does not run the episode again (a
// re-run could end differently from the trajectory the stream keeps, and
// after the de-duplication window it would be stored twice).
func TestAcceptLedgerCatchesUpWithTheStream(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
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
	done, err := mustLedger(t, b).Done(ctx, run, taskNames(acceptApp, taskIDs))
	if err != nil {
		t.Fatal(err)
	}
	if len(done) != total {
		t.Errorf("ledger lists %d episodes, want %d", len(done), total)
	}
	for _, p := range ps {
		if got, want := withoutPrediction(done[ledger.EpisodeKey{Task: p.Task, Sample: p.Sample}]), ledger.RecordOf(p.Traj); got != want {
			t.Errorf("ledger %s/%d: %+v, want the stream's %+v", p.Task, p.Sample, got, want)
		}
	}
	if n, err := b.SubjectCount(ctx, bus.Raw, bus.Subject(bus.Raw, acceptApp)); err != nil || n != uint64(total) {
		t.Errorf("%d trajectories on the stream (%v), want %d", n, err, total)
	}
}

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
	t.Parallel() // beside the outage tests, which mostly wait
	const (
		K    = 2
		run  = "accept-resume"
		kill = 2 // cancel once this many trajectories are on the stream
	)
	taskIDs := []string{"S01", "S02", "S03"}
	total := len(taskIDs) * K
	names := taskNames(acceptApp, taskIDs)
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
			n, err := held.SubjectCount(cctx, bus.Raw, subject)
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
	onStream1, err := held.SubjectCount(cctx, bus.Raw, subject)
	if err != nil {
		t.Fatal(err)
	}
	done, err := mustLedger(t, held).Done(cctx, run, names)
	if err != nil {
		t.Fatal(err)
	}
	published1 := len(done)
	// Issue 36: the interrupted invocation's summary counts the run's
	// trajectories (also after the cancel) and says what is left and how
	// to finish it.
	if s := first.sum; s == nil || s.Stopped != "interrupted" || s.Left != total-published1 || s.OnStream != uint64(published1) {
		t.Errorf("summary of the interrupted run: %+v; want stopped \"interrupted\", %d left, %d on the stream", first.sum, total-published1, published1)
	}
	if first.err == nil || !strings.Contains(first.err.Error(), "run the same command again") {
		t.Errorf("the interrupted run's error does not say how to finish it: %v", first.err)
	}
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

// Success semantics: with a perfect simulated planner (skill 1) and an
// exact executor (no grounding noise, no misgrounding) every episode of the
// app succeeds by the task's own evaluator; with skill 0 none does. One
// app, K = 1: a finished() task, a question (ANS) task and an infeasible
// task (the right end is call_user(), i.e. FAIL).
func TestAcceptSkillDecidesSuccess(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	taskIDs := []string{"S01", "S05", "S11"}
	tasks := simTaskDir(t, acceptApp, taskIDs...)
	for _, tc := range []struct {
		skill         float64
		rate, passAtK float64
		successes     int
	}{
		{skill: 1, rate: 1, passAtK: 1, successes: len(taskIDs)},
		{skill: 0, rate: 0, passAtK: 0, successes: 0},
	} {
		t.Run(fmt.Sprintf("skill %g", tc.skill), func(t *testing.T) {
			simCfg := writeSimConfig(t, fmt.Sprintf(`{"models": {
  "planner": {"default_skill": %g},
  "executor": {"grounding_noise": 0, "misground_rate": 0}
}}`, tc.skill))
			dir := t.TempDir()
			log, logs := newLogCapture(slog.LevelInfo)
			cfg := acceptConfig(dir, tasks, fmt.Sprintf("accept-skill-%g", tc.skill), log)
			cfg.Group, cfg.Samples, cfg.SimConfig = 1, 1, simCfg
			sum := runOK(t, cfg, logs)
			b := openTestBus(t, dir)
			defer b.Close()
			ps := readPublished(t, b, openStore(t, dir), acceptApp)
			if len(ps) != len(taskIDs) {
				t.Fatalf("%d trajectories, want %d", len(ps), len(taskIDs))
			}
			checkSummaryAgrees(t, sum, ps)
			if sum.EnvErrors != 0 || sum.Episodes != len(taskIDs) {
				t.Fatalf("summary %+v: want %d episodes without environment errors", sum, len(taskIDs))
			}
			if sum.Success != tc.successes || sum.Rate != tc.rate || sum.PassAtK != tc.passAtK || sum.AverageAtK != tc.rate {
				t.Errorf("skill %g: %d successes, rate %v, Average@1 %v, Pass@1 %v; want %d, %v, %v, %v",
					tc.skill, sum.Success, sum.Rate, sum.AverageAtK, sum.PassAtK, tc.successes, tc.rate, tc.rate, tc.passAtK)
			}
			for _, p := range ps {
				tr := p.Traj
				passed := tr.Eval != nil && tr.Eval.Passed
				if passed != (tc.skill == 1) {
					t.Errorf("skill %g: %s ended %s after %d steps, evaluation %+v", tc.skill, tr.Task.ID, tr.Outcome.Kind, len(tr.Steps), tr.Eval)
				}
				if tr.Eval == nil || len(tr.Eval.Unsupported) > 0 || tr.Eval.Error != "" {
					t.Errorf("%s: the evaluator did not run cleanly: %+v", tr.Task.ID, tr.Eval)
				}
			}
			t.Logf("skill %g: outcomes %v, rate %v, mean steps %.2f", tc.skill, sum.Outcomes, sum.Rate, sum.MeanSteps)
		})
	}
}

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

// Issue 10, acceptance 2: the demo's job (ChimeraX, every simulated task,
// K samples) with the simulated executor answering in pixels-resized (the
// default) and in grid1000, the client parsing in the same space, reaches
// the same success rate within binomial noise, records the space in every
// trajectory, and raises no warning. Under the race detector a sample of
// tasks runs (the full comparison runs without it in make test).
func TestAcceptCoordSpacesReachTheSameSuccessRate(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	const app = "ChimeraX"
	tasks, samples := "", 4
	if acceptRace {
		tasks, samples = simTaskDir(t, app, "S01", "S02", "S03"), 1
	}
	type result struct {
		space string
		sum   *Summary
	}
	var results []result
	for _, space := range []string{"pixels-resized", "grid1000"} {
		dir := t.TempDir()
		log, logs := newLogCapture(slog.LevelInfo)
		cfg := acceptConfig(dir, tasks, "coords-"+space, log)
		cfg.App, cfg.Group, cfg.Samples, cfg.VMs = app, 1, samples, 4
		cfg.ExecutorCoords = space
		sum, err := runWithin(t, 5*time.Minute, cfg)
		if err != nil {
			logs.dump(t, slog.LevelWarn)
			t.Fatalf("%s: Run: %v", space, err)
		}
		want, err := uitars.ParseCoords(space)
		if err != nil {
			t.Fatal(err)
		}
		b := openTestBus(t, dir)
		ps := readPublished(t, b, openStore(t, dir), app)
		b.Close()
		checkSummaryAgrees(t, sum, ps)
		for _, p := range ps {
			if c := p.Traj.Models.Executor.Coords; c == nil || *c != want {
				t.Fatalf("%s: trajectory %s records executor coords %+v, want %+v", space, p.Traj.ID, c, want)
			}
			if c := p.Traj.Models.Planner.Coords; c == nil || *c != uitars.Grid() {
				t.Fatalf("%s: trajectory %s records planner coords %+v, want grid1000", space, p.Traj.ID, c)
			}
		}
		if sum.ExecutorCoords != space || sum.Grounding.Grounded == 0 || sum.OutOfRangeShare != 0 || len(sum.Warnings) != 0 {
			t.Errorf("%s: summary coords %q, grounding %+v, out of range %v, warnings %q: want the space, no out-of-range point, no warning",
				space, sum.ExecutorCoords, sum.Grounding, sum.OutOfRangeShare, sum.Warnings)
		}
		t.Logf("%s: %d/%d successes (%.1f%%), grounding %+v", space, sum.Success, sum.Episodes, 100*sum.Rate, sum.Grounding)
		results = append(results, result{space, sum})
	}
	if acceptRace {
		t.Log("race detector: a sample of episodes ran; the success rates are compared in the run without it")
		return
	}
	a, b := results[0].sum, results[1].sum
	n1, n2 := float64(a.Episodes-a.Unscored-a.EnvErrors), float64(b.Episodes-b.Unscored-b.EnvErrors)
	p := (a.Rate*n1 + b.Rate*n2) / (n1 + n2)
	se := math.Sqrt(p * (1 - p) * (1/n1 + 1/n2))
	if a.Success == 0 || b.Success == 0 || math.Abs(a.Rate-b.Rate) > 3*se+1e-9 {
		t.Errorf("success rates %.3f (%s) and %.3f (%s) differ by more than 3 standard errors (%.3f)",
			a.Rate, results[0].space, b.Rate, results[1].space, 3*se)
	}
}

// Issue 10, acceptance 2: a deliberately wrong space — the simulated
// executor answers in one space, the client parses in another — shows in
// the summary (printed and JSON) as a share of out-of-range candidates with
// a loud warning.
func TestAcceptWrongCoordSpaceWarns(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	tasks := simTaskDir(t, acceptApp, "S01", "S02", "S04")
	for _, tc := range []struct{ simSpace, clientSpace string }{
		{"grid1000", "pixels-resized"},
		{"pixels-resized", "grid1000"},
	} {
		t.Run(tc.simSpace+" read as "+tc.clientSpace, func(t *testing.T) {
			simCoords, err := uitars.ParseCoords(tc.simSpace)
			if err != nil {
				t.Fatal(err)
			}
			simCfg := writeSimConfig(t, fmt.Sprintf(`{"models": {"executor": {"coords": {"space": %q, "factor": %d, "min_pixels": %d, "max_pixels": %d}}}}`,
				simCoords.Space, simCoords.Factor, simCoords.MinPixels, simCoords.MaxPixels))
			dir := t.TempDir()
			log, logs := newLogCapture(slog.LevelInfo)
			cfg := acceptConfig(dir, tasks, "wrong-coords", log)
			cfg.Group, cfg.Samples, cfg.SimConfig = 4, 2, simCfg
			cfg.ExecutorCoords = tc.clientSpace
			cfg.Summary = filepath.Join(dir, "summary.json")
			sum, err := runWithin(t, 3*time.Minute, cfg)
			if err != nil {
				logs.dump(t, slog.LevelWarn)
				t.Fatalf("Run: %v", err)
			}
			g := sum.Grounding
			if g.OutOfRange == 0 || sum.OutOfRangeShare != float64(g.OutOfRange)/float64(g.Grounded) || sum.OutOfRangeShare <= warnOutOfRange {
				t.Fatalf("grounding %+v, out-of-range share %v: want a share above %v", g, sum.OutOfRangeShare, warnOutOfRange)
			}
			if len(sum.Warnings) == 0 || !strings.Contains(sum.Warnings[0], "outside its coordinate space "+tc.clientSpace) {
				t.Fatalf("warnings %q: want one about the coordinate space", sum.Warnings)
			}
			var js struct {
				Coords   string   `json:"executor_coords"`
				Share    float64  `json:"out_of_range_share"`
				Warnings []string `json:"warnings"`
			}
			if raw, err := os.ReadFile(cfg.Summary); err != nil || json.Unmarshal(raw, &js) != nil {
				t.Fatalf("--summary JSON: %v", err)
			}
			if js.Coords != tc.clientSpace || js.Share != sum.OutOfRangeShare || len(js.Warnings) != len(sum.Warnings) {
				t.Errorf("--summary JSON %+v does not carry the space, share and warnings of %+v", js, sum)
			}
			var out bytes.Buffer
			sum.Print(&out)
			if !strings.Contains(out.String(), "WARNING: ") || !strings.Contains(out.String(), "% out of range") {
				t.Errorf("printed summary lacks the share or the warning:\n%s", out.String())
			}
			warned := false
			for _, r := range logs.records("executor answers look wrong") {
				warned = warned || (r.Level == slog.LevelWarn && strings.Contains(r.Attrs["warning"], "coordinate space"))
			}
			if !warned {
				t.Error("no warning was logged")
			}
			// The candidates themselves say why they have no action.
			b := openTestBus(t, dir)
			defer b.Close()
			n := 0
			for _, p := range readPublished(t, b, openStore(t, dir), acceptApp) {
				for _, s := range p.Traj.Steps {
					for _, c := range s.Candidates {
						if c.ParseErrorKind == traj.ParseOutOfRange {
							n++
						}
					}
				}
			}
			if n != g.OutOfRange {
				t.Errorf("%d candidates marked out_of_range on the stream, summary says %d", n, g.OutOfRange)
			}
		})
	}
}
