// Package runreport is `rollout report`: the figures of one rollout run —
// success by app with Average@K and Pass@K, steps, outcomes, VM use over
// time, plan variety, per-stage latency, the judge's decisions and its
// precision and recall, and the reward and advantage distributions of the
// run's shard rows — read from the trajectories stream, the run ledger, the
// judged archive and the shard sets, as JSON or as one self-contained HTML
// page with plots.
//
// It computes nothing a stage already defines: the outcome figures are
// ledger.Tally's (the rollout summary's), plan variety is
// ledger.PlanVarietyOf's, and the judge figures are internal/stage/judge/report's.
package runreport

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/redact"
	judgereport "github.com/codapipe/codapipe/internal/stage/judge/report"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Sources are where a report reads from.
type Sources struct {
	Bus      *bus.Bus
	Topology bus.Topology
	Store    *blob.Store
	// ShardsDir is where advantage writes shard sets: a local folder or a
	// bucket URL (s3://…), holding sets (each a folder or prefix with a
	// manifest.json, at any depth); empty or a missing folder: no shard
	// figures.
	ShardsDir string
	// SFTDir is a local folder of SFT sets (sftpack --out folders, at any
	// depth); empty or missing: no SFT figures.
	SFTDir string
}

// Config selects the run and its comparison.
type Config struct {
	Run      string // the run to report on (rollout --run)
	Baseline string // an earlier run to compare with ("" none)
	App      string // only this application's trajectories ("" all)
}

// Report is the figures of one run. Shares and rates are fractions in
// [0, 1]; latencies are in milliseconds.
type Report struct {
	Run string `json:"run"`
	// Apps are the run's applications; Checkpoints the planner checkpoints
	// its trajectories recorded (one for a well-formed run).
	Apps        []string `json:"apps"`
	Checkpoints []string `json:"planner_checkpoints"`
	// Samples is K and Group G, as the trajectories record them (the
	// largest seen).
	Samples int `json:"samples"`
	Group   int `json:"group"`
	// Trajectories are the run's trajectories on the stream;
	// LedgerEpisodes the episodes the run ledger records as published.
	Trajectories   int `json:"trajectories"`
	LedgerEpisodes int `json:"ledger_episodes"`
	// Overall and ByApp are ledger.Tally's figures over the trajectories'
	// records (ledger.RecordOf): the rollout summary's formula.
	Overall ledger.Scores `json:"overall"`
	ByApp   []AppScores   `json:"by_app"`
	// Steps is the distribution of step counts of the episodes that did
	// not end by an environment error.
	Steps []Count `json:"steps_histogram"`
	// VMs is how the run used its VMs over time.
	VMs VMUse `json:"vms"`
	// Plans counts how varied the planner's plans were
	// (ledger.PlanVarietyOf); IdenticalPlansShare is Identical/Sampled and
	// VariedGroupsShare Varied/Groups, as in the rollout summary.
	Plans               ledger.PlanVariety `json:"plans"`
	IdenticalPlansShare float64            `json:"identical_plans_share"`
	VariedGroupsShare   float64            `json:"varied_groups_share"`
	// Latency is per step stage (from the steps' timings) and per judged
	// trajectory.
	Latency StageLatency `json:"latency_ms"`
	// Judge is `judge report --run` on the judged archive; nil when none of
	// the run's trajectories is archived.
	Judge *judgereport.Report `json:"judge"`
	// Shards are the run's rows in the shard sets found; nil when none.
	Shards *ShardFigures `json:"shards"`
	// Lengths is how well rollout's length history predicted the
	// episodes' VM time (ledger.Record.PredictedS against the
	// trajectories' ended_at − started_at); nil when no episode recorded
	// a prediction.
	Lengths *LengthFigures `json:"lengths,omitempty"`
	// Night is the night the run belongs to (ledger.NightOf: nightly's
	// "<night>-<app>" runs; any other run is a night of its own).
	Night string `json:"night"`
	// Tasks are the per-task figures, by app and task.
	Tasks []TaskFigures `json:"tasks"`
	// Planner is the planner's answers: tokens and finish reasons.
	Planner PlannerFigures `json:"planner"`
	// Agreement is how the judge's votes agree; nil without judgements.
	Agreement *Agreement `json:"judge_agreement"`
	// SFT is the run's samples in the SFT sets; nil when none takes it.
	SFT *SFTFigures `json:"sft"`
	// Gallery is a few trajectories of each judge decision (each outcome
	// without a judgement), GalleryPerClass each, by trajectory id.
	Gallery []GalleryEntry `json:"gallery"`
	// Baseline compares the run with --baseline; nil without one.
	Baseline *Comparison `json:"baseline,omitempty"`
	// Notes say what the report could not show and why.
	Notes []string `json:"notes"`
}

