package judge

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/servertest"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
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
// Poisson tail would allow.
func within(t *testing.T, what string, k, n int, p float64) {
	t.Helper()
	if n == 0 {
		t.Fatalf("%s: no trajectories", what)
	}
	mean := float64(n) * p
	sd := math.Sqrt(float64(n) * p * (1 - p))
	lo, hi := mean-4*sd, mean+4*sd+3 // +3: a rare event's small counts
	if float64(k) < lo || float64(k) > hi {
		t.Errorf("%s: %d of %d (%.3f), closed form %.3f (expected %.1f, accepted %.1f..%.1f)", what, k, n, float64(k)/float64(n), p, mean, lo, hi)
	} else {
		t.Logf("%s: %d of %d (%.3f), closed form %.3f", what, k, n, float64(k)/float64(n), p)
	}
}

// callsWithin checks the mean number of calls of unanimous@4 with early
// exit against its closed form for a per-vote yes probability p: a vote
// is cast while every vote before it said yes.
func callsWithin(t *testing.T, what string, calls, n int, p float64) {
	t.Helper()
	probs := []float64{1 - p, p * (1 - p), p * p * (1 - p), p * p * p} // 1, 2, 3, 4 calls
	mean, sq := 0.0, 0.0
	for i, q := range probs {
		c := float64(i + 1)
		mean += q * c
		sq += q * c * c
	}
	sd := math.Sqrt((sq - mean*mean) / float64(n))
	got := float64(calls) / float64(n)
	if math.Abs(got-mean) > 4*sd+1e-9 {
		t.Errorf("%s: %.3f calls per trajectory, closed form %.3f ± %.3f", what, got, mean, 4*sd)
	} else {
		t.Logf("%s: %.3f calls per trajectory, closed form %.3f", what, got, mean)
	}
}

// Acceptance 2 (its test): with independent votes (the simulator's
// default judge: recall R = 0.8, false-positive rate F = 0.2, no vote
// correlation), one vote calls a true success a success with probability
// R and a failure with F; unanimous@4 does so with R⁴ and F⁴ and makes
// 1+p+p²+p³ calls with early exit. The measured rates over a simulated
// run at about 20 % true success, judged under several simulator seeds,
// must match these closed forms, and voting must raise precision.
func TestAcceptJudgeRatesMatchTheClosedForm(t *testing.T) {
	seeds := 4
	if raceEnabled {
		seeds = 2
	}
	c := sharedCorpus(t)
	store := c.store(t)
	const maxFrames = 2 // the first and the final screen: the truth reads the final one
	truth := make([]bool, len(c.trajs))
	for i, tr := range c.trajs {
		truth[i] = simTruth(t, store, tr, maxFrames)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var single, vote4 rates
	for seed := int64(1); seed <= int64(seeds); seed++ {
		_, ep := startSimJudge(t, seed, nil)
		for _, k := range []int{1, 4} {
			pol := DefaultPolicy()
			pol.Votes, pol.MaxFrames = k, maxFrames
			j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: pol, Store: store, Log: quietLog()})
			if err != nil {
				t.Fatal(err)
			}
			for i, tr := range c.trajs {
				jd, err := j.Judge(ctx, tr, false)
				if err != nil {
					t.Fatal(err)
				}
				if jd.Decision == traj.Undecided || jd.Decision == traj.NotJudged {
					t.Fatalf("trajectory %s: %s (%s)", tr.ID, jd.Decision, jd.Reason)
				}
				if k == 1 {
					single.add(truth[i], jd)
				} else {
					vote4.add(truth[i], jd)
				}
			}
		}
	}
	base := float64(single.pos) / float64(single.pos+single.neg)
	t.Logf("%d trajectories × %d seeds, true success rate %.2f", len(c.trajs), seeds, base)
	if !raceEnabled && (base < 0.1 || base > 0.35) {
		t.Fatalf("the corpus's true success rate is %.2f, want about 0.2", base)
	}
	const R, F = 0.80, 0.20
	within(t, "single vote, true successes judged successful", single.tp, single.pos, R)
	within(t, "single vote, failures judged successful", single.fp, single.neg, F)
	within(t, "unanimous@4, true successes judged successful", vote4.tp, vote4.pos, math.Pow(R, 4))
	within(t, "unanimous@4, failures judged successful", vote4.fp, vote4.neg, math.Pow(F, 4))
	callsWithin(t, "unanimous@4 on true successes", vote4.callsPos, vote4.pos, R)
	callsWithin(t, "unanimous@4 on failures", vote4.callsNeg, vote4.neg, F)
	if single.callsPos+single.callsNeg != single.pos+single.neg {
		t.Errorf("a single vote made %d calls on %d trajectories", single.callsPos+single.callsNeg, single.pos+single.neg)
	}
	t.Logf("precision single %.3f, unanimous@4 %.3f", single.precision(), vote4.precision())
	if !(vote4.precision() > single.precision()) {
		t.Errorf("voting did not raise precision: %.3f → %.3f", single.precision(), vote4.precision())
	}
}
