package judge

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/pkg/traj"
)

// Rule is how votes combine into a decision.
type Rule string

// Rules.
const (
	// Unanimous: success only when every vote says Correctness; one
	// failing vote makes a failure.
	Unanimous Rule = "unanimous"
	// Majority: success when more than half of the votes say Correctness,
	// failure when at least half say it failed (a tie is a failure:
	// precision matters more than recall).
	Majority Rule = "majority"
)

// Policy is how a trajectory is judged: how many votes, at which
// sampling settings and resolutions, and how they combine.
type Policy struct {
	// Votes is K, every vote counted (the low-resolution one too).
	Votes int
	Rule  Rule
	// Temperatures and TopPs are the sampling settings of the votes in
	// order; a list shorter than Votes repeats its last value.
	Temperatures []float64
	TopPs        []float64
	// Sampling are the votes' other sampling parameters, sent explicitly
	// with every call (top_k, min_p, repetition_penalty, presence and
	// frequency penalties, max_tokens, stop); its Temperature and TopP are
	// replaced by each vote's, and each call has its own seed.
	Sampling traj.Sampling
	// LowRes is the size low-resolution votes' frames are scaled down to
	// fit. Under Staged the low-resolution votes are those of LowRes
	// stages; under a voting rule, setting it makes vote 0 a
	// low-resolution pass, and a failure there is a failure without
	// full-resolution votes.
	LowRes Size
	// MaxFrames bounds the frames of one call (DefaultMaxFrames).
	MaxFrames int
	// MalformedRetries is how many times a vote whose answer holds no
	// usable result dict is asked again (each time a new call with its own
	// seed) before it counts as unusable.
	MalformedRetries int
	// TruncatedMaxTokens is the max_tokens of the one call a vote makes
	// again when its answer was cut at max_tokens (finish_reason
	// "length"); a second cut answer makes the vote unusable. 0 is twice
	// Sampling.MaxTokens.
	TruncatedMaxTokens int
	// NoEarlyExit casts every vote even when the decision is already
	// certain (for measuring what early exit saves; decisions are the
	// same).
	NoEarlyExit bool
	// Stages are the stages of a Staged policy (Rule Staged; Votes is
	// then the sum of their votes).
	Stages []Stage
	// BatchVotes asks the votes after the first in as few calls as
	// possible: each run of consecutive votes of one stage with the same
	// endpoint and sampling settings is one call with n = the run's length (an
	// OpenAI-compatible server samples n answers of one prompt in one
	// request; vLLM prefills the prompt and its images once). The first
	// vote stays a call of its own, so that a failure there still ends
	// the judgement after one call. The decision rests on the same votes
	// as without it: the shortest prefix of the votes that settles it
	// (Settle); the run's later votes are recorded too. Left out of
	// String (decisions do not change).
	BatchVotes bool
}

// DefaultPolicy is the policy codapipe judges with by default with the
// given number of judge models: StagedPolicy(DefaultStages(models)).
func DefaultPolicy(models int) Policy { return StagedPolicy(DefaultStages(models)) }

// CODAPolicy is CODA's voting@4: unanimous@4, temperature 1.0, top_p 0.6
// (every other filter off: top_k -1, min_p 0, no penalties), answers of
// at most 4096 tokens, no low-resolution pass, 16 frames, 2 re-asks of a
// malformed answer, every vote a call of its own.
func CODAPolicy() Policy {
	return Policy{Votes: 4, Rule: Unanimous, Temperatures: []float64{1.0}, TopPs: []float64{0.6},
		Sampling:  DefaultSampling(),
		MaxFrames: DefaultMaxFrames, MalformedRetries: 2}
}

// DefaultSampling are the judge's default sampling parameters besides
// the per-vote temperature and top_p.
func DefaultSampling() traj.Sampling {
	return traj.Sampling{Temperature: 1, TopP: 0.6, TopK: -1, RepetitionPenalty: 1, MaxTokens: 4096}
}

// VoteSampling is what vote i's calls send: Sampling with the vote's
// temperature and top_p.
func (p Policy) VoteSampling(i int) traj.Sampling {
	s := p.Sampling
	s.Temperature, s.TopP = p.Temperature(i), p.TopP(i)
	s.Stop = slices.Clone(s.Stop)
	s.Seed = nil
	return s
}

// RetryMaxTokens is the max_tokens of the call made again after a
// truncated answer (TruncatedMaxTokens).
func (p Policy) RetryMaxTokens() int {
	if p.TruncatedMaxTokens > 0 {
		return p.TruncatedMaxTokens
	}
	return 2 * p.Sampling.MaxTokens
}