// AppScores are one application's figures.
type AppScores struct {
	App string `json:"app"`
	ledger.Scores
}

// Count is how many times a value occurred.
type Count struct {
	Value int `json:"value"`
	N     int `json:"n"`
}

// VMUse is the run's VM use: one Episode per trajectory, and per VM the
// time its episodes took. Utilisation is the busy time of all VMs over
// (End − Start) × number of VMs.
type VMUse struct {
	Start       time.Time   `json:"start"`
	End         time.Time   `json:"end"`
	Utilisation float64     `json:"utilisation"`
	PerVM       []VMFigures `json:"per_vm"`
	Episodes    []Episode   `json:"episodes"`
	// EventDocuments is the number of VM events documents of the run
	// (ledger.VMEvents, one per rollout invocation that recorded them);
	// Spans are their start and reset spans and Events their failures and
	// quarantines, merged (nil without documents).
	EventDocuments int              `json:"vm_event_documents"`
	Spans          []ledger.VMSpan  `json:"spans"`
	Events         []ledger.VMEvent `json:"events"`
}

// VMFigures are one VM's episodes, busy time and environment errors (the
// faults the stream records: episodes ended by the VM, guest or a model
// endpoint), and, from the run's VM events documents, its resets (reverts
// to the snapshot; ResetSeconds counts the ended ones), the pool's
// failures of it (failed starts, resets and health checks, and unhealthy
// releases) and how often it was quarantined. The last four are zero
// without documents (VMUse.EventDocuments).
type VMFigures struct {
	VM           string  `json:"vm"`
	Episodes     int     `json:"episodes"`
	BusySeconds  float64 `json:"busy_seconds"`
	Utilisation  float64 `json:"utilisation"`
	EnvErrors    int     `json:"env_errors"`
	Resets       int     `json:"resets"`
	ResetSeconds float64 `json:"reset_seconds"`
	Failures     int     `json:"failures"`
	Quarantined  int     `json:"quarantined"`
}

// Episode is one trajectory on the VM timeline.
type Episode struct {
	ID      string           `json:"id"`
	App     string           `json:"app"`
	Task    string           `json:"task"`
	Sample  int              `json:"sample"`
	VM      string           `json:"vm"`
	Start   time.Time        `json:"start"`
	End     time.Time        `json:"end"`
	Outcome traj.OutcomeKind `json:"outcome"`
	Passed  bool             `json:"passed"`
}

// StageLatency summarises the steps' timings per stage and the judge's
// time per trajectory (judge report's latency; zero without judgements).
type StageLatency struct {
	Observe judgereport.Latency `json:"observe"`
	Plan    judgereport.Latency `json:"plan"`
	Ground  judgereport.Latency `json:"ground"`
	Exec    judgereport.Latency `json:"exec"`
	Judge   judgereport.Latency `json:"judge"`
}

// ShardFigures are the run's rows in the shard sets whose manifest lists
// the run.
type ShardFigures struct {
	// Sets are the folders of the sets that list the run, relative to
	// Sources.ShardsDir; the figures are of the one with the most rows
	// of the run (two sets hold the same rows twice).
	Sets   []string `json:"sets"`
	Rows   int      `json:"rows"`
	Groups int      `json:"groups"`
	// ZeroVarianceGroups are the run's groups written with zero variance
	// (every advantage 0); ZeroVarianceShare divides them by Groups.
	// Groups a set dropped have no rows and are not counted here.
	ZeroVarianceGroups int     `json:"zero_variance_groups"`
	ZeroVarianceShare  float64 `json:"zero_variance_share"`
	// Rewards and Advantages are the rows' values, binned.
	Rewards    Histogram `json:"rewards"`
	Advantages Histogram `json:"advantages"`
	// AdvantageSpread bins the groups' advantage range (largest −
	// smallest advantage of a group's rows; 0 for a group without
	// variance), RewardSD their rewards' standard deviation.
	AdvantageSpread Histogram `json:"advantage_spread"`
	RewardSD        Histogram `json:"reward_sd"`
}

// SFTFigures are the run's samples in the SFT sets (sftpack) under
// Sources.SFTDir: the set that took the most of the run's trajectories
// (a night's set and a later one that adds earlier nights take the same
// ones), with its trajectory and sample counts of the run.
type SFTFigures struct {
	Set          string `json:"set"`
	Trajectories int    `json:"trajectories"`
	Samples      int    `json:"samples"`
}

