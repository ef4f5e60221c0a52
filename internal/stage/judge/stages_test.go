package judge

import (
	"bytes"
	"context"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

func TestParseStages(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []Stage
		err  string
	}{
		{"1", []Stage{{Votes: 1, Need: 1}}, ""},
		{"1,2@2,1:low,2/4", []Stage{{Votes: 1, Need: 1}, {Model: 1, Votes: 2, Need: 2}, {Votes: 1, Need: 1, LowRes: true}, {Votes: 4, Need: 2}}, ""},
		{" 3/5@1:low ", []Stage{{Votes: 5, Need: 3, LowRes: true}}, ""},
		{"", nil, `stage 1 ""`},
		{"0", nil, "VOTES is a whole number from 1 to 64"},
		{"5/4", nil, "NEED is a whole number from 1 to VOTES"},
		{"0/4", nil, "NEED is a whole number from 1 to VOTES"},
		{"2@0", nil, "MODEL is the number of a --judge endpoint, from 1"},
		{"1,2@x", nil, `stage 2 "2@x"`},
		{"1:high", nil, "VOTES is a whole number"},
		{"65", nil, "from 1 to 64"},
	} {
		got, err := ParseStages(c.in)
		switch {
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("ParseStages(%q) = %v, %v; want an error with %q", c.in, got, err, c.err)
		case c.err == "" && (err != nil || !reflect.DeepEqual(got, c.want)):
			t.Errorf("ParseStages(%q) = %+v, %v; want %+v", c.in, got, err, c.want)
		case c.err == "" && FormatStages(got) != strings.ReplaceAll(strings.ReplaceAll(strings.TrimSpace(c.in), "@1", ""), " ", ""):
			t.Errorf("FormatStages(ParseStages(%q)) = %q", c.in, FormatStages(got))
		}
	}
}

func TestDecideStaged(t *testing.T) {
	// 1, 2@2, 1:low, 2/4: votes 0 | 1 2 | 3 | 4 5 6 7.
	pol := DefaultPolicy(2)
	Y, N, B := vY, vN, vB
	cases := []struct {
		name  string
		votes []traj.Vote
		want  traj.Decision
		final bool
	}{
		{"the first vote fails: final after one", []traj.Vote{N}, traj.Failure, true},
		{"the first vote passes: open", []traj.Vote{Y}, traj.Undecided, false},
		{"the second model's stage is open", []traj.Vote{Y, Y}, traj.Undecided, false},
		{"one of the second model's votes fails (2 of 2)", []traj.Vote{Y, Y, N}, traj.Failure, true},
		{"the low-resolution vote fails", []traj.Vote{Y, Y, Y, N}, traj.Failure, true},
		{"2 of 4: two no are still open", []traj.Vote{Y, Y, Y, Y, N, N}, traj.Undecided, false},
		{"2 of 4: three no fail", []traj.Vote{Y, Y, Y, Y, N, N, N}, traj.Failure, true},
		{"2 of 4: two yes pass, but the stage's votes are all cast", []traj.Vote{Y, Y, Y, Y, Y, Y}, traj.Undecided, false},
		{"every stage passes", []traj.Vote{Y, Y, Y, Y, Y, N, Y, N}, traj.CleanSuccess, true},
		{"an unusable vote in a stage: later stages still fail it", []traj.Vote{Y, B, Y, N}, traj.Failure, true},
		{"an unusable vote and no failure: undecided at the end", []traj.Vote{Y, B, Y, Y, Y, Y, Y, Y}, traj.Undecided, true},
		{"2 of 4 with two unusable and two yes passes", []traj.Vote{Y, Y, Y, Y, B, Y, B, Y}, traj.CleanSuccess, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := pol.Decide(c.votes)
			if out.Decision != c.want || out.Final != c.final {
				t.Fatalf("decision %s final %v, want %s final %v (%+v)", out.Decision, out.Final, c.want, c.final, out)
			}
		})
	}
}