// Validate names each setting that cannot be used.
func (p Policy) Validate() error {
	var errs []error
	if p.TruncatedMaxTokens < 0 || (p.TruncatedMaxTokens > 0 && p.TruncatedMaxTokens <= p.Sampling.MaxTokens) {
		errs = append(errs, fmt.Errorf("--truncated-max-tokens %d: want more than --max-tokens %d (0: twice it)", p.TruncatedMaxTokens, p.Sampling.MaxTokens))
	}
	if p.Votes < 1 || p.Votes > 64 {
		errs = append(errs, fmt.Errorf("--votes %d: want 1..64", p.Votes))
	}
	switch p.Rule {
	case Unanimous, Majority:
		if len(p.Stages) > 0 {
			errs = append(errs, fmt.Errorf("--rule %s with stages %s: stages are their own rule (--stages)", p.Rule, FormatStages(p.Stages)))
		}
	case Staged:
		errs = append(errs, p.validateStages()...)
	default:
		errs = append(errs, fmt.Errorf("--rule %q: want unanimous or majority", p.Rule))
	}
	if len(p.Temperatures) == 0 || len(p.Temperatures) > max(p.Votes, 1) {
		errs = append(errs, fmt.Errorf("--temperature: want 1 to %d values (one per vote), got %d", max(p.Votes, 1), len(p.Temperatures)))
	}
	for _, t := range p.Temperatures {
		if !(t >= 0 && t <= 2) {
			errs = append(errs, fmt.Errorf("--temperature %v: want a value in [0, 2] (0 is greedy)", t))
		}
	}
	if len(p.TopPs) == 0 || len(p.TopPs) > max(p.Votes, 1) {
		errs = append(errs, fmt.Errorf("--top-p: want 1 to %d values (one per vote), got %d", max(p.Votes, 1), len(p.TopPs)))
	}
	for _, t := range p.TopPs {
		if !(t > 0 && t <= 1) {
			errs = append(errs, fmt.Errorf("--top-p %v: want a value in (0, 1]", t))
		}
	}
	s := p.Sampling
	s.Temperature, s.TopP = 1, 1 // checked per vote above
	if err := s.Check(); err != nil {
		errs = append(errs, fmt.Errorf("--%s: %w", flagOf(err), err))
	}
	if p.MaxFrames < 2 {
		errs = append(errs, fmt.Errorf("--max-frames %d: want at least 2 (the first and the final screen)", p.MaxFrames))
	}
	if p.MalformedRetries < 0 || p.MalformedRetries > 10 {
		errs = append(errs, fmt.Errorf("--malformed-retries %d: want 0..10", p.MalformedRetries))
	}
	return errors.Join(errs...)
}

// flagOf names the judge flag of the parameter a traj.Sampling.Check
// error names ("sampling: top_k = ..." → "top-k").
func flagOf(err error) string {
	name, _, _ := strings.Cut(strings.TrimPrefix(err.Error(), "sampling: "), " ")
	name, _, _ = strings.Cut(name, "[")
	return strings.ReplaceAll(name, "_", "-")
}

func at(xs []float64, i int) float64 {
	if len(xs) == 0 {
		return 0
	}
	return xs[min(i, len(xs)-1)]
}

// Temperature is the temperature of vote i.
func (p Policy) Temperature(i int) float64 { return at(p.Temperatures, i) }

// TopP is the top_p of vote i.
func (p Policy) TopP(i int) float64 { return at(p.TopPs, i) }

// LowResVote reports whether vote i is a low-resolution one: the first
// with LowRes set, or one of a low-resolution stage.
func (p Policy) LowResVote(i int) bool {
	if p.Rule == Staged {
		s := p.stageOf(i)
		return s < len(p.Stages) && p.Stages[s].LowRes
	}
	return i == 0 && !p.LowRes.IsZero()
}