// Histogram is values binned in equal-width bins from Min to Max.
type Histogram struct {
	Min    float64 `json:"min"`
	Max    float64 `json:"max"`
	Counts []int   `json:"counts"`
	// NonFinite counts the values left out: NaN or ±Inf.
	NonFinite int `json:"non_finite,omitempty"`
	values    []float64
}

// Comparison is the run beside a baseline run, per app and overall.
type Comparison struct {
	Baseline string     `json:"baseline"`
	Apps     []AppDelta `json:"apps"`
	Overall  AppDelta   `json:"overall"`
}

// AppDelta is one app's success rate and Average@K in the run and the
// baseline, and their differences (run − baseline). A side without
// scored episodes of the app has nil figures and no delta.
type AppDelta struct {
	App             string   `json:"app"`
	Rate            *float64 `json:"success_rate"`
	BaselineRate    *float64 `json:"baseline_success_rate"`
	RateDelta       *float64 `json:"success_rate_delta"`
	AverageAtK      *float64 `json:"average_at_k"`
	BaselineAverage *float64 `json:"baseline_average_at_k"`
	AverageDelta    *float64 `json:"average_at_k_delta"`
}

// HistogramBins is the number of bins of the reward and advantage
// histograms.
const HistogramBins = 20

// ErrNoRun is returned when the stream holds no trajectory of the run.
var ErrNoRun = errors.New("no trajectories of the run on the stream")

// Build reads the run's data and computes its report.
func Build(ctx context.Context, src Sources, cfg Config) (*Report, error) {
	trs, err := Trajectories(ctx, src.Bus, cfg.Run)
	if err != nil {
		return nil, err
	}
	if cfg.App != "" {
		trs = slices.DeleteFunc(trs, func(t *traj.Trajectory) bool { return t.Task.App != cfg.App })
	}
	if len(trs) == 0 {
		return nil, fmt.Errorf("run report: run %q%s: %w", cfg.Run, appNote(cfg.App), ErrNoRun)
	}
	reports, err := buildRuns(ctx, src, []string{cfg.Run}, map[string][]*traj.Trajectory{cfg.Run: trs}, cfg.App)
	if err != nil {
		return nil, err
	}
	r := reports[0]
	if cfg.Baseline != "" {
		base, err := Trajectories(ctx, src.Bus, cfg.Baseline)
		if err != nil {
			return nil, err
		}
		if cfg.App != "" {
			base = slices.DeleteFunc(base, func(t *traj.Trajectory) bool { return t.Task.App != cfg.App })
		}
		if len(base) == 0 {
			return nil, fmt.Errorf("run report: baseline %q%s: %w", cfg.Baseline, appNote(cfg.App), ErrNoRun)
		}
		b := &Report{}
		b.figures(base)
		r.Baseline = compare(cfg.Baseline, r, b)
	}
	return r, nil
}

// appNote names --app in an error, when it is given.
func appNote(app string) string {
	if app == "" {
		return ""
	}
	return fmt.Sprintf(" (app %s)", traj.PrintName(app))
}

