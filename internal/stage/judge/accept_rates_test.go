package judge

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// startSimJudge serves the SIMULATOR's model endpoints (its judge with
// the default rates unless edit changes them) until the test ends.
func startSimJudge(t testing.TB, seed int64, edit func(*simmodels.Config)) (*simmodels.Endpoints, EndpointSpec) {
	t.Helper()
	cfg := simmodels.DefaultConfig()
	cfg.Seed = seed
	if edit != nil {
		edit(&cfg)
	}
	m, err := simmodels.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := servertest.Serve(t, "the simulator's model servers", m.Start)
	return m, EndpointSpec{URL: srv.JudgeURL, Model: simmodels.DefaultJudgeModel}
}

// simTruth is what truly happened in tr as the simulated judge decides it
// from the frames it is shown: simmodels.StateTruth on their state chunks.
func simTruth(t testing.TB, store *blob.Store, tr *traj.Trajectory, maxFrames int) bool {
	t.Helper()
	task, ok := simtasks.ByInstruction(tr.Task.Instruction)
	if !ok {
		t.Fatalf("trajectory %s: no simulator task has its instruction", tr.ID)
	}
	var states []desktop.State
	for _, f := range Keyframes(tr, maxFrames) {
		b, err := store.GetBytes(context.Background(), f.Image.SHA256)
		if err != nil {
			t.Fatal(err)
		}
		st, err := desktop.ReadStateChunk(b)
		if err != nil {
			t.Fatal(err)
		}
		states = append(states, st)
	}
	answer := ""
	if tr.Outcome.Kind == traj.OutcomeAnswered {
		answer = singleLine(tr.Outcome.Answer)
	}
	ok, _, _, err := simmodels.StateTruth(task, states, answer)
	if err != nil {
		t.Fatal(err)
	}
	return ok
}

// rates counts judgements against the truth.
type rates struct {
	pos, neg           int // trajectories truly successful / not
	tp, fp             int // judged successful (clean or with redundancy)
	callsPos, callsNeg int
	votes              int // verdicts cast (votes[] entries)
}

func (r *rates) add(truth bool, jd *traj.Judgement) {
	yes := jd.Decision == traj.CleanSuccess || jd.Decision == traj.RedundantSuccess
	r.votes += len(jd.Votes)
	if truth {
		r.pos++
		r.callsPos += jd.Calls()
		if yes {
			r.tp++
		}
	} else {
		r.neg++
		r.callsNeg += jd.Calls()
		if yes {
			r.fp++
		}
	}
}

func (r rates) precision() float64 { return float64(r.tp) / float64(r.tp+r.fp) }

// within checks that k successes of n are consistent with probability p:
// within 4 standard deviations, or for a rare event no more than a
// Poisson tail would allow. The n trajectories fall into clusters whose
// members the simulated judge sees alike (same task, frames and answer:
// they share its draws), so the standard deviation is widened by the
// design effect's bound, √(n/clusters).
func within(t *testing.T, what string, k, n, clusters int, p float64) {
	t.Helper()
	if n == 0 || clusters == 0 {
		t.Fatalf("%s: no trajectories", what)
	}
	mean := float64(n) * p
	sd := math.Sqrt(float64(n)*p*(1-p)) * math.Sqrt(float64(n)/float64(clusters))
	lo, hi := mean-4*sd, mean+4*sd+3 // +3: a rare event's small counts
	if float64(k) < lo || float64(k) > hi {
		t.Errorf("%s: %d of %d (%.3f), the model's %.3f (expected %.1f, accepted %.1f..%.1f)", what, k, n, float64(k)/float64(n), p, mean, lo, hi)
	} else {
		t.Logf("%s: %d of %d (%.3f), the model's %.3f (accepted %.1f..%.1f)", what, k, n, float64(k)/float64(n), p, lo, hi)
	}
}

