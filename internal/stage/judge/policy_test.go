package judge

import (
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/pkg/traj"
)

func step(n int) *int { return &n }

// Vote shorthands: Y clean success, N failure, B unusable.
var (
	vY = traj.Vote{Verdict: &traj.Verdict{Correctness: true, Optimized: true, Redundant: []int{}}}
	vN = traj.Vote{Verdict: &traj.Verdict{Correctness: false, Redundant: []int{}, FirstErrorStep: step(3), ErrorType: "e3"}}
	vB = traj.Vote{Error: "judge answer: no result dict"}
)

func TestDecide(t *testing.T) {
	una := Policy{Votes: 4, Rule: Unanimous}
	low := una
	low.LowRes = Size{640, 400}
	maj := Policy{Votes: 4, Rule: Majority}
	maj3 := Policy{Votes: 3, Rule: Majority}
	cases := []struct {
		name  string
		pol   Policy
		votes []traj.Vote
		want  traj.Decision
		final bool
	}{
		{"unanimous: first vote fails", una, []traj.Vote{vN}, traj.Failure, true},
		{"unanimous: 3 of 4 say yes so far", una, []traj.Vote{vY, vY, vY}, traj.Undecided, false},
		{"unanimous: all 4 yes", una, []traj.Vote{vY, vY, vY, vY}, traj.CleanSuccess, true},
		{"unanimous: last fails", una, []traj.Vote{vY, vY, vY, vN}, traj.Failure, true},
		{"unanimous: an unusable vote goes on (a failure may still come)", una, []traj.Vote{vB, vY}, traj.Undecided, false},
		{"unanimous: unusable and no failure is undecided", una, []traj.Vote{vY, vB, vY, vY}, traj.Undecided, true},
		{"unanimous: unusable then a failure is a failure", una, []traj.Vote{vB, vY, vN}, traj.Failure, true},
		{"lowres failure is final", low, []traj.Vote{vN}, traj.Failure, true},
		{"lowres failure is final under majority", Policy{Votes: 4, Rule: Majority, LowRes: Size{64, 64}}, []traj.Vote{vN}, traj.Failure, true},
		{"majority: 3 of 4 yes", maj, []traj.Vote{vY, vN, vY, vY}, traj.CleanSuccess, true},
		{"majority: 3 yes ends early", maj, []traj.Vote{vY, vY, vY}, traj.CleanSuccess, true},
		{"majority: 2 no end early (a tie fails)", maj, []traj.Vote{vN, vY, vN}, traj.Failure, true},
		{"majority: 2-2 is a failure", maj, []traj.Vote{vY, vY, vN, vN}, traj.Failure, true},
		{"majority: open", maj, []traj.Vote{vY, vN}, traj.Undecided, false},
		{"majority: 2 unusable and 1 yes, 1 left: neither reachable", maj, []traj.Vote{vB, vB, vY}, traj.Undecided, true},
		{"majority: 1 unusable and 1 yes, 2 left: both reachable", maj, []traj.Vote{vB, vY}, traj.Undecided, false},
		{"majority: 2 unusable, 2 left: a failure is still reachable", maj, []traj.Vote{vB, vB}, traj.Undecided, false},
		{"majority of 3: 2 unusable settle it", maj3, []traj.Vote{vB, vB}, traj.Undecided, true},
		{"majority of 3: 2 yes", maj3, []traj.Vote{vY, vY}, traj.CleanSuccess, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := c.pol.Decide(c.votes)
			if out.Decision != c.want || out.Final != c.final {
				t.Fatalf("decision %s final %v, want %s final %v (%+v)", out.Decision, out.Final, c.want, c.final, out)
			}
			if (out.Verdict == nil) != (out.Decision == traj.Undecided) {
				t.Fatalf("verdict %+v with decision %s", out.Verdict, out.Decision)
			}
			if out.Verdict != nil && out.Verdict.Decide() != out.Decision {
				t.Fatalf("verdict decides %s, decision %s", out.Verdict.Decide(), out.Decision)
			}
			if out.Decision == traj.Undecided && out.Final && out.Reason == "" {
				t.Fatal("an undecided outcome needs a reason")
			}
		})
	}
}