// buildRuns computes the report of each run from its trajectories (of
// app only, unless app is ""), the run ledger, the judged archive, the
// VM events, the shard sets and the SFT sets, in the order of runs.
func buildRuns(ctx context.Context, src Sources, runs []string, trs map[string][]*traj.Trajectory, app string) ([]*Report, error) {
	ledgerRuns, err := ledger.Open(ctx, src.Bus, src.Topology)
	if err != nil {
		return nil, fmt.Errorf("run report: %w", err)
	}
	rows, err := shardRows(ctx, src.ShardsDir, runs, app)
	if err != nil {
		return nil, fmt.Errorf("run report: %w", err)
	}
	sfts, err := sftSamples(src.SFTDir, runs)
	if err != nil {
		return nil, fmt.Errorf("run report: %w", err)
	}
	var out []*Report
	for _, run := range runs {
		r := &Report{Run: run, Trajectories: len(trs[run]), Notes: []string{}}
		r.figures(trs[run])
		r.Night = ledger.NightOf(run, r.Apps)
		tasks := map[string]bool{}
		for _, t := range trs[run] {
			tasks[t.Task.ID] = true
		}
		done, err := ledgerRuns.Done(ctx, run, sortedKeys(tasks))
		if err != nil {
			return nil, fmt.Errorf("run report: %w", err)
		}
		r.LedgerEpisodes = len(done)
		r.Lengths = lengthFigures(trs[run], done)
		if r.LedgerEpisodes != r.Trajectories {
			r.Notes = append(r.Notes, fmt.Sprintf("the run ledger records %d published episodes, the stream holds %d trajectories of the run (lost to store damage or purged: rollout --verify --run %s runs them again; or a stream past its retention, or a run still going)", r.LedgerEpisodes, r.Trajectories, run))
		}
		var docs []*traj.Judged
		if src.Store != nil {
			evs, err := VMEventDocs(ctx, src.Store, run)
			if err != nil {
				return nil, err
			}
			r.addVMEvents(evs)
			jr, err := judgereport.Build(ctx, src.Store, judgereport.Config{Run: run, App: app})
			if err != nil {
				return nil, fmt.Errorf("run report: %w", err)
			}
			if jr.Version != "" {
				r.Judge = jr
				r.Latency.Judge = jr.Overall.LatencyMS
				docs = jr.Docs
			} else {
				r.Notes = append(r.Notes, "no judgement of the run in the judged archive: run judge to see decisions and precision/recall.")
			}
		}
		groups := map[string]*groupFig{}
		if rr := rows[run]; rr != nil {
			r.Shards = rr.figures(groups)
		} else {
			r.Notes = append(r.Notes, fmt.Sprintf("no shard set under %q lists the run: no reward, advantage or zero-variance figures (run advantage --runs %s).", redact.URL(src.ShardsDir), run))
		}
		if r.SFT = sfts[run]; r.SFT != nil && app != "" {
			r.SFT = nil // an SFT manifest counts samples per run, not per run and app
			r.Notes = append(r.Notes, "the SFT sets count samples per run, not per app: no SFT figures with --app.")
		}
		r.detail(trs[run], docs, groups)
		if r.Judge != nil {
			r.Judge.Docs = nil // every judged trajectory: not kept for a range of nights
		}
		out = append(out, r)
	}
	return out, nil
}

// FromTrajectories is the report of a run from its trajectories and
// their judgements (of one judge version) alone: what Build computes
// from those two, without the run ledger, the VM events, the shard sets
// or the SFT sets (for a program that holds the data in memory, or a
// benchmark).
func FromTrajectories(run string, trs []*traj.Trajectory, docs []*traj.Judged) *Report {
	trs = slices.Clone(trs)
	sortTrajectories(trs)
	r := &Report{Run: run, Trajectories: len(trs), LedgerEpisodes: len(trs), Notes: []string{}}
	r.figures(trs)
	r.Night = ledger.NightOf(run, r.Apps)
	if len(docs) > 0 {
		r.Judge = &judgereport.Report{Run: run, Version: docs[0].Judgement.Judge.ID(), Judge: docs[0].Judgement.Judge,
			Overall: judgereport.FiguresOf(docs), Apps: map[string]judgereport.Figures{}, Docs: docs}
		byApp := map[string][]*traj.Judged{}
		for _, d := range docs {
			byApp[d.Judgement.App] = append(byApp[d.Judgement.App], d)
		}
		for app, ds := range byApp {
			r.Judge.Apps[app] = judgereport.FiguresOf(ds)
		}
		r.Latency.Judge = r.Judge.Overall.LatencyMS
	}
	r.detail(trs, docs, nil)
	if r.Judge != nil {
		r.Judge.Docs = nil
	}
	return r
}

// detail adds the per-task figures, the judge's agreement and the
// gallery, from the run's trajectories, judgements (of one judge
// version) and shard groups.
func (r *Report) detail(trs []*traj.Trajectory, docs []*traj.Judged, groups map[string]*groupFig) {
	r.Agreement = agreement(docs)
	r.Tasks = taskFigures(trs, docs, groups)
	judgements := map[string]*traj.Judgement{}
	for _, d := range docs {
		judgements[d.Judgement.TrajectoryID] = &d.Judgement
	}
	r.Gallery = gallery(trs, judgements)
	for i := range r.Tasks {
		for _, g := range r.Gallery {
			if g.Task == r.Tasks[i].Task {
				r.Tasks[i].Gallery = append(r.Tasks[i].Gallery, g.ID)
			}
		}
	}
}

// Trajectories reads the run's trajectories from the trajectories stream
// (every app's subject), sorted by app, task and sample.
func Trajectories(ctx context.Context, b *bus.Bus, run string) ([]*traj.Trajectory, error) {
	var out []*traj.Trajectory
	err := scan(ctx, b, func(t *traj.Trajectory) {
		if t.Run == run {
			out = append(out, t)
		}
	})
	if err != nil {
		return nil, fmt.Errorf("run report: read the trajectories of run %q: %w", run, err)
	}
	sortTrajectories(out)
	return out, nil
}

