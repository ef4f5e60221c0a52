package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/stage/judge/report"
	"github.com/codapipe/codapipe/pkg/traj"
)

// replayed is one recorded judge answer for the trajectory of one task
// and the decision it must give: "" for an unusable vote (the trajectory
// is undecided, with why).
type replayed struct {
	answer string
	want   traj.Decision
	reason string // the unusable vote's reason (report.UnusableReason)
}

// Issue 37, acceptance 1 and 2: answers in each shipped prompt set's format
// and in the variants real models write (markdown, quotes, trailing prose,
// fences, think blocks, answers cut at max_tokens) are replayed by an
// OpenAI-compatible endpoint (the simulator's judge with recorded answers)
// to `judge --drain --prompts NAME`. Every verdict is read as written; an
// answer without one, or cut twice, is an unusable vote, never a guess;
// the judge's summary and `judge report --json` count the unusable votes
// by reason, and undecided trajectories are never true negatives.
func TestAcceptAnswerFormats(t *testing.T) {
	c := sharedCorpus(t)
	// One trajectory per task: the replayed answer is chosen by the task's
	// instruction in the request.
	var trajs []*traj.Trajectory
	seen := map[string]bool{}
	for _, tr := range c.trajs {
		if !tr.Outcome.IsEnvError() && tr.FinalScreenshot != nil && !seen[tr.Task.Instruction] {
			seen[tr.Task.Instruction] = true
			trajs = append(trajs, tr)
		}
	}
	long := strings.Repeat("The final screen shows the requested state. ", 6)
	sets := map[string][]replayed{
		"keypoints": {
			{"Key points:\n1. open the structure\nStatus: success", traj.CleanSuccess, ""},
			{"**Status:** \"failure\" — the colour was not changed.", traj.Failure, ""},
			{"<think>Status: success</think>\nOnly the menu is open.\nStatus: failure", traj.Failure, ""},
			{"Status: “success”. Every key point is met.", traj.CleanSuccess, ""},
			{"The agent tried its best.", "", "no_verdict"},
			{long + "\nStatus: success", traj.CleanSuccess, ""}, // cut once, whole with --truncated-max-tokens
			{long + long + long + "\nStatus: success", "", "truncated"},
		},
		"yesno": {
			{"The value is set as asked.\nYes", traj.CleanSuccess, ""},
			{"Nothing changed on the screen.\n\n**No**", traj.Failure, ""},
			{"No, the file was never saved.", traj.Failure, ""},
			{"<think>\nyes\n</think>\nThe plot is missing.\nNo", traj.Failure, ""},
			{"Perhaps.", "", "no_verdict"},
		},
		"score": {
			{"Done well.\n```json\n{\"reason\": \"exact\", \"score\": 5}\n```", traj.CleanSuccess, ""},
			{"```json\n{\"reason\": \"only the first step\", \"score\": 2}\n```", traj.Failure, ""},
			{`{"reason": "close", "score": "4/5"}`, traj.CleanSuccess, ""},
			{`{"reason": "way off", "score": 11}`, "", "no_verdict"},
		},
		"coda": {
			{"Frame 1: the window.\n<res_dict>{'Correctness': True, 'Redundant': [], 'First_Error_Step': None}</res_dict>", traj.CleanSuccess, ""},
			{"<think>{'Correctness': True}</think>\n<res_dict>{\"Correctness\": false, \"First_Error_Step\": 1}</res_dict>", traj.Failure, ""},
			{"Correct, I think.", "", "no_verdict"},
		},
	}
	for name, answers := range sets {
		t.Run(name, func(t *testing.T) {
			if len(trajs) < len(answers) {
				t.Fatalf("%d tasks in the corpus for %d answers", len(trajs), len(answers))
			}
			var replay []simmodels.Replay
			for i, a := range answers {
				replay = append(replay, simmodels.Replay{Match: trajs[i].Task.Instruction, Answer: a.answer})
			}
			_, ep := startSimJudge(t, 1, func(mc *simmodels.Config) { mc.Judge.Replay = replay })
			env, b := drainEnv(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			run := "formats-" + traj.NewID()
			var raw []*traj.Trajectory
			for i := range answers {
				raw = append(raw, republish(t, b, trajs[i:i+1], run, 1)...)
			}
			pol := CODAPolicy()
			pol.MaxFrames, pol.Votes = 2, 1
			// Cut at 60 tokens (the sim's tokens are 4 bytes): the long answer
			// fits in the second call's 120, the longer one does not.
			pol.Sampling.MaxTokens = 60
			st, err := Execute(ctx, env, Options{Judges: []string{ep.URL + "=" + ep.Model}, Prompts: name, Policy: pol, Workers: 2})
			if err != nil {
				t.Fatal(err)
			}
			docs, _ := judgedOn(t, b)
			byID := map[string]*traj.Judged{}
			for _, d := range docs {
				byID[d.Trajectory.ID] = d
			}
			wantUnusable := map[string]int{}
			for i, a := range answers {
				d := byID[raw[i].ID]
				if d == nil {
					t.Fatalf("answer %d: no judgement", i)
				}
				want := a.want
				if want == "" {
					want = traj.Undecided
					wantUnusable[a.reason]++
				}
				if d.Judgement.Decision != want {
					t.Errorf("answer %d %q: decision %s (%s), want %s", i, clipTest(a.answer), d.Judgement.Decision, d.Judgement.Reason, want)
				}
				if a.reason != "" {
					if v := d.Judgement.Votes[len(d.Judgement.Votes)-1]; report.UnusableReason(v.Error) != a.reason {
						t.Errorf("answer %d: vote error %q, want reason %s", i, v.Error, a.reason)
					}
				}
			}
			if fmt.Sprint(st.Unusable) != fmt.Sprint(wantUnusable) && len(wantUnusable) > 0 {
				t.Errorf("summary's unusable votes %v, want %v", st.Unusable, wantUnusable)
			}
			if len(wantUnusable) > 0 && (st.Example == "" || st.Undecided == nil) {
				t.Errorf("summary names no undecided reason: %+v", st)
			}
		})
	}
}

// Issue 37, acceptance 2: when no vote is usable the report separates the
// undecided trajectories: they are in evaluated_undecided with their
// reason, never true negatives, and precision and recall are undefined
// rather than 0.
func TestAcceptReportAllUnusable(t *testing.T) {
	c := sharedCorpus(t)
	_, ep := startSimJudge(t, 1, func(mc *simmodels.Config) {
		mc.Judge.Replay = []simmodels.Replay{{Match: "", Answer: "I cannot tell from these screenshots."}}
	})
	env, b := drainEnv(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	run := "unusable-" + traj.NewID()
	raw := republish(t, b, c.trajs, run, 8)
	pol := CODAPolicy()
	pol.MaxFrames, pol.Votes, pol.MalformedRetries = 2, 1, 0
	st, err := Execute(ctx, env, Options{Judges: []string{ep.URL + "=" + ep.Model}, Prompts: "keypoints", Policy: pol, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	if st.Decisions[traj.Undecided] != len(raw) || st.Unusable["no_verdict"] != len(raw) {
		t.Fatalf("summary %+v: want %d undecided, all no_verdict", st, len(raw))
	}
	store, err := env.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := report.Build(ctx, store, report.Config{Run: run})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	var got struct {
		Overall struct {
			TN, Evaluated      int
			EvaluatedUndecided int `json:"evaluated_undecided"`
			Precision, Recall  *float64
			UnusableVotes      map[string]int `json:"unusable_votes"`
			Undecided          map[string]int `json:"undecided_by_reason"`
		} `json:"overall"`
	}
	if err := json.Unmarshal(js.Bytes(), &got); err != nil {
		t.Fatal(err)
	}
	o := got.Overall
	if o.TN != 0 || o.Evaluated != 0 || o.Precision != nil || o.Recall != nil {
		t.Errorf("report with every vote unusable: TN %d, evaluated %d, precision %v, recall %v; want 0, 0, null, null", o.TN, o.Evaluated, o.Precision, o.Recall)
	}
	if o.EvaluatedUndecided == 0 || o.UnusableVotes["no_verdict"] != len(raw) || o.Undecided["no_verdict"] != len(raw) {
		t.Errorf("report: evaluated_undecided %d, unusable %v, undecided %v; want the %d trajectories there", o.EvaluatedUndecided, o.UnusableVotes, o.Undecided, len(raw))
	}
	var text bytes.Buffer
	rep.Print(&text)
	if !strings.Contains(text.String(), "left out of precision and recall") || !strings.Contains(text.String(), "no_verdict") {
		t.Errorf("the printed report does not say why trajectories are undecided:\n%s", text.String())
	}
}

func clipTest(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