// TestCombinedVerdict: the documented rule for which vote's fields the
// combined verdict keeps.
func TestCombinedVerdict(t *testing.T) {
	una := Policy{Votes: 3, Rule: Unanimous}
	yes := func(red []int, fe *int) traj.Vote {
		return traj.Vote{Verdict: &traj.Verdict{Correctness: true, Optimized: len(red) == 0 && fe == nil, Redundant: red, FirstErrorStep: fe, ErrorType: "t"}}
	}
	t.Run("success: union of redundant steps, earliest first error", func(t *testing.T) {
		out := una.Decide([]traj.Vote{yes([]int{4, 2}, nil), yes([]int{2, 7}, step(5)), yes(nil, step(3))})
		want := &traj.Verdict{Correctness: true, Redundant: []int{2, 4, 7}, FirstErrorStep: step(3), ErrorType: "t"}
		if !reflect.DeepEqual(out.Verdict, want) || out.Decision != traj.RedundantSuccess {
			t.Fatalf("got %+v (%s), want %+v", out.Verdict, out.Decision, want)
		}
	})
	t.Run("success is clean only when every vote saw it clean", func(t *testing.T) {
		out := una.Decide([]traj.Vote{yes(nil, nil), yes(nil, nil), yes(nil, nil)})
		if out.Decision != traj.CleanSuccess || !out.Verdict.Optimized {
			t.Fatalf("%+v", out)
		}
		out = una.Decide([]traj.Vote{yes(nil, nil), yes([]int{1}, nil), yes(nil, nil)})
		if out.Decision != traj.RedundantSuccess || out.Verdict.Optimized {
			t.Fatalf("%+v", out)
		}
	})
	t.Run("failure: the failing vote with the earliest first error step", func(t *testing.T) {
		no := func(fe *int, et string) traj.Vote {
			return traj.Vote{Verdict: &traj.Verdict{Redundant: []int{}, FirstErrorStep: fe, ErrorType: et}}
		}
		maj := Policy{Votes: 5, Rule: Majority}
		out := maj.Decide([]traj.Vote{no(nil, "none"), no(step(6), "six"), vY, no(step(2), "two"), no(step(2), "two again")})
		if out.Decision != traj.Failure || out.Verdict.ErrorType != "two" || *out.Verdict.FirstErrorStep != 2 {
			t.Fatalf("%+v", out.Verdict)
		}
		// The combined verdict is a copy: changing it leaves the vote alone.
		*out.Verdict.FirstErrorStep = 99
		if v := no(step(2), ""); *v.Verdict.FirstErrorStep != 2 {
			t.Fatal("aliasing")
		}
	})
}

func TestPolicyValidateAndString(t *testing.T) {
	p := CODAPolicy()
	if err := p.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := p.String(); got != "unanimous@4 frames=16 temperature=1 top_p=0.6 malformed_retries=2" {
		t.Errorf("String() = %q", got)
	}
	p.LowRes, p.Temperatures = Size{640, 400}, []float64{1, 0.7}
	if got := p.String(); got != "unanimous@4 lowres=640x400 frames=16 temperature=1,0.7 top_p=0.6 malformed_retries=2" {
		t.Errorf("String() = %q", got)
	}
	if p.Temperature(0) != 1 || p.Temperature(1) != 0.7 || p.Temperature(3) != 0.7 || !p.LowResVote(0) || p.LowResVote(1) {
		t.Error("per-vote settings")
	}
	noEarly := p
	noEarly.NoEarlyExit = true
	if noEarly.String() != p.String() {
		t.Error("early exit does not change decisions and must not change the judge version")
	}
	if p.VoteSampling(1).Temperature != 0.7 || p.VoteSampling(1).TopK != -1 || p.VoteSampling(1).MaxTokens != 4096 {
		t.Errorf("VoteSampling(1) = %+v", p.VoteSampling(1))
	}
	greedy := CODAPolicy()
	greedy.Temperatures = []float64{0} // sent as it is now: no 0.01 stand-in
	if err := greedy.Validate(); err != nil {
		t.Errorf("temperature 0: %v", err)
	}
	bad := Policy{Votes: 0, Rule: "most", Temperatures: []float64{-1}, TopPs: []float64{1.5}, MaxFrames: 1, MalformedRetries: -1,
		Sampling: traj.Sampling{TopK: -2, RepetitionPenalty: 1, MaxTokens: 1}}
	err := bad.Validate()
	for _, want := range []string{"--votes", "--rule", "--temperature", "--top-p", "--top-k", "--max-frames", "--malformed-retries"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Validate does not name %s: %v", want, err)
		}
	}
}

