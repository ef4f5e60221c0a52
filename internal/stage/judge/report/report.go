// Package report is `judge report`: the decisions of the judged archive
// per app, calls per trajectory, latencies, and the judge's precision and
// recall against the task evaluators.
package report

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Config selects the judgements a report covers.
type Config struct {
	Run string // only this run ("" all)
	App string // only this app ("" all)
	// Version is the judge version id to report on; "" takes the version
	// with the latest judgement (the others are listed).
	Version string
}

// Figures are a report's numbers for one app or overall.
type Figures struct {
	Trajectories int `json:"trajectories"`
	// Decisions counts judgements by decision (every decision is a key).
	Decisions map[traj.Decision]int `json:"decisions"`
	// Calls are the model calls behind the judgements;
	// CallsPerTrajectory divides them by the trajectories shown to a
	// model (all but not_judged).
	Calls              int     `json:"calls"`
	CallsPerTrajectory float64 `json:"calls_per_trajectory"`
	// LatencyMS are the mean, median and 95th percentile of the time to
	// judge one trajectory (not_judged ones left out).
	LatencyMS Latency `json:"latency_ms"`
	// Evaluated is the number of decided trajectories (clean, redundant
	// or failure) whose task evaluator gave a result (it ran every
	// check). On them, "clean success" is compared with the evaluator's
	// pass: TP judged clean and passed, FP judged clean and failed, FN
	// judged otherwise and passed, TN the rest. An undecided trajectory is
	// no judgement: it is counted in EvaluatedUndecided (and
	// UndecidedPassed, those the evaluator passed), never as a negative.
	Evaluated          int `json:"evaluated"`
	EvaluatedUndecided int `json:"evaluated_undecided"`
	UndecidedPassed    int `json:"undecided_passed"`
	TP                 int `json:"tp"`
	FP                 int `json:"fp"`
	FN                 int `json:"fn"`
	TN                 int `json:"tn"`
	// Precision, Recall and F1 of clean success against the evaluator;
	// null when undefined (nothing judged clean, nothing passed).
	Precision *float64 `json:"precision"`
	Recall    *float64 `json:"recall"`
	F1        *float64 `json:"f1"`
	// UnusableVotes counts the votes from which no verdict came, by
	// reason (judge.UnusableReason: call_failed, truncated, no_verdict);
	// Undecided the undecided trajectories by the reason of their first
	// unusable vote, with Example one such reason in full.
	UnusableVotes map[string]int `json:"unusable_votes"`
	Undecided     map[string]int `json:"undecided_by_reason"`
	Example       string         `json:"undecided_example,omitempty"`
}

// Latency summarises durations in milliseconds.
type Latency struct {
	Mean float64 `json:"mean"`
	P50  float64 `json:"p50"`
	P95  float64 `json:"p95"`
}

// Report is judge report's result.
type Report struct {
	Run     string             `json:"run,omitempty"`
	App     string             `json:"app,omitempty"`
	Version string             `json:"judge_version"`
	Judge   traj.JudgeVersion  `json:"judge"`
	Overall Figures            `json:"overall"`
	Apps    map[string]Figures `json:"apps"`
	// OtherVersions are judge versions also archived for the selection,
	// with their number of judgements.
	OtherVersions map[string]int `json:"other_versions,omitempty"`
	// Docs are the judged documents of Version the figures are of, in
	// the archive's key order.
	Docs []*traj.Judged `json:"-"`
}

// acc accumulates one Figures.
type acc struct {
	f   Figures
	lat []float64
}

func newAcc() *acc {
	a := &acc{f: Figures{Decisions: map[traj.Decision]int{}, UnusableVotes: map[string]int{}, Undecided: map[string]int{}}}
	for _, d := range traj.Decisions {
		a.f.Decisions[d] = 0
	}
	return a
}

func (a *acc) add(j *traj.Judged) {
	jd := &j.Judgement
	a.f.Trajectories++
	a.f.Decisions[jd.Decision]++
	if jd.Decision == traj.NotJudged {
		return
	}
	a.f.Calls += jd.Calls()
	a.lat = append(a.lat, float64(jd.LatencyMS))
	first := ""
	for _, v := range jd.Votes {
		if v.Verdict == nil {
			r := UnusableReason(v.Error)
			a.f.UnusableVotes[r]++
			if first == "" {
				first = r
			}
		}
	}
	undecided := jd.Decision == traj.Undecided
	if undecided {
		a.f.Undecided[cmp.Or(first, "no_vote")]++
		if a.f.Example == "" {
			a.f.Example = jd.Reason
		}
	}
	e := j.Trajectory.Eval
	if e == nil || len(e.Unsupported) > 0 || e.Error != "" {
		return
	}
	if undecided {
		a.f.EvaluatedUndecided++
		if e.Passed {
			a.f.UndecidedPassed++
		}
		return
	}
	a.f.Evaluated++
	clean := jd.Decision == traj.CleanSuccess
	switch {
	case clean && e.Passed:
		a.f.TP++
	case clean:
		a.f.FP++
	case e.Passed:
		a.f.FN++
	default:
		a.f.TN++
	}
}

