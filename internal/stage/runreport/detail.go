package runreport

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	judgereport "github.com/codapipe/codapipe/internal/stage/judge/report"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// TaskFigures are one task's figures in a run: its samples by the
// rollout summary's rules (ledger.Tally), whether every scored sample
// succeeded (K/K) or none did (0/K) — such a task gives its groups no
// outcome variance —, its groups in the shard sets, and the judge
// against the evaluator on it.
type TaskFigures struct {
	App  string `json:"app"`
	Task string `json:"task"`
	// Episodes, EnvErrors, Unscored, Successes and Rate as in
	// ledger.Scores; Scored = Episodes − EnvErrors − Unscored.
	Episodes  int     `json:"episodes"`
	EnvErrors int     `json:"env_errors"`
	Unscored  int     `json:"unscored"`
	Scored    int     `json:"scored"`
	Successes int     `json:"successes"`
	Rate      float64 `json:"success_rate"`
	// AllSucceeded: at least one scored sample and all of them passed;
	// NoneSucceeded: at least one and none passed.
	AllSucceeded  bool `json:"all_succeeded"`
	NoneSucceeded bool `json:"none_succeeded"`
	// Groups and ZeroVarianceGroups are the task's step groups in the
	// shard sets (0 without shard figures).
	Groups             int `json:"groups"`
	ZeroVarianceGroups int `json:"zero_variance_groups"`
	// Judge is judge report's figures of the task's judgements; nil when
	// none of its trajectories is judged.
	Judge *TaskJudge `json:"judge,omitempty"`
	// Gallery are the ids of the task's trajectories shown in the
	// gallery.
	Gallery []string `json:"gallery,omitempty"`
}

// TaskJudge is the judge on one task: its clean successes and the
// confusion counts against the evaluator (judgereport.FiguresOf).
type TaskJudge struct {
	Judged         int `json:"judged"`
	CleanSuccesses int `json:"clean_successes"`
	TP             int `json:"tp"`
	FP             int `json:"fp"`
	FN             int `json:"fn"`
	TN             int `json:"tn"`
}

// PlannerFigures are the planner's answers of the run: every candidate
// plan of every step, with its completion tokens and finish reason as
// the endpoint reported them.
type PlannerFigures struct {
	Plans int `json:"plans"`
	// CompletionTokens bins the plans' completion token counts;
	// PromptTokens summarises the prompts' (mean, p50, p95), over the
	// plans whose endpoint reported them.
	CompletionTokens Histogram           `json:"completion_tokens"`
	PromptTokens     judgereport.Latency `json:"prompt_tokens"`
	// FinishReasons counts the plans by finish reason ("unknown" when
	// the endpoint gave none); Truncated are those cut at max_tokens
	// ("length"), TruncatedShare their share of Plans.
	FinishReasons  map[string]int `json:"finish_reasons"`
	Truncated      int            `json:"truncated"`
	TruncatedShare float64        `json:"truncated_share"`
}

// Agreement is how the judge's votes agree: per slot (a judge model at
// one screenshot resolution, "model WxH"), its usable votes and the
// share that judged the trajectory correct; per pair of slots, the share
// of pairs of two different usable votes on the same trajectory, one of
// each slot, that agree (the diagonal pairs votes of the same slot); and
// per slot the share of its votes that agree with the trajectory's
// decision (a clean or redundant success against anything else).
type Agreement struct {
	Slots        []string     `json:"slots"`
	Votes        []int        `json:"votes"`
	YesShare     []float64    `json:"yes_share"`
	Pairs        [][]int      `json:"pairs"`
	Agree        [][]*float64 `json:"agree"`
	WithDecision []*float64   `json:"with_decision"`
}

// GalleryPerClass is how many trajectories the gallery shows of each
// class (judge decision, or outcome without a judgement).
const GalleryPerClass = 3