// String describes the policy for JudgeVersion.Policy: every setting that
// changes what the judge sees or how votes combine (early exit does not
// change decisions and is left out), e.g.
// "unanimous@4 lowres=640x400 frames=16 temperature=1 top_p=0.6 malformed_retries=2".
func (p Policy) String() string {
	var b strings.Builder
	if p.Rule == Staged {
		fmt.Fprintf(&b, "%s[%s]", p.Rule, FormatStages(p.Stages))
	} else {
		fmt.Fprintf(&b, "%s@%d", p.Rule, p.Votes)
	}
	if !p.LowRes.IsZero() && (p.Rule != Staged || slices.ContainsFunc(p.Stages, func(s Stage) bool { return s.LowRes })) {
		fmt.Fprintf(&b, " lowres=%s", p.LowRes)
	}
	fmt.Fprintf(&b, " frames=%d temperature=%s top_p=%s malformed_retries=%d",
		p.MaxFrames, floats(p.Temperatures), floats(p.TopPs), p.MalformedRetries)
	// The other sampling parameters, when they differ from the defaults
	// (so that the judge version of a default policy stays what it was).
	d, s := DefaultSampling(), p.Sampling
	if s.TopK != d.TopK {
		fmt.Fprintf(&b, " top_k=%d", s.TopK)
	}
	for _, f := range []struct {
		name   string
		v, def float64
	}{{"min_p", s.MinP, d.MinP}, {"repetition_penalty", s.RepetitionPenalty, d.RepetitionPenalty},
		{"presence_penalty", s.PresencePenalty, d.PresencePenalty}, {"frequency_penalty", s.FrequencyPenalty, d.FrequencyPenalty}} {
		if f.v != f.def {
			fmt.Fprintf(&b, " %s=%s", f.name, strconv.FormatFloat(f.v, 'g', -1, 64))
		}
	}
	if s.MaxTokens != d.MaxTokens {
		fmt.Fprintf(&b, " max_tokens=%d", s.MaxTokens)
	}
	if len(s.Stop) > 0 {
		fmt.Fprintf(&b, " stop=%q", s.Stop)
	}
	if p.TruncatedMaxTokens != 0 && p.TruncatedMaxTokens != 2*s.MaxTokens {
		fmt.Fprintf(&b, " truncated_max_tokens=%d", p.TruncatedMaxTokens)
	}
	return b.String()
}

func floats(xs []float64) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.FormatFloat(x, 'g', -1, 64)
	}
	return strings.Join(s, ",")
}

// ParseFloats reads a comma-separated list of numbers.
func ParseFloats(v string) ([]float64, error) {
	var out []float64
	for _, f := range strings.Split(v, ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil || math.IsNaN(x) || math.IsInf(x, 0) {
			return nil, fmt.Errorf("%q: want numbers separated by commas", v)
		}
		out = append(out, x)
	}
	return out, nil
}

// Run is how many votes from vote i on are asked in one call: 1 without
// BatchVotes or for vote 0, else the length of the run of consecutive
// votes from i of the same stage whose calls would go to the same
// endpoint (same(a, b)) with the same sampling settings and resolution.
func (p Policy) Run(i int, same func(a, b int) bool) int {
	if !p.BatchVotes || i == 0 {
		return 1
	}
	n := 1
	for k := i + 1; k < p.Votes; k++ {
		if !same(i, k) || p.Temperature(k) != p.Temperature(i) || p.TopP(k) != p.TopP(i) || p.LowResVote(k) != p.LowResVote(i) ||
			p.stageOf(k) != p.stageOf(i) {
			break
		}
		n++
	}
	return n
}

// Settle is the decision of votes when those before from were already
// cast without settling it: Decide on the shortest prefix (from + 1
// votes or more) that settles it, or on every vote when none does. Votes
// asked together (BatchVotes) thus lead to the decision, and combined
// verdict, that asking them one at a time with early exit would have on
// the same votes.
func (p Policy) Settle(votes []traj.Vote, from int) Outcome {
	for m := from + 1; m < len(votes); m++ {
		if out := p.Decide(votes[:m]); out.Final {
			return out
		}
	}
	return p.Decide(votes)
}

// Walk casts a trajectory's votes under p as the judge does: from vote 0
// on, cast(i, n) casts the n votes from vote i that are asked in one call
// (Run; it returns at least one of them, perhaps fewer), and after each
// call the votes so far are decided (Settle; Decide with NoEarlyExit)
// until the decision is final or every vote is cast. It returns the votes
// cast and their outcome; on an error, the votes cast before it.
func (p Policy) Walk(same func(a, b int) bool, cast func(i, n int) ([]traj.Vote, error)) ([]traj.Vote, Outcome, error) {
	var votes []traj.Vote
	var out Outcome
	for i := 0; i < p.Votes; {
		vs, err := cast(i, p.Run(i, same))
		if err != nil {
			return votes, out, err
		}
		if len(vs) == 0 {
			return votes, out, fmt.Errorf("judge: vote %d: no vote cast", i)
		}
		from := len(votes)
		votes = append(votes, vs...)
		i += len(vs)
		if p.NoEarlyExit {
			out = p.Decide(votes)
		} else if out = p.Settle(votes, from); out.Final {
			break
		}
	}
	return votes, out, nil
}