// meanWithin checks a mean per trajectory (calls) against the model's:
// within 4 standard errors, sd the model's standard deviation per
// trajectory, widened as within does.
func meanWithin(t *testing.T, what string, sum, n, clusters int, mean, sd float64) {
	t.Helper()
	got := float64(sum) / float64(n)
	se := sd / math.Sqrt(float64(clusters))
	if math.Abs(got-mean) > 4*se+1e-9 {
		t.Errorf("%s: %.3f per trajectory, the model's %.3f ± %.3f", what, got, mean, 4*se)
	} else {
		t.Logf("%s: %.3f per trajectory, the model's %.3f ± %.3f", what, got, mean, 4*se)
	}
}

// Acceptance 3 of issue 37, through the pipeline: the simulated judge
// endpoint answers as its calibrated error model says. CODA's
// multi-resolution policy and the default one (between them: both
// models, both resolutions, calls of one vote and of several; the
// ensemble row differs from the default only in the order of the same
// calls)
// judge a simulated run (about 20 % true success) through the whole judge
// (frames from the blob store, prompts, low-resolution frames, calls to
// the endpoint's two models, answers parsed) and must match, on true
// successes and on failures apart, the rates and calls of the same policy
// walked over votes drawn straight from the model (calibJudge, the
// figures TestAcceptJudgeCalibration holds to the paper).
func TestAcceptSimJudgeMatchesItsModel(t *testing.T) {
	seeds := 1
	c := sharedCorpus(t)
	store := c.store(t)
	const maxFrames = 2 // the first and the final screen: the truth reads the final one
	truth := make([]bool, len(c.trajs))
	seen := map[bool]map[string]bool{true: {}, false: {}}
	for i, tr := range c.trajs {
		truth[i] = simTruth(t, store, tr, maxFrames)
		key := tr.Task.Instruction + "\x00" + tr.Outcome.Answer
		for _, f := range Keyframes(tr, maxFrames) {
			key += "\x00" + f.Image.SHA256
		}
		seen[truth[i]][key] = true
	}
	clusters := map[bool]int{true: len(seen[true]) * seeds, false: len(seen[false]) * seeds}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	type policy struct {
		name   string
		pol    Policy
		models int
	}
	var pols []policy
	p, m := table2[2].policy() // multires
	pols = append(pols, policy{table2[2].name, p, m})
	pols = append(pols, policy{"default", DefaultPolicy(2), 2})
	got := make([]rates, len(pols))
	for seed := int64(1); seed <= int64(seeds); seed++ {
		m, ep := startSimJudge(t, seed, nil)
		second := ep
		second.Model = m.Config().Judge.Second.Model
		for k, p := range pols {
			p.pol.MaxFrames = maxFrames
			eps := []EndpointSpec{ep, second}[:p.models]
			j, err := New(Config{Endpoints: eps, Policy: p.pol, Store: store, Log: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			for i, tr := range c.trajs {
				jd, err := j.Judge(ctx, tr, false)
				if err != nil {
					t.Fatal(err)
				}
				if jd.Decision == traj.Undecided || jd.Decision == traj.NotJudged {
					t.Fatalf("%s: trajectory %s: %s (%s)", p.name, tr.ID, jd.Decision, jd.Reason)
				}
				got[k].add(truth[i], jd)
			}
		}
	}
	t.Logf("%d trajectories × %d seeds, %d truly successful; %d and %d clusters the judge sees alike", len(c.trajs), seeds, got[0].pos, clusters[true], clusters[false])
	if got[0].pos == 0 || got[0].neg == 0 {
		t.Fatalf("the corpus has %d true successes and %d failures: both are needed", got[0].pos, got[0].neg)
	}
	cj := newCalibJudge()
	for k, p := range pols {
		want, err := cj.run(p.pol, p.models, 40000, 5)
		if err != nil {
			t.Fatal(err)
		}
		r := got[k]
		within(t, p.name+", true successes judged successful", r.tp, r.pos, clusters[true], want.pos.rate())
		within(t, p.name+", failures judged successful", r.fp, r.neg, clusters[false], want.neg.rate())
		meanWithin(t, p.name+", calls on true successes", r.callsPos, r.pos, clusters[true], want.pos.perTraj(), want.pos.sd())
		meanWithin(t, p.name+", calls on failures", r.callsNeg, r.neg, clusters[false], want.neg.perTraj(), want.neg.sd())
	}
}
