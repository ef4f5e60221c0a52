package runreport

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"image/jpeg"
	"image/png"
	"io"
	"path"
	"slices"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/imaging"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/traj"
)

// RangeConfig selects the runs of an overview.
type RangeConfig struct {
	// Runs are run names or path.Match patterns ("2026-11-*"); none:
	// every run on the stream.
	Runs []string
	// Since keeps the runs whose first trajectory started at or after it
	// (zero: no bound).
	Since time.Time
	// App keeps only this application's trajectories ("" all).
	App string
}

// Overview is the report of a range of runs — nights, checkpoints —
// oldest first: each run's report, the trend of the headline figures,
// the task × run grid and the gallery of the latest run of each app.
type Overview struct {
	// Runs are the runs, oldest first (by their first trajectory's
	// start). Reports are the full reports of the runs of the
	// DetailColumns columns of the newest runs, in that order; the other
	// runs are in the trend and the task grid only (Summarized).
	Runs       []string  `json:"runs"`
	Apps       []string  `json:"apps"`
	Reports    []*Report `json:"reports"`
	Summarized []string  `json:"summarized_runs"`
	// Columns are the nights and checkpoints of the runs, in run order:
	// a run's column is its night and its planner checkpoints, so the
	// runs of one night's apps share one, and checkpoints evaluated in
	// one night have one each.
	Columns []Column `json:"columns"`
	// Trend is one point per run and app, in run order.
	Trend []TrendPoint `json:"trend"`
	// Tasks is every task's success in every column.
	Tasks TaskGrid `json:"task_grid"`
	// Gallery is the gallery of the latest run of each app.
	Gallery []GalleryEntry `json:"gallery"`
	Notes   []string       `json:"notes"`
	// images are the gallery's thumbnails by blob key (LoadImages).
	images map[string]thumb
}

// TrendPoint is one run's headline figures for one app. Success,
// Average@K, Pass@K and the judge's precision, recall and calls are the
// app's; the others are the run's (the same for each app of a run of
// several apps; nightly's runs have one). A nil figure is one the run
// has no data for (no judgement, shard set or SFT set).
type TrendPoint struct {
	Column      int       `json:"column"` // index in Overview.Columns
	Run         string    `json:"run"`
	Night       string    `json:"night"`
	Checkpoints []string  `json:"planner_checkpoints"`
	App         string    `json:"app"`
	Start       time.Time `json:"start"`
	Episodes    int       `json:"episodes"`
	Success     float64   `json:"success_rate"`
	AverageAtK  float64   `json:"average_at_k"`
	PassAtK     float64   `json:"pass_at_k"`
	Precision   *float64  `json:"judge_precision"`
	Recall      *float64  `json:"judge_recall"`
	Calls       *float64  `json:"judge_calls_per_trajectory"`
	// IdenticalPlans and Utilisation are Report's IdenticalPlansShare
	// and VMs.Utilisation.
	IdenticalPlans float64  `json:"identical_plans_share"`
	ZeroVariance   *float64 `json:"zero_variance_share"`
	Rows           *int     `json:"rows"`
	SFTSamples     *int     `json:"sft_samples"`
	Utilisation    float64  `json:"vm_utilisation"`
	// PlanP50MS, GroundP50MS and JudgeP50MS are the endpoints' median
	// latencies (per step; per judged trajectory).
	PlanP50MS   float64  `json:"plan_p50_ms"`
	GroundP50MS float64  `json:"ground_p50_ms"`
	JudgeP50MS  *float64 `json:"judge_p50_ms"`
}

// Column is one night and planner checkpoint of an overview.
type Column struct {
	Label       string   `json:"label"` // the night, and the checkpoints after " · "
	Night       string   `json:"night"`
	Checkpoints []string `json:"planner_checkpoints"`
	Runs        []string `json:"runs"`
}

