package judge

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/service"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// outageRig is a judge whose one endpoint (the simulated judge) is
// reached through a proxy the test switches off and on, over a fresh
// NATS server holding 12 republished trajectories of the shared corpus.
type outageRig struct {
	proxy  *servertest.Proxy
	models *simmodels.Endpoints
	cfg    ServiceConfig
	raw    []*traj.Trajectory
}

func newOutageRig(t *testing.T) *outageRig {
	t.Helper()
	srv := natstest.Start(t)
	c := sharedCorpus(t)
	common := &service.Common{DataDir: t.TempDir(), Store: filepath.Join(c.dir, "blobs")}
	common.NATS.URL = srv.URL()
	models, ep := startSimJudge(t, 1, nil)
	proxy := servertest.NewProxy(t)
	ep.URL = proxy.Route(ep.URL)
	_, b, store := pipetest.Open(t, common)
	raw := republish(t, b, c.trajs, "outage-"+traj.NewID(), 12)
	j := cachedJudge(t, b, common.Topology(), store, ep, Limits{Backoff: 5 * time.Millisecond, Attempts: 2})
	// Two deliveries: without the breaker an outage longer than one
	// retry delay would judge every trajectory it hits with unusable
	// votes (the last delivery casts what it gets).
	cfg := ServiceConfig{
		Judge: j, Bus: b, Archive: store, Workers: 4, Drain: true, MaxDeliver: 2, RetryDelay: 50 * time.Millisecond,
		OutageBudget: time.Minute, OutageProbe: 50 * time.Millisecond, Log: quietLog(),
	}
	return &outageRig{proxy: proxy, models: models, cfg: cfg, raw: raw}
}

// checkJudgedOnce checks that every trajectory has exactly one judgement
// on the stream and that no vote of it was made unusable by a failed call.
func (r *outageRig) checkJudgedOnce(t *testing.T) {
	t.Helper()
	docs, _ := judgedOn(t, r.cfg.Bus)
	seen := map[string]int{}
	for _, d := range docs {
		seen[d.Trajectory.ID]++
		for i, v := range d.Judgement.Votes {
			if strings.Contains(v.Error, "model call failed") {
				t.Errorf("trajectory %s vote %d: unusable because of the outage: %s", d.Trajectory.ID, i, v.Error)
			}
		}
	}
	for _, tr := range r.raw {
		if seen[tr.ID] != 1 {
			t.Errorf("trajectory %s: %d judgements, want 1", tr.ID, seen[tr.ID])
		}
	}
	if len(docs) != len(r.raw) {
		t.Errorf("%d judged messages for %d trajectories", len(docs), len(r.raw))
	}
}

// Issue 36 for the judge: a judge endpoint that is down for every worker
// pauses the judging instead of spending deliveries and casting unusable
// votes; it resumes when the endpoint answers, and stops with the
// *model.OutageError (non-zero exit) once an outage outlasts its budget,
// leaving the trajectories to the next judge, even those a stop caught on
// their last delivery.
func TestAcceptJudgeOutage(t *testing.T) {
	t.Run("waited out", func(t *testing.T) {
		r := newOutageRig(t)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		// The endpoint goes down after a few answers, for 3 s: 60 retry
		// delays, far beyond the two deliveries.
		stop := make(chan struct{})
		defer close(stop)
		go func() { // owned by the test: ends with stop or the outage
			for len(r.models.Answered("judge")) < 4 {
				select {
				case <-time.After(5 * time.Millisecond):
				case <-stop:
					return
				}
			}
			r.proxy.Down()
			select {
			case <-time.After(3 * time.Second):
				r.proxy.Up()
			case <-stop:
			}
		}()
		st, err := Serve(ctx, r.cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("stats %+v", st)
		if st.Outages < 1 || st.OutageHeld < 1 {
			t.Errorf("outages %d, judgings held %d: the outage was not seen", st.Outages, st.OutageHeld)
		}
		if st.DeadLettered != 0 || st.Decisions[traj.Undecided] != 0 {
			t.Errorf("dead-lettered %d, undecided %d: the outage burned trajectories", st.DeadLettered, st.Decisions[traj.Undecided])
		}
		r.checkJudgedOnce(t)
	})

	t.Run("down for good, then judged by the next judge", func(t *testing.T) {
		r := newOutageRig(t)
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		defer cancel()
		r.proxy.Down()
		cfg := r.cfg
		cfg.OutageBudget = 500 * time.Millisecond
		start := time.Now()
		st, err := Serve(ctx, cfg)
		var oe *model.OutageError
		if !errors.As(err, &oe) || !errors.Is(err, model.ErrOutage) {
			t.Fatalf("Serve with the endpoint down for good: %v, want the *model.OutageError", err)
		}
		if took := time.Since(start); took > time.Minute {
			t.Errorf("stopped after %s with a budget of %s", took, cfg.OutageBudget)
		}
		if oe.Endpoint == "" || !strings.Contains(err.Error(), oe.Endpoint) {
			t.Errorf("the outage error names no endpoint: %v", err)
		}
		if n := st.Trajectories(); n != 0 || st.DeadLettered != 0 {
			t.Errorf("the stopped judge published %d judgements and dead-lettered %d", n, st.DeadLettered)
		}
		if docs, _ := judgedOn(t, r.cfg.Bus); len(docs) != 0 {
			t.Errorf("%d judgements on the stream from a judge whose endpoint was down", len(docs))
		}

		// A second judge stops too, with the trajectories it held on their
		// last delivery (MaxDeliver 2): they stay for the next judge, not
		// dead-lettered.
		st, err = Serve(ctx, cfg)
		if !errors.Is(err, model.ErrOutage) || st.DeadLettered != 0 {
			t.Fatalf("a second judge with the endpoint still down: %v, %d dead-lettered; want the outage error and none", err, st.DeadLettered)
		}

		r.proxy.Up()
		st, err = Serve(ctx, r.cfg)
		if err != nil {
			t.Fatal(err)
		}
		if st.Trajectories() != len(r.raw) || st.Outages != 0 || st.DeadLettered != 0 {
			t.Errorf("the next judge judged %d of %d (outages %d, dead-lettered %d)", st.Trajectories(), len(r.raw), st.Outages, st.DeadLettered)
		}
		pipetest.CheckDeadLetters(t, r.cfg.Bus, map[string][]string{})
		r.checkJudgedOnce(t)
	})
}