// TestSettleSameVotesSameDecision: votes asked together (BatchVotes:
// vote 0 alone, then the others in one call) lead, on the same votes, to
// the decision and combined verdict that asking them one at a time with
// early exit does — for every sequence of four votes among clean and
// redundant successes, failures at two steps and unusable answers, under
// both rules, with and without a low-resolution first vote.
func TestSettleSameVotesSameDecision(t *testing.T) {
	vR := traj.Vote{Verdict: &traj.Verdict{Correctness: true, Redundant: []int{2}}}
	vN1 := traj.Vote{Verdict: &traj.Verdict{Correctness: false, Redundant: []int{}, FirstErrorStep: step(1), ErrorType: "e1"}}
	kinds := []traj.Vote{vY, vR, vN, vN1, vB}
	for _, pol := range []Policy{
		{Votes: 4, Rule: Unanimous}, {Votes: 4, Rule: Unanimous, LowRes: Size{640, 400}},
		{Votes: 4, Rule: Majority}, {Votes: 4, Rule: Majority, LowRes: Size{640, 400}},
	} {
		pol.BatchVotes = true
		for code := range 625 { // 5^4
			votes := make([]traj.Vote, 4)
			for i, c := 0, code; i < 4; i, c = i+1, c/5 {
				votes[i] = kinds[c%5]
			}
			// One at a time with early exit.
			var seq Outcome
			cast := 0
			for cast < 4 {
				cast++
				if seq = pol.Decide(votes[:cast]); seq.Final {
					break
				}
			}
			// Vote 0, then the rest in one call.
			bat := pol.Settle(votes[:1], 0)
			batCast := 1
			if !bat.Final {
				if n := pol.Run(1, func(a, b int) bool { return true }); n != 3 {
					t.Fatalf("%s: run from vote 1 is %d votes, want 3", pol, n)
				}
				bat, batCast = pol.Settle(votes, 1), 4
			}
			if !reflect.DeepEqual(seq, bat) {
				t.Fatalf("%s, votes %d: one at a time %+v (after %d votes), batched %+v (after %d)", pol, code, seq, cast, bat, batCast)
			}
		}
	}
}

func TestRun(t *testing.T) {
	one := func(a, b int) bool { return true }
	two := func(a, b int) bool { return a%2 == b%2 } // an ensemble of two endpoints
	pol := CODAPolicy()
	if n := pol.Run(1, one); n != 1 {
		t.Errorf("without BatchVotes: run of %d", n)
	}
	pol.BatchVotes = true
	temps := pol
	temps.Temperatures = []float64{1, 1, 1, 0.7}
	for _, c := range []struct {
		name string
		pol  Policy
		i    int
		same func(a, b int) bool
		want int
	}{
		{"vote 0 stays alone", pol, 0, one, 1},
		{"votes 1..3 together", pol, 1, one, 3},
		{"from vote 2", pol, 2, one, 2},
		{"last vote", pol, 3, one, 1},
		{"ensemble: votes alternate endpoints", pol, 1, two, 1},
		{"a vote of another temperature ends the run", temps, 1, one, 2},
	} {
		if n := c.pol.Run(c.i, c.same); n != c.want {
			t.Errorf("%s: run of %d, want %d", c.name, n, c.want)
		}
	}
}