// FiguresOf are the figures of docs, judgements of one judge version:
// what Build reports for its selection, for any other grouping (a task,
// say).
func FiguresOf(docs []*traj.Judged) Figures {
	a := newAcc()
	for _, d := range docs {
		a.add(d)
	}
	return a.figures()
}

// Ratio is n/d, nil when d is 0 (a figure with nothing to count).
func Ratio(n, d int) *float64 {
	if d == 0 {
		return nil
	}
	r := float64(n) / float64(d)
	return &r
}

func (a *acc) figures() Figures {
	f := a.f
	if judged := f.Trajectories - f.Decisions[traj.NotJudged]; judged > 0 {
		f.CallsPerTrajectory = float64(f.Calls) / float64(judged)
	}
	f.LatencyMS = LatencyOf(a.lat)
	f.Precision = Ratio(f.TP, f.TP+f.FP)
	f.Recall = Ratio(f.TP, f.TP+f.FN)
	if f.Precision != nil && f.Recall != nil && *f.Precision+*f.Recall > 0 {
		v := 2 * *f.Precision * *f.Recall / (*f.Precision + *f.Recall)
		f.F1 = &v
	} else if f.Precision != nil && f.Recall != nil {
		zero := 0.0
		f.F1 = &zero
	}
	return f
}

// UnusableReason classifies why a vote gave no verdict, from its Error:
// "call_failed" (the model call failed on the last delivery),
// "truncated" (the answer was cut at max_tokens twice), "no_verdict"
// (the answer holds none in the prompt set's format).
func UnusableReason(voteError string) string {
	switch {
	case strings.HasPrefix(voteError, CallFailed):
		return "call_failed"
	case strings.HasPrefix(voteError, Truncated):
		return "truncated"
	}
	return "no_verdict"
}

// CallFailed and Truncated start the Error of a vote whose model call
// failed on the last delivery and of one whose answer was cut at
// max_tokens twice: the judge writes them, UnusableReason reads them.
const (
	CallFailed = "model call failed"
	Truncated  = "truncated"
)

// LatencyOf summarises durations in milliseconds: their mean, median and
// 95th percentile (linear interpolation); zero for none.
func LatencyOf(ms []float64) Latency {
	if len(ms) == 0 {
		return Latency{}
	}
	s := slices.Clone(ms)
	slices.Sort(s)
	sum := 0.0
	for _, x := range s {
		sum += x
	}
	return Latency{Mean: sum / float64(len(s)), P50: quantile(s, 0.5), P95: quantile(s, 0.95)}
}

