package judge

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/pkg/traj"
)

// Staged is the rule of a policy made of stages (Policy.Stages): each
// stage's votes must reach its Need for the trajectory to go on, the
// first stage that cannot is a failure, and passing every stage is a
// success.
const Staged Rule = "staged"

// Stage is one step of a staged policy: Votes votes of the judge model
// Model (an index into the endpoints, 0 the first --judge), of which at
// least Need must say success. A stage that gets more than Votes−Need
// failing votes fails the trajectory at once; later stages are asked
// only when every stage before passed (or could not decide: an unusable
// vote). LowRes makes its votes low-resolution ones (Policy.LowRes).
// Every vote of a stage is cast unless the trajectory fails in it; with
// Policy.BatchVotes a stage is one call.
type Stage struct {
	Model  int
	Votes  int
	Need   int
	LowRes bool
}

// String is the stage's form in --stages: [NEED/]VOTES[@MODEL][:low],
// MODEL counted from 1, NEED left out when every vote must say success.
func (s Stage) String() string {
	var b strings.Builder
	if s.Need != s.Votes {
		fmt.Fprintf(&b, "%d/", s.Need)
	}
	b.WriteString(strconv.Itoa(s.Votes))
	if s.Model != 0 {
		fmt.Fprintf(&b, "@%d", s.Model+1)
	}
	if s.LowRes {
		b.WriteString(":low")
	}
	return b.String()
}

// DefaultStages is the staged policy codapipe judges with by default for
// the given number of judge models (docs/judge.md, "The voting policy"). With two
// or more: one full-resolution vote of the first model (most failures end
// there, after one call), both of 2 votes of the second model, one
// low-resolution vote of the first, then 2 of 4 more of its votes
// ("1,2@2,1:low,2/4"). With one: that vote, the low-resolution one, then
// 3 of 4 more ("1,1:low,3/4"). On the simulator's judge calibrated to
// CODA's Table 2, at ScienceBoard's success rate: precision 0.77 and
// recall 0.76 at 1.67 calls per trajectory with two models, where CODA's
// voting@4 ensemble has 0.70 and 0.74 at 4 calls (1.68 with early exit);
// 0.67 and 0.79 at 1.53 calls with one, where CODA's voting@4 has 0.59 and
// 0.75 at 1.70 (docs/performance.md, "Judge policies").
func DefaultStages(models int) []Stage {
	if models >= 2 {
		return []Stage{{Votes: 1, Need: 1}, {Model: 1, Votes: 2, Need: 2}, {Votes: 1, Need: 1, LowRes: true}, {Votes: 4, Need: 2}}
	}
	return []Stage{{Votes: 1, Need: 1}, {Votes: 1, Need: 1, LowRes: true}, {Votes: 4, Need: 3}}
}

// DefaultLowRes is the low-resolution size of the default policy's
// low-resolution vote.
var DefaultLowRes = Size{640, 400}

// FormatStages is the --stages form of stages.
func FormatStages(stages []Stage) string {
	s := make([]string, len(stages))
	for i, st := range stages {
		s[i] = st.String()
	}
	return strings.Join(s, ",")
}

// ParseStages reads --stages: comma-separated stages
// [NEED/]VOTES[@MODEL][:low], e.g. "1,1:low,2/4,2@2".
func ParseStages(v string) ([]Stage, error) {
	var out []Stage
	for i, f := range strings.Split(v, ",") {
		f = strings.TrimSpace(f)
		bad := func(why string) error {
			return fmt.Errorf("stage %d %q: %s (want [NEED/]VOTES[@MODEL][:low], e.g. 2/4@1)", i+1, f, why)
		}
		st := Stage{}
		if rest, ok := strings.CutSuffix(f, ":low"); ok {
			st.LowRes, f = true, rest
		}
		if a, m, ok := strings.Cut(f, "@"); ok {
			n, err := strconv.Atoi(m)
			if err != nil || n < 1 || n > 16 {
				return nil, bad("MODEL is the number of a --judge endpoint, from 1")
			}
			st.Model, f = n-1, a
		}
		need, votes, ok := strings.Cut(f, "/")
		if !ok {
			votes, need = need, ""
		}
		n, err := strconv.Atoi(votes)
		if err != nil || n < 1 || n > 64 {
			return nil, bad("VOTES is a whole number from 1 to 64")
		}
		st.Votes, st.Need = n, n
		if ok {
			k, err := strconv.Atoi(need)
			if err != nil || k < 1 || k > n {
				return nil, bad("NEED is a whole number from 1 to VOTES")
			}
			st.Need = k
		}
		out = append(out, st)
	}
	if total := sumVotes(out); total > 64 {
		return nil, fmt.Errorf("stages %q: %d votes in all, want at most 64", v, total)
	}
	return out, nil
}

