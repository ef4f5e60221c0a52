package judge

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/natstest"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/service"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Acceptance 5: the judge endpoint answers 10 % of calls with HTTP 500,
// 10 % with 429 and 20 % of its answers are malformed; the stream also
// holds a corrupt message and a trajectory whose screenshots are gone.
// Every trajectory still ends with exactly one judgement (decided or
// undecided), malformed answers are asked again, and the two bad
// messages are dead-lettered with a reason that says what is wrong while
// the others are judged.
func TestAcceptFaults(t *testing.T) {
	srv := natstest.Start(t)
	c := sharedCorpus(t)
	common := &service.Common{DataDir: t.TempDir(), Store: filepath.Join(c.dir, "blobs")}
	common.NATS.URL = srv.URL()

	models, ep := startSimJudge(t, 1, func(mc *simmodels.Config) {
		mc.Judge.Faults.ErrorProb = 0.1
		mc.Judge.Faults.RateLimitProb = 0.1
		mc.Judge.Faults.MalformedProb = 0.2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := service.NewEnv("judge", common, quietLog(), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store, err := env.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw := republish(t, b, c.trajs, "faults-"+traj.NewID(), 24)

	// A corrupt message and a trajectory whose final screenshot is gone.
	subject := bus.Subject(bus.Raw, acceptApp)
	if _, err := b.Publish(ctx, subject, "corrupt-1", []byte(`{"schema_version": 3, "id": "01J`), nil); err != nil {
		t.Fatal(err)
	}
	var victim *traj.Trajectory
	for _, tr := range raw {
		if !tr.Outcome.IsEnvError() && tr.FinalScreenshot != nil {
			c := *tr
			victim = &c
			break
		}
	}
	victim.ID = traj.NewID()
	gone := *victim.FinalScreenshot
	gone.SHA256 = strings.Repeat("ab", 32)
	victim.FinalScreenshot = &gone
	body, err := traj.MarshalCompact(victim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, subject, victim.ID, body, nil); err != nil {
		t.Fatal(err)
	}

	cache, err := OpenCache(ctx, b, common.Topology(), 0)
	if err != nil {
		t.Fatal(err)
	}
	pol := DefaultPolicy()
	pol.MaxFrames = testFrames
	j, err := New(Config{
		Endpoints: []EndpointSpec{ep}, Policy: pol, Store: store, Cache: cache, Log: quietLog(),
		Limits: Limits{Backoff: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	st, err := Serve(ctx, ServiceConfig{Judge: j, Bus: b, Archive: store, Workers: 4, Drain: true, RetryDelay: 50 * time.Millisecond, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v", st)

	docs, _ := judgedOn(t, b)
	seen := map[string]int{}
	undecided, reasked := 0, 0
	for _, d := range docs {
		seen[d.Trajectory.ID]++
		if d.Judgement.Decision == traj.Undecided {
			undecided++
			if d.Judgement.Reason == "" {
				t.Errorf("trajectory %s undecided without a reason", d.Trajectory.ID)
			}
		}
		for _, v := range d.Judgement.Votes {
			if v.Attempts > 1 {
				reasked++
			}
		}
	}
	for _, tr := range raw {
		if seen[tr.ID] != 1 {
			t.Errorf("trajectory %s: %d judgements, want 1", tr.ID, seen[tr.ID])
		}
	}
	if seen[victim.ID] != 0 || len(docs) != len(raw) {
		t.Errorf("%d judged messages for %d good trajectories (the one without screenshots: %d)", len(docs), len(raw), seen[victim.ID])
	}
	if reasked == 0 {
		t.Error("no vote was asked again although 20 % of the answers are malformed")
	}
	if st.DeadLettered != 2 {
		t.Errorf("%d dead-lettered, want 2", st.DeadLettered)
	}
	t.Logf("%d undecided, %d votes asked again, %d judge calls answered", undecided, reasked, len(models.Answered("judge")))

	pipetest.CheckDeadLetters(t, b, map[string][]string{
		"corrupt-1": {"not a valid trajectory"},
		victim.ID:   {victim.ID, gone.SHA256, "final screen", "not found"},
	})
}