// GalleryEntry is one trajectory of the gallery.
type GalleryEntry struct {
	Class   string           `json:"class"`
	ID      string           `json:"trajectory_id"`
	Run     string           `json:"run"`
	App     string           `json:"app"`
	Task    string           `json:"task"`
	Sample  int              `json:"sample"`
	Outcome traj.OutcomeKind `json:"outcome"`
	// Passed is the evaluator's verdict; nil when it could not score.
	Passed *bool `json:"evaluator_passed"`
	// Decision, Reason, Captions and Votes are the judgement's (its
	// first usable vote's captions); empty without one.
	Decision traj.Decision `json:"decision,omitempty"`
	Reason   string        `json:"reason,omitempty"`
	Captions []string      `json:"captions,omitempty"`
	Votes    []GalleryVote `json:"votes,omitempty"`
	Steps    []GalleryStep `json:"steps"`
}

// GalleryVote is one vote of a gallery trajectory's judgement.
type GalleryVote struct {
	Slot    string `json:"slot"`
	Correct *bool  `json:"correct"` // nil: the vote gave no verdict
	Error   string `json:"error,omitempty"`
}

// GalleryStep is one step of a gallery trajectory: its screenshot (a
// blob key; the page shows it as a thumbnail), the executed plan and
// action, and where the action points, in the screenshot's pixels
// (uitars.Screen.Pixel, the mapping the action was rendered with).
type GalleryStep struct {
	Index  int    `json:"index"`
	Image  string `json:"image"`
	Width  int    `json:"width"`
	Height int    `json:"height"`
	Plan   string `json:"plan"`
	Code   string `json:"code"`
	Action string `json:"action,omitempty"`
	// Points are the action's points: one for a click, two for a drag
	// (start, end); none for other actions.
	Points [][2]int `json:"points,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// maxPlanText bounds a gallery step's plan text.
const maxPlanText = 600

// taskFigures computes the per-task table of trajectories, judgements
// and shard groups.
func taskFigures(trs []*traj.Trajectory, docs []*traj.Judged, groups map[string]*groupFig) []TaskFigures {
	type acc struct {
		app  string
		t    ledger.Tally
		docs []*traj.Judged
	}
	tasks := map[string]*acc{}
	get := func(app, id string) *acc {
		a := tasks[id]
		if a == nil {
			a = &acc{app: app}
			tasks[id] = a
		}
		return a
	}
	for _, t := range trs {
		get(t.Task.App, t.Task.ID).t.Add(t.Task.ID, ledger.RecordOf(t))
	}
	for _, d := range docs {
		a := get(d.Judgement.App, d.Judgement.TaskID)
		a.docs = append(a.docs, d)
	}
	type groupCount struct{ n, zero int }
	byTask := map[string]*groupCount{}
	for _, g := range groups {
		c := byTask[g.task]
		if c == nil {
			c = &groupCount{}
			byTask[g.task] = c
		}
		c.n++
		if g.zero {
			c.zero++
		}
	}
	var out []TaskFigures
	for _, id := range sortedKeys(tasks) {
		a := tasks[id]
		s := a.t.Scores()
		f := TaskFigures{App: a.app, Task: id, Episodes: s.Episodes, EnvErrors: s.EnvErrors, Unscored: s.Unscored,
			Successes: s.Successes, Rate: s.Rate}
		f.Scored = s.Episodes - s.EnvErrors - s.Unscored
		f.AllSucceeded = f.Scored > 0 && f.Successes == f.Scored
		f.NoneSucceeded = f.Scored > 0 && f.Successes == 0
		if len(a.docs) > 0 {
			jf := judgereport.FiguresOf(a.docs)
			f.Judge = &TaskJudge{Judged: jf.Trajectories, CleanSuccesses: jf.Decisions[traj.CleanSuccess], TP: jf.TP, FP: jf.FP, FN: jf.FN, TN: jf.TN}
		}
		if c := byTask[id]; c != nil {
			f.Groups, f.ZeroVarianceGroups = c.n, c.zero
		}
		out = append(out, f)
	}
	slices.SortStableFunc(out, func(a, b TaskFigures) int { return cmp.Compare(a.App, b.App) })
	return out
}

// plannerFigures computes the planner's token and finish-reason figures.
func plannerFigures(trs []*traj.Trajectory) PlannerFigures {
	f := PlannerFigures{FinishReasons: map[string]int{}}
	var prompts []float64
	for _, t := range trs {
		for _, s := range t.Steps {
			for _, c := range s.Candidates {
				f.Plans++
				f.FinishReasons[cmp.Or(c.FinishReason, "unknown")]++
				if c.FinishReason == "length" {
					f.Truncated++
				}
				if c.PlanTokens.Completion > 0 {
					f.CompletionTokens.values = append(f.CompletionTokens.values, float64(c.PlanTokens.Completion))
				}
				if c.PlanTokens.Prompt > 0 {
					prompts = append(prompts, float64(c.PlanTokens.Prompt))
				}
			}
		}
	}
	if f.Plans > 0 {
		f.TruncatedShare = float64(f.Truncated) / float64(f.Plans)
	}
	f.PromptTokens = judgereport.LatencyOf(prompts)
	f.CompletionTokens.bin(HistogramBins)
	return f
}

// VoteSlot is the slot of a vote in the agreement matrix: its model and
// the screenshot size it was shown.
func VoteSlot(v traj.Vote) string { return strings.TrimSpace(v.Model + " " + v.Resolution) }

// agreement computes the judge's vote agreement; nil without a usable
// vote.
func agreement(docs []*traj.Judged) *Agreement {
	slotIdx := map[string]int{}
	for _, d := range docs {
		for _, v := range d.Judgement.Votes {
			if v.Verdict != nil {
				slotIdx[VoteSlot(v)] = 0
			}
		}
	}
	if len(slotIdx) == 0 {
		return nil
	}
	a := &Agreement{Slots: sortedKeys(slotIdx)}
	n := len(a.Slots)
	for i, s := range a.Slots {
		slotIdx[s] = i
	}
	yes := make([]int, n)
	a.Votes = make([]int, n)
	a.Pairs = make([][]int, n)
	agree := make([][]int, n)
	for i := range n {
		a.Pairs[i], agree[i] = make([]int, n), make([]int, n)
	}
	withDec, decVotes := make([]int, n), make([]int, n)
	for _, d := range docs {
		type vote struct {
			slot int
			yes  bool
		}
		var vs []vote
		for _, v := range d.Judgement.Votes {
			if v.Verdict != nil {
				vs = append(vs, vote{slotIdx[VoteSlot(v)], v.Verdict.Correctness})
			}
		}
		success := d.Judgement.Decision == traj.CleanSuccess || d.Judgement.Decision == traj.RedundantSuccess
		decided := d.Judgement.Decision != traj.NotJudged && d.Judgement.Decision != traj.Undecided
		for i, v := range vs {
			a.Votes[v.slot]++
			if v.yes {
				yes[v.slot]++
			}
			if decided {
				decVotes[v.slot]++
				if v.yes == success {
					withDec[v.slot]++
				}
			}
			for _, w := range vs[i+1:] {
				p, q := v.slot, w.slot
				a.Pairs[p][q]++
				if p != q {
					a.Pairs[q][p]++
				}
				if v.yes == w.yes {
					agree[p][q]++
					if p != q {
						agree[q][p]++
					}
				}
			}
		}
	}
	a.YesShare = make([]float64, n)
	a.Agree = make([][]*float64, n)
	a.WithDecision = make([]*float64, n)
	for i := range n {
		if a.Votes[i] > 0 {
			a.YesShare[i] = float64(yes[i]) / float64(a.Votes[i])
		}
		a.Agree[i] = make([]*float64, n)
		for j := range n {
			a.Agree[i][j] = judgereport.Ratio(agree[i][j], a.Pairs[i][j])
		}
		a.WithDecision[i] = judgereport.Ratio(withDec[i], decVotes[i])
	}
	return a
}

// groupFig is one step group of the shard rows.
type groupFig struct {
	task                 string
	zero                 bool
	rewards              []float64
	advMin, advMax       float64
	rows                 int
	rewardMean, rewardSD float64
}

// spread bins the groups' advantage ranges (max − min) and reward
// standard deviations.
func spread(groups map[string]*groupFig) (adv, rewardSD Histogram) {
	for _, id := range sortedKeys(groups) {
		g := groups[id]
		mean := 0.0
		for _, r := range g.rewards {
			mean += r
		}
		mean /= float64(len(g.rewards))
		sd := 0.0
		for _, r := range g.rewards {
			sd += (r - mean) * (r - mean)
		}
		g.rewardMean, g.rewardSD = mean, math.Sqrt(sd/float64(len(g.rewards)))
		adv.values = append(adv.values, g.advMax-g.advMin)
		rewardSD.values = append(rewardSD.values, g.rewardSD)
	}
	adv.bin(HistogramBins)
	rewardSD.bin(HistogramBins)
	return adv, rewardSD
}

// galleryClass is the gallery class of a trajectory: its judge decision,
// or "unjudged <outcome>" without a judgement.
func galleryClass(t *traj.Trajectory, j *traj.Judgement) string {
	if j != nil {
		return string(j.Decision)
	}
	return "unjudged " + string(t.Outcome.Kind)
}

// galleryClasses orders the classes: the judge's decisions first.
func galleryClasses(classes map[string][]*traj.Trajectory) []string {
	var out []string
	for _, d := range traj.Decisions {
		if _, ok := classes[string(d)]; ok {
			out = append(out, string(d))
		}
	}
	for _, c := range sortedKeys(classes) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	return out
}

// gallery picks GalleryPerClass trajectories of each class, the first by
// trajectory id (ids are random, so this is an even draw that is the
// same on every build of the report).
func gallery(trs []*traj.Trajectory, judgements map[string]*traj.Judgement) []GalleryEntry {
	classes := map[string][]*traj.Trajectory{}
	for _, t := range trs {
		c := galleryClass(t, judgements[t.ID])
		classes[c] = append(classes[c], t)
	}
	var out []GalleryEntry
	for _, c := range galleryClasses(classes) {
		ts := classes[c]
		slices.SortFunc(ts, func(a, b *traj.Trajectory) int { return cmp.Compare(a.ID, b.ID) })
		for _, t := range ts[:min(len(ts), GalleryPerClass)] {
			out = append(out, galleryEntry(c, t, judgements[t.ID]))
		}
	}
	return out
}

func galleryEntry(class string, t *traj.Trajectory, j *traj.Judgement) GalleryEntry {
	e := GalleryEntry{Class: class, ID: t.ID, Run: t.Run, App: t.Task.App, Task: t.Task.ID, Sample: t.Sample, Outcome: t.Outcome.Kind, Steps: []GalleryStep{}}
	if ev := t.Eval; ev != nil && ev.Error == "" && len(ev.Unsupported) == 0 {
		p := ev.Passed
		e.Passed = &p
	}
	if j != nil {
		e.Decision, e.Reason = j.Decision, j.Reason
		for _, v := range j.Votes {
			gv := GalleryVote{Slot: VoteSlot(v), Error: v.Error}
			if v.Verdict != nil {
				c := v.Verdict.Correctness
				gv.Correct = &c
				if e.Captions == nil {
					e.Captions = v.Captions
				}
			}
			e.Votes = append(e.Votes, gv)
		}
	}
	for _, s := range t.Steps {
		gs := GalleryStep{Index: s.Index, Image: s.Screenshot.SHA256, Width: s.Screenshot.Width, Height: s.Screenshot.Height,
			Code: s.Code, Error: s.Error}
		if s.Executed >= 0 && s.Executed < len(s.Candidates) {
			c := s.Candidates[s.Executed]
			gs.Plan = clip(c.Plan, maxPlanText)
			if a := c.Action; a != nil {
				gs.Action = string(a.Type)
				screen := uitars.Screen{W: s.Screenshot.Width, H: s.Screenshot.Height}
				for _, p := range []*traj.Point{a.Point, a.Start, a.End} {
					if p != nil && !math.IsNaN(p.X) && !math.IsNaN(p.Y) && !math.IsInf(p.X, 0) && !math.IsInf(p.Y, 0) {
						x, y := screen.Pixel(*p)
						gs.Points = append(gs.Points, [2]int{x, y})
					}
				}
			}
		}
		e.Steps = append(e.Steps, gs)
	}
	return e
}

// clip cuts s to at most n runes, marking the cut.
func clip(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + fmt.Sprintf("… (%d more characters)", len(r)-n)
}