func sumVotes(stages []Stage) int {
	n := 0
	for _, s := range stages {
		n += s.Votes
	}
	return n
}

// StagedPolicy is the default policy's settings (sampling, frames,
// re-asks, votes asked together) with the given stages; a low-resolution
// stage uses DefaultLowRes.
func StagedPolicy(stages []Stage) Policy {
	p := CODAPolicy()
	p = p.WithStages(stages)
	p.BatchVotes = true
	if slices.ContainsFunc(stages, func(s Stage) bool { return s.LowRes }) {
		p.LowRes = DefaultLowRes
	}
	return p
}

// CheckModels reports a stage that asks a judge model beyond the n
// configured.
func (p Policy) CheckModels(n int) error {
	for i, st := range p.Stages {
		if p.Rule == Staged && st.Model >= n {
			return fmt.Errorf("--stages: stage %d %s asks judge model %d, but %d --judge endpoint(s) are configured", i+1, st, st.Model+1, n)
		}
	}
	return nil
}

// WithStages is p made a Staged policy of stages, its Votes their sum.
func (p Policy) WithStages(stages []Stage) Policy {
	p.Rule, p.Stages, p.Votes = Staged, stages, sumVotes(stages)
	return p
}

// stageOf is the index of the stage vote i belongs to (len(Stages) past
// the last).
func (p Policy) stageOf(i int) int {
	for s, st := range p.Stages {
		if i < st.Votes {
			return s
		}
		i -= st.Votes
	}
	return len(p.Stages)
}

// ModelOf is the index of the endpoint of vote i among n: its stage's
// model, or i mod n (round-robin) for a policy without stages.
func (p Policy) ModelOf(i, n int) int {
	if p.Rule == Staged {
		if s := p.stageOf(i); s < len(p.Stages) {
			return p.Stages[s].Model
		}
	}
	return i % n
}

func (p Policy) validateStages() []error {
	var errs []error
	if len(p.Stages) == 0 {
		return []error{fmt.Errorf("--stages: no stage")}
	}
	total := 0
	for i, s := range p.Stages {
		if s.Votes < 1 || s.Need < 1 || s.Need > s.Votes || s.Model < 0 {
			errs = append(errs, fmt.Errorf("--stages: stage %d %s: want 1 ≤ NEED ≤ VOTES and a model from 1", i+1, s))
		}
		if s.LowRes && p.LowRes.IsZero() {
			errs = append(errs, fmt.Errorf("--stages: stage %d %s is low-resolution but --lowres is off", i+1, s))
		}
		total += s.Votes
	}
	if total != p.Votes {
		errs = append(errs, fmt.Errorf("--stages %s: %d votes in all, but the policy counts %d", FormatStages(p.Stages), total, p.Votes))
	}
	return errs
}

// decideStaged is Decide under Staged.
func (p Policy) decideStaged(votes []traj.Vote) Outcome {
	if len(p.Stages) == 0 { // Validate refuses it; nothing can pass
		return Outcome{Decision: traj.Undecided, Reason: "no stage", Final: true}
	}
	var yes, no, bad []int
	undecided := false
	i := 0
	for _, st := range p.Stages {
		end := min(i+st.Votes, len(votes))
		y, n := 0, 0
		for k := i; k < end; k++ {
			switch v := votes[k]; {
			case v.Verdict == nil:
				bad = append(bad, k)
			case v.Verdict.Correctness:
				yes = append(yes, k)
				y++
			default:
				no = append(no, k)
				n++
			}
		}
		switch {
		case n > st.Votes-st.Need:
			return Outcome{Decision: traj.Failure, Verdict: combineFailure(votes, no), Final: true}
		case end-i < st.Votes: // the stage is still open
			return undecidedOutcome(votes, bad, false)
		case y < st.Need: // unusable votes: it cannot pass, a later stage may still fail
			undecided = true
		}
		i += st.Votes
	}
	if undecided {
		return undecidedOutcome(votes, bad, true)
	}
	v := combineSuccess(votes, yes)
	return Outcome{Decision: v.Decide(), Verdict: v, Final: true}
}