// quantile of sorted s by linear interpolation.
func quantile(s []float64, q float64) float64 {
	if len(s) == 0 {
		return math.NaN()
	}
	pos := q * float64(len(s)-1)
	lo := int(math.Floor(pos))
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

// Build reads the judged archive in store and reports on the
// selected judgements.
func Build(ctx context.Context, store *blob.Store, cfg Config) (*Report, error) {
	prefix := archive.Prefix
	if cfg.Run != "" {
		prefix += bus.KeyToken(cfg.Run) + "/"
		if cfg.App != "" {
			prefix += bus.KeyToken(cfg.App) + "/"
		}
	}
	type versionSet struct {
		docs   []*traj.Judged
		latest time.Time
	}
	byVersion := map[string]*versionSet{}
	for info, err := range store.Bucket().List(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("judge report: list %s in %s: %w", prefix, store, err)
		}
		if !strings.HasSuffix(info.Key, ".json") {
			continue
		}
		doc, _, err := archive.Read(ctx, store.Bucket(), info.Key)
		if err != nil {
			return nil, fmt.Errorf("judge report: %s: %w", info.Key, err)
		}
		if cfg.App != "" && doc.Judgement.App != cfg.App {
			continue
		}
		if cfg.Run != "" && doc.Judgement.Run != cfg.Run {
			continue
		}
		ver := doc.Judgement.Judge.ID()
		vs := byVersion[ver]
		if vs == nil {
			vs = &versionSet{}
			byVersion[ver] = vs
		}
		vs.docs = append(vs.docs, doc)
		if doc.Judgement.JudgedAt.After(vs.latest) {
			vs.latest = doc.Judgement.JudgedAt
		}
	}
	ver := cfg.Version
	if ver == "" {
		for v, vs := range byVersion {
			if ver == "" || vs.latest.After(byVersion[ver].latest) || (vs.latest.Equal(byVersion[ver].latest) && v < ver) {
				ver = v
			}
		}
	}
	r := &Report{Run: cfg.Run, App: cfg.App, Version: ver, Apps: map[string]Figures{}}
	overall := newAcc()
	apps := map[string]*acc{}
	if vs := byVersion[ver]; vs != nil {
		r.Docs = vs.docs
		for _, d := range vs.docs {
			r.Judge = d.Judgement.Judge
			overall.add(d)
			a := apps[d.Judgement.App]
			if a == nil {
				a = newAcc()
				apps[d.Judgement.App] = a
			}
			a.add(d)
		}
	}
	r.Overall = overall.figures()
	for app, a := range apps {
		r.Apps[app] = a.figures()
	}
	for v, vs := range byVersion {
		if v != ver {
			if r.OtherVersions == nil {
				r.OtherVersions = map[string]int{}
			}
			r.OtherVersions[v] = len(vs.docs)
		}
	}
	return r, nil
}

// WriteJSON writes the report as one JSON document.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// Print writes the report as a table: one row per app and one overall.
func (r *Report) Print(w io.Writer) {
	sel := "all runs"
	if r.Run != "" {
		sel = "run " + traj.PrintName(r.Run)
	}
	if r.App != "" {
		sel += ", app " + traj.PrintName(r.App)
	}
	if r.Version == "" {
		fmt.Fprintf(w, "judge report (%s): no judgements in the archive\n", sel)
		return
	}
	fmt.Fprintf(w, "judge report (%s), judge version %s: %s, models %s\n", sel, r.Version, r.Judge.Policy, strings.Join(r.Judge.Models, ","))
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "app\ttrajectories\tclean\tredundant\tfailure\tundecided\tnot judged\tcalls/traj\tlatency p50/p95 s\tevaluated\tprecision\trecall\tF1\t")
	row := func(name string, f Figures) {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.2f\t%.1f/%.1f\t%d\t%s\t%s\t%s\t\n", name, f.Trajectories,
			f.Decisions[traj.CleanSuccess], f.Decisions[traj.RedundantSuccess], f.Decisions[traj.Failure],
			f.Decisions[traj.Undecided], f.Decisions[traj.NotJudged], f.CallsPerTrajectory,
			f.LatencyMS.P50/1000, f.LatencyMS.P95/1000, f.Evaluated, pct(f.Precision), pct(f.Recall), pct(f.F1))
	}
	names := make([]string, 0, len(r.Apps))
	for a := range r.Apps {
		names = append(names, a)
	}
	sort.Strings(names)
	for _, a := range names {
		row(traj.PrintName(a), r.Apps[a])
	}
	row("overall", r.Overall)
	tw.Flush()
	fmt.Fprintln(w, "precision/recall/F1: the judge's clean success against the task evaluator's pass, on the decided trajectories the evaluator could check.")
	if o := r.Overall; o.Decisions[traj.Undecided] > 0 || len(o.UnusableVotes) > 0 {
		fmt.Fprintf(w, "undecided: %d (%s), %d of them checked by the evaluator (%d passed), left out of precision and recall; unusable votes: %s\n",
			o.Decisions[traj.Undecided], counts(o.Undecided), o.EvaluatedUndecided, o.UndecidedPassed, counts(o.UnusableVotes))
		if o.Example != "" {
			fmt.Fprintf(w, "  e.g. %s\n", o.Example)
		}
	}
	if len(r.OtherVersions) > 0 {
		vs := make([]string, 0, len(r.OtherVersions))
		for v, n := range r.OtherVersions {
			vs = append(vs, fmt.Sprintf("%s (%d)", v, n))
		}
		sort.Strings(vs)
		fmt.Fprintf(w, "other judge versions in the archive: %s (--judge-version ID reports on one)\n", strings.Join(vs, ", "))
	}
}

// counts writes a count per reason, most first: "truncated 3, no_verdict 1".
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if m[keys[i]] != m[keys[j]] {
			return m[keys[i]] > m[keys[j]]
		}
		return keys[i] < keys[j]
	})
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}

func pct(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100**p)
}