// Asking each stage's votes in one call leads to the decision one at a
// time with early exit would, on every sequence of votes.
func TestSettleSameVotesSameDecisionStaged(t *testing.T) {
	kinds := []traj.Vote{vY, vN, vB}
	for _, stages := range []string{"1,2@2,1:low,2/4", "1,1:low,3/4", "2/3,2"} {
		st, err := ParseStages(stages)
		if err != nil {
			t.Fatal(err)
		}
		pol := StagedPolicy(st)
		same := func(a, b int) bool { return pol.ModelOf(a, 2) == pol.ModelOf(b, 2) }
		n := pol.Votes
		total := 1
		for range n {
			total *= len(kinds)
		}
		for code := range total {
			votes := make([]traj.Vote, n)
			for i, c := 0, code; i < n; i, c = i+1, c/len(kinds) {
				votes[i] = kinds[c%len(kinds)]
			}
			var seq Outcome
			for cast := 1; cast <= n; cast++ {
				if seq = pol.Decide(votes[:cast]); seq.Final {
					break
				}
			}
			cast := 0
			_, bat, err := pol.Walk(same, func(i, k int) ([]traj.Vote, error) {
				if i != cast {
					t.Fatalf("%s: asked for vote %d after %d cast", stages, i, cast)
				}
				if k > 1 && pol.stageOf(i) != pol.stageOf(i+k-1) {
					t.Fatalf("%s: one call spans stages from vote %d (%d votes)", stages, i, k)
				}
				cast += k
				return votes[i : i+k], nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(seq, bat) {
				t.Fatalf("%s, votes %d: one at a time %+v, in calls %+v", stages, code, seq, bat)
			}
		}
	}
}

func TestStagedPolicyModelsRunsAndString(t *testing.T) {
	pol := DefaultPolicy(2)
	models := make([]int, pol.Votes)
	low := make([]bool, pol.Votes)
	for i := range models {
		models[i], low[i] = pol.ModelOf(i, 2), pol.LowResVote(i)
	}
	if want := []int{0, 1, 1, 0, 0, 0, 0, 0}; !reflect.DeepEqual(models, want) {
		t.Errorf("models %v, want %v", models, want)
	}
	if want := []bool{false, false, false, true, false, false, false, false}; !reflect.DeepEqual(low, want) {
		t.Errorf("low resolution %v, want %v", low, want)
	}
	same := func(a, b int) bool { return pol.ModelOf(a, 2) == pol.ModelOf(b, 2) }
	runs := []int{}
	for i := 0; i < pol.Votes; i += runs[len(runs)-1] {
		runs = append(runs, pol.Run(i, same))
	}
	if want := []int{1, 2, 1, 4}; !reflect.DeepEqual(runs, want) {
		t.Errorf("calls of %v votes, want %v", runs, want)
	}
	if got, want := pol.String(), "staged[1,2@2,1:low,2/4] lowres=640x400 frames=16 temperature=1 top_p=0.6 malformed_retries=2"; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if err := pol.Validate(); err != nil {
		t.Error(err)
	}
	mixed := CODAPolicy()
	mixed.Stages = pol.Stages
	if err := mixed.Validate(); err == nil || !strings.Contains(err.Error(), "stages are their own rule") {
		t.Errorf("Validate of stages under a voting rule: %v", err)
	}
	bad := pol
	bad.LowRes = Size{}
	bad.Votes = 9
	err := bad.Validate()
	if err == nil || !strings.Contains(err.Error(), "low-resolution but --lowres is off") || !strings.Contains(err.Error(), "8 votes in all, but the policy counts 9") {
		t.Errorf("Validate of a broken staged policy: %v", err)
	}
	_, err = New(Config{Endpoints: []EndpointSpec{{URL: "http://127.0.0.1:1/v1", Model: "a"}}, Policy: pol, Store: nil})
	if err == nil || !strings.Contains(err.Error(), "judge model 2, but 1 --judge endpoint") {
		t.Errorf("New with one endpoint for a two-model policy: %v", err)
	}
}

// The command's --stages, --votes and --rule: the default stages unless
// a voting rule is asked for; both at once is a usage error. The policy
// is the one the judge logs when it starts (here on an empty stream).
func TestCommandStagesFlags(t *testing.T) {
	cases := []struct {
		args []string
		err  string // a usage error's
		pol  string // the logged policy's start
	}{
		{nil, "", "staged[1,2@2,1:low,2/4] lowres=640x400"},
		{[]string{"--stages", "1,3/4", "--sim-config", ""}, "", "staged[1,3/4] frames"},
		{[]string{"--votes", "4", "--rule", "majority"}, "", "majority@4 frames"},
		{[]string{"--stages", "none", "--lowres", "320x200"}, "", "unanimous@4 lowres=320x200"},
		{[]string{"--stages", "1,2", "--votes", "3"}, "--votes and --rule are for --stages none", ""},
		{[]string{"--stages", "1,2/x"}, "--stages: stage 2", ""},
		{[]string{"--stages", "1,3@3"}, "asks judge model 3, but 2 --judge endpoint(s)", ""},
		{[]string{"--rule", "staged"}, "--rule staged: want unanimous or majority", ""},
	}
	cmd := Command() // one command, run again and again, as a test binary does
	for _, c := range cases {
		t.Run(strings.Join(c.args, " "), func(t *testing.T) {
			var out, errb bytes.Buffer
			args := append([]string{"--data", t.TempDir(), "--drain", "--sim", "--log-level", "info"}, c.args...)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			code := service.MainContext(ctx, cmd, args, &out, &errb)
			if c.err != "" {
				if code != 2 || !strings.Contains(errb.String(), c.err) {
					t.Fatalf("exit %d, stderr %s; want a usage error with %q", code, errb.String(), c.err)
				}
				return
			}
			if code != 0 || !strings.Contains(errb.String(), `"policy":"`+c.pol) {
				t.Fatalf("exit %d; want the policy %q logged:\n%s", code, c.pol, errb.String())
			}
		})
	}
}

// FuzzParseStages: --stages never panics the parser; an accepted value
// is stages a policy can hold (1 ≤ NEED ≤ VOTES ≤ 64, a model from 0),
// and its form parses back to the same stages.
func FuzzParseStages(f *testing.F) {
	for _, s := range []string{"1,2@2,1:low,2/4", "1,1:low,3/4", "none", "2/3@16:low", "1,,2", "0/0", "3/2", "1@", ":low", "99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		st, err := ParseStages(v)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "stage") {
				t.Fatalf("error %q does not name the stage", err)
			}
			return
		}
		for _, s := range st {
			if s.Votes < 1 || s.Votes > 64 || s.Need < 1 || s.Need > s.Votes || s.Model < 0 || s.Model > 15 {
				t.Fatalf("%q: stage %+v", v, s)
			}
		}
		back, err := ParseStages(FormatStages(st))
		if err != nil || !reflect.DeepEqual(back, st) {
			t.Fatalf("%q: %s parses back to %+v, %v", v, FormatStages(st), back, err)
		}
		if p := StagedPolicy(st); p.Validate() != nil {
			t.Fatalf("%q: the policy of accepted stages is invalid: %v", v, p.Validate())
		}
	})
}