// scan decodes every trajectory on the trajectories stream, in stream
// order.
func scan(ctx context.Context, b *bus.Bus, f func(*traj.Trajectory)) error {
	return b.Scan(ctx, bus.Raw, bus.AllSubjects(bus.Raw), time.Time{}, func(s bus.Stored) error {
		body, _, err := b.Get(ctx, bus.Raw, s.Seq)
		if err != nil {
			return err
		}
		t, err := traj.DecodeTrajectory(body)
		if err != nil {
			return fmt.Errorf("trajectory message %d: %w", s.Seq, err)
		}
		f(t)
		return nil
	})
}

// figures computes everything that comes from the trajectories alone.
func (r *Report) figures(trs []*traj.Trajectory) {
	var overall ledger.Tally
	apps := map[string]*ledger.Tally{}
	ckpts := map[string]bool{}
	steps := map[int]int{}
	var obs, plan, ground, exec []float64
	perVM := map[string]*VMFigures{}
	for _, t := range trs {
		rec := ledger.RecordOf(t)
		overall.Add(t.Task.ID, rec)
		a := apps[t.Task.App]
		if a == nil {
			a = &ledger.Tally{}
			apps[t.Task.App] = a
		}
		a.Add(t.Task.ID, rec)
		if c := t.Models.Planner.Checkpoint; c != "" {
			ckpts[c] = true
		}
		r.Samples, r.Group = max(r.Samples, t.Samples), max(r.Group, t.Group)
		if t.Outcome.Kind != traj.OutcomeEnvError {
			steps[len(t.Steps)]++
		}
		r.Plans.Add(ledger.PlanVarietyOf(t))
		for _, s := range t.Steps {
			obs = append(obs, float64(s.Timings.ObserveMS))
			plan = append(plan, float64(s.Timings.PlanMS))
			ground = append(ground, float64(s.Timings.GroundMS))
			exec = append(exec, float64(s.Timings.ExecMS))
		}
		ep := Episode{ID: t.ID, App: t.Task.App, Task: t.Task.ID, Sample: t.Sample, VM: t.VM, Start: t.StartedAt, End: t.EndedAt,
			Outcome: t.Outcome.Kind, Passed: rec.Passed}
		r.VMs.Episodes = append(r.VMs.Episodes, ep)
		if !ep.Start.IsZero() && (r.VMs.Start.IsZero() || ep.Start.Before(r.VMs.Start)) {
			r.VMs.Start = ep.Start
		}
		if ep.End.After(r.VMs.End) {
			r.VMs.End = ep.End
		}
		v := perVM[t.VM]
		if v == nil {
			v = &VMFigures{VM: t.VM}
			perVM[t.VM] = v
		}
		v.Episodes++
		if ep.End.After(ep.Start) && !ep.Start.IsZero() {
			v.BusySeconds += ep.End.Sub(ep.Start).Seconds()
		}
		if t.Outcome.Kind == traj.OutcomeEnvError {
			v.EnvErrors++
		}
	}
	r.Overall = overall.Scores()
	for _, app := range sortedKeys(apps) {
		r.Apps = append(r.Apps, app)
		r.ByApp = append(r.ByApp, AppScores{App: app, Scores: apps[app].Scores()})
	}
	r.Checkpoints = sortedKeys(ckpts)
	for _, n := range sortedKeys(steps) {
		r.Steps = append(r.Steps, Count{Value: n, N: steps[n]})
	}
	if p := r.Plans; p.Sampled > 0 {
		r.IdenticalPlansShare = float64(p.Identical) / float64(p.Sampled)
	}
	if p := r.Plans; p.Groups > 0 {
		r.VariedGroupsShare = float64(p.Varied) / float64(p.Groups)
	}
	r.Latency.Observe = judgereport.LatencyOf(obs)
	r.Latency.Plan = judgereport.LatencyOf(plan)
	r.Latency.Ground = judgereport.LatencyOf(ground)
	r.Latency.Exec = judgereport.LatencyOf(exec)
	r.Planner = plannerFigures(trs)
	var byVM map[string]float64
	r.VMs.Utilisation, byVM = Utilisation(r.VMs.Episodes)
	for _, vm := range sortedKeys(perVM) {
		v := perVM[vm]
		v.Utilisation = byVM[vm]
		r.VMs.PerVM = append(r.VMs.PerVM, *v)
	}
}

