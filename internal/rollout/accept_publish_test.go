package rollout

import (
	"context"
	"fmt"
	"log/slog"
	"testing"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/ledger"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/nats-io/nats.go/jetstream"
)

// Acceptance 6: every trajectory a run publishes on coda.traj.<app> is a
// valid document with G+1 candidates per step, its screenshots are in the
// blob store, every (task, sample) is there once, and the summary agrees
// with the stream.
func TestAcceptPublishedTrajectoriesAreValid(t *testing.T) {
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
	runs, err := ledger.Open(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, id := range taskIDs {
		names = append(names, acceptApp+"/"+id)
	}
	done, err := runs.Done(ctx, cfg.Run, names)
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
		if want := done[ledger.EpisodeKey{Task: tr.Task.ID, Sample: tr.Sample}]; want != ledger.RecordOf(tr) {
			t.Errorf("%s: the ledger records %+v for this episode, want %+v", where, want, ledger.RecordOf(tr))
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
	if dead, err := subjectCount(ctx, b, bus.Dead, bus.DeadSubject(bus.Subject(bus.Raw, acceptApp))); err != nil || dead != 0 {
		t.Errorf("dead letters of %s: %d (%v), want none (an invalid trajectory goes there)", acceptApp, dead, err)
	}
	t.Logf("summary: %d episodes, outcomes %v, success rate %.2f, mean steps %.2f, %d distinct screenshots", sum.Episodes, sum.Outcomes, sum.Rate, sum.MeanSteps, len(blobsChecked))
}