// Outcome is the decision votes lead to.
type Outcome struct {
	Decision traj.Decision
	Verdict  *traj.Verdict // the combined verdict (nil when Undecided)
	Reason   string        // why, when Undecided
	// Final is true when the votes cast so far settle the decision: the
	// votes left cannot change it (early exit), or none are left.
	Final bool
}

// Decide combines the votes cast so far (in order) under p.
//
// Under Staged, see Stage. Under the voting rules:
// A vote counts as success when its verdict says Correctness, as failure
// when it says not, and as unusable when it has no verdict (the call
// failed or its answer could not be parsed). A failing low-resolution
// vote is a failure at once. Otherwise:
//   - unanimous: one failing vote is a failure; success needs K
//     successful votes; K votes with an unusable one and no failure are
//     undecided;
//   - majority: success when successes > K/2, failure when failures ≥
//     K/2; otherwise, once the votes left cannot reach either, undecided.
//
// The combined verdict of a success has Correctness, the union of the
// successful votes' Redundant steps, the earliest First_Error_Step any of
// them gave (with its Error_Type and Correct_Action), and Optimized only
// if every one of them said so and nothing is redundant — so a success is
// clean only when every successful vote saw it clean. The combined
// verdict of a failure is the failing vote with the earliest
// First_Error_Step (no step counts as after every step; ties go to the
// earlier vote).
func (p Policy) Decide(votes []traj.Vote) Outcome {
	if p.Rule == Staged {
		return p.decideStaged(votes)
	}
	k := p.Votes
	var yes, no, bad []int
	for i, v := range votes {
		switch {
		case v.Verdict == nil:
			bad = append(bad, i)
		case v.Verdict.Correctness:
			yes = append(yes, i)
		default:
			no = append(no, i)
		}
	}
	left := k - len(votes)
	fail := func() Outcome {
		return Outcome{Decision: traj.Failure, Verdict: combineFailure(votes, no), Final: true}
	}
	succeed := func() Outcome {
		v := combineSuccess(votes, yes)
		return Outcome{Decision: v.Decide(), Verdict: v, Final: true}
	}
	undecided := func(final bool) Outcome { return undecidedOutcome(votes, bad, final) }
	if len(votes) > 0 && p.LowResVote(0) && len(no) > 0 && no[0] == 0 {
		return fail()
	}
	switch p.Rule {
	case Majority:
		switch {
		case 2*len(yes) > k:
			return succeed()
		case 2*len(no) >= k:
			return fail()
		case 2*(len(yes)+left) <= k && 2*(len(no)+left) < k:
			return undecided(true)
		}
		return undecided(left <= 0)
	default: // unanimous
		switch {
		case len(no) > 0:
			return fail()
		case len(yes) >= k:
			return succeed()
		}
		return undecided(left <= 0)
	}
}

// undecidedOutcome is the outcome of votes that settle nothing, bad the
// unusable ones.
func undecidedOutcome(votes []traj.Vote, bad []int, final bool) Outcome {
	reason := fmt.Sprintf("%d of %d votes unusable", len(bad), len(votes))
	if len(bad) > 0 {
		reason += ": " + votes[bad[0]].Error
	}
	return Outcome{Decision: traj.Undecided, Reason: reason, Final: final}
}

func combineSuccess(votes []traj.Vote, yes []int) *traj.Verdict {
	out := &traj.Verdict{Correctness: true, Optimized: true, Redundant: []int{}}
	for _, i := range yes {
		v := votes[i].Verdict
		out.Redundant = append(out.Redundant, v.Redundant...)
		out.Optimized = out.Optimized && v.Optimized
		if v.FirstErrorStep != nil && (out.FirstErrorStep == nil || *v.FirstErrorStep < *out.FirstErrorStep) {
			fe := *v.FirstErrorStep
			out.FirstErrorStep, out.ErrorType, out.CorrectAction = &fe, v.ErrorType, v.CorrectAction
		}
	}
	slices.Sort(out.Redundant)
	out.Redundant = slices.Compact(out.Redundant)
	if len(out.Redundant) > 0 {
		out.Optimized = false
	}
	return out
}

func combineFailure(votes []traj.Vote, no []int) *traj.Verdict {
	best := -1
	for _, i := range no {
		fe := votes[i].Verdict.FirstErrorStep
		if best < 0 {
			best = i
			continue
		}
		bfe := votes[best].Verdict.FirstErrorStep
		if fe != nil && (bfe == nil || *fe < *bfe) {
			best = i
		}
	}
	v := *votes[best].Verdict
	v.Redundant = append([]int{}, v.Redundant...)
	if v.FirstErrorStep != nil {
		fe := *v.FirstErrorStep
		v.FirstErrorStep = &fe
	}
	return &v
}