// TaskGrid is every task's success in every column: Rows by app and
// task, one cell per column of Overview.Columns (nil where no run of the
// column has a trajectory of the task; the latest run's when two do).
type TaskGrid struct {
	Rows []TaskRow `json:"rows"`
}

// TaskRow is one task's cells.
type TaskRow struct {
	App   string         `json:"app"`
	Task  string         `json:"task"`
	Cells []*TaskFigures `json:"cells"`
}

// DetailColumns is how many of an overview's latest columns (nights and
// checkpoints) have their runs' full reports in it: a month of nights
// stays a page of a few MB.
const DetailColumns = 3

// ErrNoRuns is returned when no run on the stream matches the range.
var ErrNoRuns = errors.New("no run on the stream matches")

// BuildRange reads the runs the range selects and computes their
// overview.
func BuildRange(ctx context.Context, src Sources, cfg RangeConfig) (*Overview, error) {
	for _, p := range cfg.Runs {
		if _, err := path.Match(p, ""); err != nil {
			return nil, fmt.Errorf("run report: run pattern %q: %w", p, err)
		}
	}
	byRun := map[string][]*traj.Trajectory{}
	start := map[string]time.Time{}
	err := scan(ctx, src.Bus, func(t *traj.Trajectory) {
		if !selected(cfg.Runs, t.Run) || (cfg.App != "" && t.Task.App != cfg.App) {
			return
		}
		byRun[t.Run] = append(byRun[t.Run], t)
		if st, ok := start[t.Run]; !ok || (!t.StartedAt.IsZero() && (st.IsZero() || t.StartedAt.Before(st))) {
			start[t.Run] = t.StartedAt
		}
	})
	if err != nil {
		return nil, fmt.Errorf("run report: read the trajectories: %w", err)
	}
	var runs []string
	for run := range byRun {
		if cfg.Since.IsZero() || !start[run].Before(cfg.Since) {
			runs = append(runs, run)
		}
	}
	if len(runs) == 0 {
		return nil, fmt.Errorf("run report: runs %q since %v%s: %w", cfg.Runs, cfg.Since, appNote(cfg.App), ErrNoRuns)
	}
	slices.SortFunc(runs, func(a, b string) int { return cmp.Or(start[a].Compare(start[b]), cmp.Compare(a, b)) })
	for _, run := range runs {
		sortTrajectories(byRun[run])
	}
	reports, err := buildRuns(ctx, src, runs, byRun, cfg.App)
	if err != nil {
		return nil, err
	}
	return OverviewOf(reports), nil
}

// selected reports whether run matches one of patterns (all runs when
// there is none).
func selected(patterns []string, run string) bool {
	if len(patterns) == 0 {
		return true
	}
	for _, p := range patterns {
		if ok, _ := path.Match(p, run); ok {
			return true
		}
	}
	return false
}