// Utilisation is codapipe's one measure of how busy a run kept its VMs,
// which the run report and rollout's summary both give: the episodes'
// time (trajectory start to end) over the span from the first episode's
// start to the last one's end, times the VMs that ran them; byVM is each
// VM's episode time over the span. Episodes without both times are left
// out of the busy time and the span.
func Utilisation(eps []Episode) (total float64, byVM map[string]float64) {
	var start, end time.Time
	busy := map[string]float64{}
	for _, ep := range eps {
		busy[ep.VM] += 0 // a VM that ran an episode counts, timed or not
		if ep.Start.IsZero() {
			continue
		}
		if start.IsZero() || ep.Start.Before(start) {
			start = ep.Start
		}
		if ep.End.After(end) {
			end = ep.End
		}
		if ep.End.After(ep.Start) {
			busy[ep.VM] += ep.End.Sub(ep.Start).Seconds()
		}
	}
	span := end.Sub(start).Seconds()
	byVM = map[string]float64{}
	if span <= 0 || len(busy) == 0 {
		return 0, byVM
	}
	sum := 0.0
	for vm, b := range busy {
		byVM[vm] = b / span
		sum += b
	}
	return sum / (span * float64(len(busy))), byVM
}

func sortedKeys[V any, K interface{ ~string | ~int }](m map[K]V) []K {
	keys := make([]K, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// runRows are one run's rows in the shard sets.
type runRows struct {
	sets       []string
	rows       int
	rewards    []float64
	advantages []float64
	groups     map[string]*groupFig
}

// shardRows reads the rows of runs (of app only, unless "") from every
// shard set under where (a folder or a bucket URL) whose manifest lists
// one of them; a run no set lists has none. Each shard file is checked
// against its manifest as it is read.
func shardRows(ctx context.Context, where string, runs []string, app string) (map[string]*runRows, error) {
	out := map[string]*runRows{}
	if where == "" {
		return out, nil
	}
	if blob.IsPath(where) || strings.HasPrefix(where, "file://") {
		loc, err := blob.ParseURL(where, "")
		if err != nil {
			return nil, fmt.Errorf("shard sets %s: %w", where, err)
		}
		if _, err := os.Stat(loc.Dir); errors.Is(err, fs.ErrNotExist) {
			return out, nil // nothing written there yet (opening it would create it)
		}
	}
	b, err := blob.OpenBucket(ctx, where, blob.Config{})
	if err != nil {
		return nil, fmt.Errorf("shard sets %s: %w", redact.URL(where), err)
	}
	var sets []string // set prefixes, sorted
	for info, err := range b.List(ctx, "") {
		if err != nil {
			return nil, fmt.Errorf("find shard sets under %s: %w", redact.URL(where), err)
		}
		if prefix, ok := strings.CutSuffix(info.Key, shard.ManifestName); ok && (prefix == "" || strings.HasSuffix(prefix, "/")) {
			sets = append(sets, strings.TrimSuffix(prefix, "/"))
		}
	}
	sort.Strings(sets)
	perSet := map[string][]*runRows{} // run → its rows in each set that lists it
	for _, set := range sets {
		m, err := shard.ReadManifest(ctx, b, set)
		if err != nil {
			return nil, err
		}
		listed := map[string]*runRows{}
		for _, run := range runs {
			if slices.Contains(m.Runs, run) {
				rr := &runRows{sets: []string{cmp.Or(set, ".")}, groups: map[string]*groupFig{}}
				perSet[run] = append(perSet[run], rr)
				listed[run] = rr
			}
		}
		if len(listed) == 0 {
			continue
		}
		for _, file := range m.Files {
			err := shard.ReadVerified(ctx, b, file, "", shard.ReadOptions{SkipImageBytes: func(string) bool { return true }}, func(row *shard.Row) error {
				rr := listed[row.Run]
				if rr == nil || (app != "" && row.App != app) {
					return nil
				}
				rr.rows++
				rr.rewards = append(rr.rewards, row.Reward)
				rr.advantages = append(rr.advantages, row.Advantage)
				g := rr.groups[row.GroupID]
				if g == nil {
					g = &groupFig{task: row.Task, advMin: row.Advantage, advMax: row.Advantage}
					rr.groups[row.GroupID] = g
				}
				g.zero = row.ZeroVariance
				g.rows++
				g.rewards = append(g.rewards, row.Reward)
				g.advMin, g.advMax = min(g.advMin, row.Advantage), max(g.advMax, row.Advantage)
				return nil
			})
			if err != nil {
				return nil, fmt.Errorf("shard set %s: %w", cmp.Or(set, "."), err)
			}
		}
	}
	// Two sets that list a run (a set rebuilt elsewhere, another judge
	// version) hold the same rows twice: the figures are the set's with
	// the most rows of the run, the first in path order on a tie.
	for run, rrs := range perSet {
		best := rrs[0]
		var sets []string
		for _, rr := range rrs {
			sets = append(sets, rr.sets...)
			if rr.rows > best.rows {
				best = rr
			}
		}
		best.sets = sets
		out[run] = best
	}
	return out, nil
}

// figures are the run's shard figures; groups gets its step groups.
func (rr *runRows) figures(groups map[string]*groupFig) *ShardFigures {
	f := &ShardFigures{Sets: rr.sets, Rows: rr.rows, Groups: len(rr.groups)}
	f.Rewards.values, f.Advantages.values = rr.rewards, rr.advantages
	for id, g := range rr.groups {
		groups[id] = g
		if g.zero {
			f.ZeroVarianceGroups++
		}
	}
	if f.Groups > 0 {
		f.ZeroVarianceShare = float64(f.ZeroVarianceGroups) / float64(f.Groups)
	}
	f.Rewards.bin(HistogramBins)
	f.Advantages.bin(HistogramBins)
	f.AdvantageSpread, f.RewardSD = spread(rr.groups)
	return f
}

// bin fills Min, Max and Counts from the finite values, and counts the
// others (a shard may hold ±Inf or NaN rewards) in NonFinite.
func (h *Histogram) bin(n int) {
	h.Counts = []int{}
	finite := h.values[:0:0]
	for _, v := range h.values {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			h.NonFinite++
			continue
		}
		finite = append(finite, v)
	}
	if len(finite) == 0 {
		return
	}
	h.Min, h.Max = slices.Min(finite), slices.Max(finite)
	h.Counts = make([]int, n)
	w := (h.Max - h.Min) / float64(n)
	for _, v := range finite {
		i := 0
		if f := (v - h.Min) / w; w > 0 && f > 0 { // f is NaN when the range overflows
			i = int(min(f, float64(n-1)))
		}
		h.Counts[i]++
	}
}

// rows are the comparison's rows: each app's, then the overall one
// unless there is one app (which it would repeat).
func (c *Comparison) rows() []AppDelta {
	if len(c.Apps) == 1 {
		return slices.Clone(c.Apps)
	}
	return append(slices.Clone(c.Apps), c.Overall)
}

// compare puts the run's per-app figures beside the baseline's.
func compare(baseline string, run, base *Report) *Comparison {
	c := &Comparison{Baseline: baseline}
	byApp := func(r *Report) map[string]ledger.Scores {
		m := map[string]ledger.Scores{}
		for _, a := range r.ByApp {
			m[a.App] = a.Scores
		}
		return m
	}
	rm, bm := byApp(run), byApp(base)
	apps := map[string]bool{}
	for a := range rm {
		apps[a] = true
	}
	for a := range bm {
		apps[a] = true
	}
	for _, app := range sortedKeys(apps) {
		rs, rok := rm[app]
		bs, bok := bm[app]
		c.Apps = append(c.Apps, delta(app, rs, rok, bs, bok))
	}
	c.Overall = delta("overall", run.Overall, true, base.Overall, true)
	return c
}

func delta(app string, rs ledger.Scores, rok bool, bs ledger.Scores, bok bool) AppDelta {
	d := AppDelta{App: app}
	val := func(ok bool, s ledger.Scores, v float64) *float64 {
		if !ok || s.ScoredTasks == 0 {
			return nil
		}
		return &v
	}
	d.Rate, d.BaselineRate = val(rok, rs, rs.Rate), val(bok, bs, bs.Rate)
	d.AverageAtK, d.BaselineAverage = val(rok, rs, rs.AverageAtK), val(bok, bs, bs.AverageAtK)
	if d.Rate != nil && d.BaselineRate != nil {
		v := *d.Rate - *d.BaselineRate
		d.RateDelta = &v
	}
	if d.AverageAtK != nil && d.BaselineAverage != nil {
		v := *d.AverageAtK - *d.BaselineAverage
		d.AverageDelta = &v
	}
	return d
}

// WriteJSON writes the report as one indented JSON document.
func (r *Report) WriteJSON(w io.Writer) error { return writeJSON(w, r) }

// writeJSON writes v as one indented JSON document.
func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("run report: write JSON: %w", err)
	}
	return nil
}

