package judge

import (
	"context"
	"encoding/json"
	"reflect"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// nRecorder records the "n" of every request the simulated judge gets.
type nRecorder struct {
	mu sync.Mutex
	ns []int
}

func (r *nRecorder) hook(cfg *simmodels.Config) {
	cfg.OnRequest = func(kind string, body []byte) {
		if kind != "judge" {
			return
		}
		var req struct {
			N int `json:"n"`
		}
		_ = json.Unmarshal(body, &req) // a body that does not decode counts as n = 0
		r.mu.Lock()
		r.ns = append(r.ns, req.N)
		r.mu.Unlock()
	}
}

// take returns the n of the requests since the last take.
func (r *nRecorder) take() []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.ns
	r.ns = nil
	return out
}

// batchCorpus is the small corpus of the batch-vote test that runs under
// the race detector in make test: 2 tasks once each by a skilled planner
// (0.9), so that a trajectory passes the first vote (seeded: the same
// every run; the test fails if none does).
func batchCorpus(t testing.TB) *corpus {
	return skillCorpus(t, 0.9, 1, "S01", "S02")
}

// batchPolicy is the bench's cheaper policy on two frames (fast).
func batchPolicy() Policy {
	pol := CODAPolicy()
	pol.LowRes, pol.MaxFrames, pol.BatchVotes = Size{640, 400}, 2, true
	return pol
}

// TestAcceptBatchVotes: with BatchVotes the votes after the first are one
// call with n = 3, each vote recorded with its choice, and the judgement
// counts the calls the server got; a server that ignores n gets further
// calls for the votes it did not answer (never more calls than votes), and
// every judgement still has the votes its decision needs. On the acceptance
// corpus, without the race detector (make test; under -race on its small
// corpus): TestBatchVotesCache runs the batched path under the detector.
func TestAcceptBatchVotes(t *testing.T) {
	c := sharedCorpus(t)
	store := c.store(t)
	trajs := c.trajs[:min(len(c.trajs), 40)]
	// The second server (it ignores n) judges only the trajectories that
	// passed the first vote with the first one: a trajectory the first vote
	// rejects is one call with n = 1 on either server.
	var passedFirst []*traj.Trajectory
	for _, ignoreN := range []bool{false, true} {
		if ignoreN {
			trajs = passedFirst
		}
		var rec nRecorder
		_, ep := startSimJudge(t, 1, func(cfg *simmodels.Config) {
			rec.hook(cfg)
			cfg.Judge.IgnoreN = ignoreN
		})
		j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: batchPolicy(), Store: store, Log: quietLog(), Now: func() time.Time { return testTime }})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		batched, successes := 0, 0
		for _, tr := range trajs {
			jd, err := j.Judge(ctx, tr, false)
			if err != nil {
				t.Fatal(err)
			}
			if err := jd.Validate(); err != nil {
				t.Fatalf("ignore n %v: %v", ignoreN, err)
			}
			ns := rec.take()
			if jd.Calls() != len(ns) {
				t.Fatalf("ignore n %v, trajectory %s: the judgement counts %d calls, the server got %d (n = %v)", ignoreN, tr.ID, jd.Calls(), len(ns), ns)
			}
			if len(ns) > len(jd.Votes) {
				t.Errorf("ignore n %v: %d calls for %d votes", ignoreN, len(ns), len(jd.Votes))
			}
			if jd.Decision == traj.CleanSuccess || jd.Decision == traj.RedundantSuccess {
				successes++
				if len(jd.Votes) != 4 {
					t.Errorf("ignore n %v: a success on %d votes", ignoreN, len(jd.Votes))
				}
			}
			if ignoreN || len(jd.Votes) < 2 {
				continue
			}
			passedFirst = append(passedFirst, tr)
			// vLLM-like server: vote 0 alone, votes 1..3 from one call.
			batched++
			if !reflect.DeepEqual(ns, []int{1, 3}) {
				t.Errorf("trajectory %s: requests with n = %v, want [1 3]", tr.ID, ns)
			}
			for i, v := range jd.Votes[1:] {
				if v.Choices != 3 || v.Choice != i || v.Attempts != 1 {
					t.Errorf("vote %d: choice %d of %d, %d attempts; want choice %d of 3, 1 attempt", i+1, v.Choice, v.Choices, v.Attempts, i)
				}
			}
		}
		cancel()
		t.Logf("ignore n %v: %d of %d judgements batched, %d successes", ignoreN, batched, len(trajs), successes)
		if !ignoreN && batched == 0 {
			t.Error("no trajectory passed the first vote: nothing was batched")
		}
	}
}

// TestBatchVotesCache: votes of a multi-choice call are cached each under
// its own key; a trajectory judged again asks nothing, and with one vote's
// entry gone asks for that vote alone (n = 1).
func TestBatchVotesCache(t *testing.T) {
	c := batchCorpus(t)
	store := c.store(t)
	var rec nRecorder
	_, ep := startSimJudge(t, 1, rec.hook)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b := pipetest.Bus(t, natstest.Start(t).URL())
	cache, err := OpenCache(ctx, b, bus.DefaultTopology(), 0)
	if err != nil {
		t.Fatal(err)
	}
	newJudge := func() *Judge {
		j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: batchPolicy(), Store: store, Cache: cache, Log: quietLog(), Now: func() time.Time { return testTime }})
		if err != nil {
			t.Fatal(err)
		}
		return j
	}
	var tr *traj.Trajectory
	var first *traj.Judgement
	j := newJudge()
	for _, x := range c.trajs {
		jd, err := j.Judge(ctx, x, false)
		if err != nil {
			t.Fatal(err)
		}
		if len(jd.Votes) == 4 {
			tr, first = x, jd
			break
		}
	}
	if tr == nil {
		t.Fatal("no trajectory passed the first vote")
	}
	rec.take()
	again, err := newJudge().Judge(ctx, tr, false)
	if err != nil {
		t.Fatal(err)
	}
	if ns := rec.take(); len(ns) != 0 {
		t.Errorf("judged again from the cache: %d requests (n = %v)", len(ns), ns)
	}
	if !reflect.DeepEqual(again.Votes, first.Votes) || again.Decision != first.Decision {
		t.Errorf("judged again from the cache: %+v, first %+v", again.Votes, first.Votes)
	}

	kv, err := b.JetStream().KeyValue(ctx, VoteBucket)
	if err != nil {
		t.Fatal(err)
	}
	if err := kv.Delete(ctx, CallKey(tr.ID, j.VersionID(), 3, 1)); err != nil {
		t.Fatal(err)
	}
	third, err := newJudge().Judge(ctx, tr, false)
	if err != nil {
		t.Fatal(err)
	}
	if ns := rec.take(); !reflect.DeepEqual(ns, []int{1}) {
		t.Errorf("vote 3 not cached: requests with n = %v, want [1]", ns)
	}
	if !reflect.DeepEqual(third.Votes[:3], first.Votes[:3]) {
		t.Errorf("the cached votes changed: %+v, first %+v", third.Votes[:3], first.Votes[:3])
	}
	if v := third.Votes[3]; v.Choices != 0 || v.Choice != 0 || third.Calls() != 3 {
		t.Errorf("vote 3 asked alone: choice %d of %d, judgement counts %d calls", v.Choice, v.Choices, third.Calls())
	}
}