// OverviewOf is the overview of reports, oldest first.
func OverviewOf(reports []*Report) *Overview {
	o := &Overview{Reports: reports, Notes: []string{}, Columns: []Column{}, Trend: []TrendPoint{}, Tasks: TaskGrid{Rows: []TaskRow{}}, Gallery: []GalleryEntry{}}
	apps := map[string]bool{}
	latest := map[string]*Report{}
	type taskKey struct{ app, task string }
	var cells []map[taskKey]*TaskFigures
	colIdx := map[string]int{}
	for _, r := range reports {
		o.Runs = append(o.Runs, r.Run)
		label := r.Night
		if len(r.Checkpoints) > 0 {
			label += " · " + strings.Join(r.Checkpoints, ", ")
		}
		ci, ok := colIdx[label]
		if !ok {
			ci = len(o.Columns)
			colIdx[label] = ci
			o.Columns = append(o.Columns, Column{Label: label, Night: r.Night, Checkpoints: r.Checkpoints})
			cells = append(cells, map[taskKey]*TaskFigures{})
		}
		o.Columns[ci].Runs = append(o.Columns[ci].Runs, r.Run)
		for _, a := range r.ByApp {
			apps[a.App] = true
			latest[a.App] = r
			p := trendPoint(r, a)
			p.Column = ci
			o.Trend = append(o.Trend, p)
		}
		for j := range r.Tasks {
			tf := &r.Tasks[j]
			cells[ci][taskKey{tf.App, tf.Task}] = tf
		}
	}
	o.Apps = sortedKeys(apps)
	keys := map[taskKey]bool{}
	for _, c := range cells {
		for k := range c {
			keys[k] = true
		}
	}
	sorted := make([]taskKey, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.SortFunc(sorted, func(a, b taskKey) int { return cmp.Or(cmp.Compare(a.app, b.app), cmp.Compare(a.task, b.task)) })
	for _, k := range sorted {
		row := TaskRow{App: k.app, Task: k.task, Cells: make([]*TaskFigures, len(o.Columns))}
		for ci := range o.Columns {
			row.Cells[ci] = cells[ci][k]
		}
		o.Tasks.Rows = append(o.Tasks.Rows, row)
	}
	for _, app := range o.Apps {
		for _, g := range latest[app].Gallery {
			if g.App == app && !slices.ContainsFunc(o.Gallery, func(e GalleryEntry) bool { return e.ID == g.ID }) {
				o.Gallery = append(o.Gallery, g)
			}
		}
	}
	// The columns of the latest runs are detailed: walking back from the
	// newest run, the first DetailColumns columns met (a re-run of an
	// earlier night is in its night's column, and is detailed as the
	// newest run).
	runCol := map[string]int{}
	for ci, c := range o.Columns {
		for _, run := range c.Runs {
			runCol[run] = ci
		}
	}
	recent := map[int]bool{}
	for i := len(reports) - 1; i >= 0 && len(recent) < DetailColumns; i-- {
		recent[runCol[reports[i].Run]] = true
	}
	o.Summarized = []string{}
	var detailed []*Report
	for _, r := range reports {
		if !recent[runCol[r.Run]] {
			o.Summarized = append(o.Summarized, r.Run)
			continue
		}
		detailed = append(detailed, r)
	}
	o.Reports = detailed
	if len(o.Summarized) > 0 {
		o.Notes = append(o.Notes, fmt.Sprintf("%d older run(s) are in the trends and the task grid only: the page has the full figures of the runs of the latest %d nights and checkpoints (rollout report --runs for others).", len(o.Summarized), DetailColumns))
	}
	if len(o.Columns) < 2 {
		o.Notes = append(o.Notes, "one night and checkpoint: no trend (rollout report --runs 'PATTERN' or --since DATE reports a range of nights or checkpoints).")
	}
	return o
}

func trendPoint(r *Report, a AppScores) TrendPoint {
	p := TrendPoint{Run: r.Run, Night: r.Night, Checkpoints: r.Checkpoints, App: a.App, Start: r.VMs.Start, Episodes: a.Episodes,
		Success: a.Rate, AverageAtK: a.AverageAtK, PassAtK: a.PassAtK, IdenticalPlans: r.IdenticalPlansShare,
		Utilisation: r.VMs.Utilisation, PlanP50MS: r.Latency.Plan.P50, GroundP50MS: r.Latency.Ground.P50}
	if r.Judge != nil {
		if f, ok := r.Judge.Apps[a.App]; ok {
			p.Precision, p.Recall = f.Precision, f.Recall
			calls := f.CallsPerTrajectory
			p.Calls = &calls
		}
		j := r.Latency.Judge.P50
		p.JudgeP50MS = &j
	}
	if s := r.Shards; s != nil {
		z, n := s.ZeroVarianceShare, s.Rows
		p.ZeroVariance, p.Rows = &z, &n
	}
	if s := r.SFT; s != nil {
		n := s.Samples
		p.SFTSamples = &n
	}
	return p
}

// sortTrajectories sorts by app, task and sample, as Trajectories does.
func sortTrajectories(trs []*traj.Trajectory) {
	slices.SortFunc(trs, func(a, b *traj.Trajectory) int {
		return cmp.Or(cmp.Compare(a.Task.App, b.Task.App), cmp.Compare(a.Task.ID, b.Task.ID), a.Sample-b.Sample)
	})
}

// Print writes the overview for people: each detailed run's headline
// figures (Report.Print), one line per app of each older run from the
// trend, and the notes.
func (o *Overview) Print(w io.Writer) {
	for _, r := range o.Reports {
		r.Print(w)
	}
	for _, p := range o.Trend {
		if slices.Contains(o.Summarized, p.Run) {
			fmt.Fprintf(w, "run %s (%s, trend only): %d episodes, success %.1f%%, Average@K %.1f%%, Pass@K %.1f%%\n", traj.PrintName(p.Run),
				traj.PrintName(p.App), p.Episodes, 100*p.Success, 100*p.AverageAtK, 100*p.PassAtK)
		}
	}
	for _, n := range o.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
}

// WriteJSON writes the overview as one indented JSON document.
func (o *Overview) WriteJSON(w io.Writer) error { return writeJSON(w, o) }

// Thumbnail sizes: a gallery screenshot is scaled to fit ThumbW×ThumbH
// and encoded as JPEG of ThumbQuality.
const (
	ThumbW       = 320
	ThumbH       = 200
	ThumbQuality = 70
	// maxThumbSource bounds the pixels of a screenshot the report
	// decodes (checked from the PNG header first).
	maxThumbSource = 8192 * 8192
)

// thumb is one thumbnail: a data: URI and its size.
type thumb struct {
	URI  string
	W, H int
}

// LoadImages reads the gallery's screenshots from store and makes their
// thumbnails, once per blob (a screenshot two steps share is one image
// in the page). A screenshot that cannot be read or decoded is left out
// with a note; the step shows its plan and action without it.
func (o *Overview) LoadImages(ctx context.Context, store *blob.Store) error {
	o.images = map[string]thumb{}
	bad := 0
	for _, g := range o.Gallery {
		for _, s := range g.Steps {
			if _, ok := o.images[s.Image]; ok || s.Image == "" {
				continue
			}
			th, err := makeThumb(ctx, store, s.Image)
			if err != nil {
				if ctx.Err() != nil {
					return fmt.Errorf("run report: %w", ctx.Err())
				}
				bad++
				th = thumb{}
			}
			o.images[s.Image] = th
		}
	}
	if bad > 0 {
		o.Notes = append(o.Notes, fmt.Sprintf("%d screenshot(s) of the gallery could not be read from the blob store or decoded: shown without an image.", bad))
	}
	return nil
}

func makeThumb(ctx context.Context, store *blob.Store, key string) (thumb, error) {
	data, err := store.GetBytes(ctx, key)
	if err != nil {
		return thumb{}, err
	}
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return thumb{}, err
	}
	if cfg.Width*cfg.Height > maxThumbSource || cfg.Width <= 0 || cfg.Height <= 0 {
		return thumb{}, fmt.Errorf("screenshot %s is %d×%d pixels, more than the report decodes", key, cfg.Width, cfg.Height)
	}
	img, err := png.Decode(bytes.NewReader(data))
	if err != nil {
		return thumb{}, err
	}
	w, h := imaging.Fit(cfg.Width, cfg.Height, ThumbW, ThumbH)
	var buf bytes.Buffer
	if err := jpeg.Encode(&buf, imaging.Scale(img, w, h), &jpeg.Options{Quality: ThumbQuality}); err != nil {
		return thumb{}, err
	}
	return thumb{URI: "data:image/jpeg;base64," + base64.StdEncoding.EncodeToString(buf.Bytes()), W: w, H: h}, nil
}