// Print writes the headline figures for people: the page and --json have
// the rest.
func (r *Report) Print(w io.Writer) {
	apps := make([]string, len(r.Apps))
	for i, a := range r.Apps {
		apps[i] = traj.PrintName(a)
	}
	ckpts := make([]string, len(r.Checkpoints))
	for i, c := range r.Checkpoints {
		ckpts[i] = traj.PrintName(c)
	}
	fmt.Fprintf(w, "run %s (%s; planner %s): %d trajectories, ledger %d\n", traj.PrintName(r.Run), strings.Join(apps, ", "),
		strings.Join(ckpts, ", "), r.Trajectories, r.LedgerEpisodes)
	for _, a := range r.ByApp {
		fmt.Fprintf(w, "  %-12s success %5.1f%%  Average@%d %5.1f%%  Pass@%d %5.1f%%  mean steps %.2f\n", traj.PrintName(a.App),
			100*a.Rate, r.Samples, 100*a.AverageAtK, r.Samples, 100*a.PassAtK, a.MeanSteps)
	}
	if len(r.ByApp) != 1 { // with one app "overall" is that app
		fmt.Fprintf(w, "  %-12s success %5.1f%%  Average@%d %5.1f%%  Pass@%d %5.1f%%  mean steps %.2f\n", "overall",
			100*r.Overall.Rate, r.Samples, 100*r.Overall.AverageAtK, r.Samples, 100*r.Overall.PassAtK, r.Overall.MeanSteps)
	}
	fmt.Fprintf(w, "  VM utilisation %.1f%%, identical-plan share %.1f%%\n", 100*r.VMs.Utilisation, 100*r.IdenticalPlansShare)
	if j := r.Judge; j != nil {
		fmt.Fprintf(w, "  judge: %d judged, %d clean successes, precision %s, recall %s\n", j.Overall.Trajectories,
			j.Overall.Decisions[traj.CleanSuccess], pct(j.Overall.Precision), pct(j.Overall.Recall))
	}
	if s := r.Shards; s != nil {
		fmt.Fprintf(w, "  shards: %d rows in %d groups, zero-variance share %.1f%%\n", s.Rows, s.Groups, 100*s.ZeroVarianceShare)
	}
	if l := r.Lengths; l != nil {
		fmt.Fprintf(w, "  episode lengths: %d predicted from history (mean error %.1fs, %.1f%%), %d from the step limit\n",
			l.FromHistory, l.MeanAbsErrorS, 100*l.MeanRelError, l.Fallback)
	}
	if b := r.Baseline; b != nil {
		for _, d := range b.rows() {
			fmt.Fprintf(w, "  vs %s, %-12s success %s → %s (%s), Average@K %s → %s (%s)\n", traj.PrintName(b.Baseline), traj.PrintName(d.App),
				pct(d.BaselineRate), pct(d.Rate), pctDelta(d.RateDelta), pct(d.BaselineAverage), pct(d.AverageAtK), pctDelta(d.AverageDelta))
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(w, "  note: %s\n", n)
	}
}

func pct(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%.1f%%", 100**p)
}

func pctDelta(p *float64) string {
	if p == nil {
		return "—"
	}
	return fmt.Sprintf("%+.1f pts", 100**p)
}

// LengthFigures is how rollout's length history predicted the run's
// episodes (environment errors left out): how many predictions came from
// their task's history and how many from the step limit, and the mean
// absolute and relative error of the former.
type LengthFigures struct {
	FromHistory   int     `json:"from_history"`
	Fallback      int     `json:"fallback"`
	MeanAbsErrorS float64 `json:"mean_abs_error_s"`
	MeanRelError  float64 `json:"mean_rel_error"`
}

// lengthFigures compares the predictions the ledger recorded with the
// trajectories' VM time; nil when no episode recorded one.
func lengthFigures(trs []*traj.Trajectory, done map[ledger.EpisodeKey]ledger.Record) *LengthFigures {
	var f LengthFigures
	var abs, rel float64
	for _, t := range trs {
		rec, ok := done[ledger.EpisodeKey{Task: t.Task.ID, Sample: t.Sample}]
		d := t.EndedAt.Sub(t.StartedAt).Seconds()
		if !ok || rec.PredictedS <= 0 || t.Outcome.IsEnvError() || d <= 0 {
			continue
		}
		if !rec.PredictedFromHistory {
			f.Fallback++
			continue
		}
		f.FromHistory++
		e := math.Abs(rec.PredictedS - d)
		abs += e
		rel += e / d
	}
	if f.FromHistory+f.Fallback == 0 {
		return nil
	}
	if f.FromHistory > 0 {
		f.MeanAbsErrorS, f.MeanRelError = abs/float64(f.FromHistory), rel/float64(f.FromHistory)
	}
	return &f
}
