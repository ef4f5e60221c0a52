package nightly

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/browser"
	"github.com/codapipe/codapipe/internal/infra/browser/browsertest"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/runreport"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestAcceptReportNights runs three simulated nights of two apps, each
// with its own planner checkpoint and seed, and reads the report page the
// third night writes (its embedded JSON): the trend has one point per
// night and app, equal to the nights' summaries (rollout's success,
// Average@K, Pass@K, VM utilisation and identical-plan share, the judge's
// precision, recall, calls and latency, the shard set's rows and
// zero-variance share, the SFT set's samples); the
// task grid equals the successes recomputed from the stream's
// trajectories; the gallery holds trajectories of the latest night with
// the judge's decisions from the archive, and the page links to them and
// carries their thumbnails. Then Chromium renders the first and the third
// night's pages: no console error, every plot drawn, every thumbnail
// loaded, the tables sort, and the page is as tall as its content.
func TestAcceptReportNights(t *testing.T) {
	if raceEnabled {
		t.Skip("three nights of two apps: run without the race detector (make test's acceptance pass)")
	}
	apps := []string{"ChimeraX", "KAlgebra"}
	dir := t.TempDir()
	tasks := filepath.Join(t.TempDir(), "tasks")
	if err := simtasks.Write(tasks, "ChimeraX/S03", "ChimeraX/S12", "KAlgebra/S01", "KAlgebra/S02"); err != nil {
		t.Fatal(err)
	}
	nights := []string{"2026-11-24", "2026-11-25", "2026-11-26"}
	summaries := map[string]*Summary{}
	for i, night := range nights {
		o := Options{Apps: apps, Night: night, Group: 2, Samples: 2, Sim: true, VMs: 4, Seed: int64(i + 1),
			TimeScale: 0.0005, Workers: false,
			RolloutArgs: fmt.Sprintf("--tasks %s --planner-checkpoint sim-step-%d", tasks, 100*(i+1)),
			JudgeArgs:   "--max-frames 4 --rule majority"}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		common := &service.Common{DataDir: dir, LogLevel: "warn", LogFormat: "text"}
		common.NATS.Timeout = 10 * time.Second
		env := service.NewEnv("nightly", common, slog.New(slog.DiscardHandler), io.Discard, io.Discard)
		s, err := Execute(ctx, env, o)
		env.Close()
		cancel()
		if err != nil {
			t.Fatalf("night %s: %v", night, err)
		}
		if s.Report != filepath.Join(dir, "nightly", night, "report.html") {
			t.Fatalf("night %s: report %q", night, s.Report)
		}
		summaries[night] = s
	}

	page := summaries[nights[2]].Report
	raw, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	o := pageData(t, raw)
	common := &service.Common{DataDir: dir, LogLevel: "warn"}
	_, b, store := pipetest.Open(t, common)
	trs := streamTrajectories(t, b)
	archived, damaged := pipetest.Archived(t, store.Bucket())
	if len(damaged) > 0 {
		t.Fatalf("damaged archive documents: %v", damaged)
	}
	judgedAs := map[string]traj.Decision{}
	for _, d := range archived {
		judgedAs[d.Judgement.TrajectoryID] = d.Judgement.Decision
	}

	// Columns and runs: one column per night (its checkpoint), two runs
	// each, oldest first.
	if len(o.Columns) != 3 || len(o.Runs) != 6 || len(o.Trend) != 6 {
		t.Fatalf("columns %d, runs %d, trend points %d; want 3, 6, 6", len(o.Columns), len(o.Runs), len(o.Trend))
	}
	for i, c := range o.Columns {
		want := fmt.Sprintf("%s · sim-step-%d", nights[i], 100*(i+1))
		if c.Label != want || len(c.Runs) != 2 {
			t.Errorf("column %d: %q with runs %v, want %q with the night's two runs", i, c.Label, c.Runs, want)
		}
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	// The steps' plan and ground times by run, for their medians.
	planMS, groundMS := map[string][]float64{}, map[string][]float64{}
	for _, tr := range trs {
		for _, st := range tr.Steps {
			planMS[tr.Run] = append(planMS[tr.Run], float64(st.Timings.PlanMS))
			groundMS[tr.Run] = append(groundMS[tr.Run], float64(st.Timings.GroundMS))
		}
	}
	points := 0
	for _, p := range o.Trend {
		night := o.Columns[p.Column].Night
		s := summaries[night]
		if s == nil {
			t.Errorf("trend point of night %q, which did not run", night)
			continue
		}
		i := slices.IndexFunc(s.Apps, func(a App) bool { return a.App == p.App })
		if i < 0 || s.Apps[i].Run != p.Run {
			t.Errorf("trend point %s/%s: not in the night's summary", night, p.App)
			continue
		}
		a := s.Apps[i]
		points++
		ro := a.Rollout
		if !near(p.Success, ro.Rate) || !near(p.AverageAtK, ro.AverageAtK) || !near(p.PassAtK, ro.PassAtK) || p.Episodes != ro.Episodes+ro.Skipped {
			t.Errorf("%s: success %v, Average@K %v, Pass@K %v, episodes %d; the rollout summary: %v, %v, %v, %d", p.Run,
				p.Success, p.AverageAtK, p.PassAtK, p.Episodes, ro.Rate, ro.AverageAtK, ro.PassAtK, ro.Episodes+ro.Skipped)
		}
		if !near(p.Utilisation, ro.Utilisation) || !near(p.IdenticalPlans, ro.IdenticalPlansShare) {
			t.Errorf("%s: VM utilisation %v, identical plans %v; the rollout summary's %v, %v", p.Run, p.Utilisation, p.IdenticalPlans,
				ro.Utilisation, ro.IdenticalPlansShare)
		}
		j := a.Judge
		if j == nil || p.Calls == nil || !near(*p.Calls, j.CallsPerTrajectory) || !samePtr(p.Precision, j.Precision) || !samePtr(p.Recall, j.Recall) ||
			p.JudgeP50MS == nil || !near(*p.JudgeP50MS, j.LatencyMS.P50) {
			t.Errorf("%s: judge precision %v, recall %v, calls %v; the night's judge figures %+v", p.Run, p.Precision, p.Recall, p.Calls, j)
		}
		if !near(p.PlanP50MS, median(planMS[p.Run])) || !near(p.GroundP50MS, median(groundMS[p.Run])) {
			t.Errorf("%s: plan p50 %v ms, ground p50 %v ms; the stream's steps: %v, %v", p.Run, p.PlanP50MS, p.GroundP50MS,
				median(planMS[p.Run]), median(groundMS[p.Run]))
		}
		sh := a.Shards
		if sh == nil || p.Rows == nil || *p.Rows != sh.Rows || p.ZeroVariance == nil ||
			(sh.Groups > 0 && !near(*p.ZeroVariance, float64(sh.ZeroVariance)/float64(sh.Groups))) {
			t.Errorf("%s: rows %v, zero-variance share %v; the night's shard set %+v", p.Run, p.Rows, p.ZeroVariance, sh)
		}
	}
	// SFT samples: each night's set takes its two runs.
	for _, night := range nights {
		sum, want := 0, 0
		for _, p := range o.Trend {
			if o.Columns[p.Column].Night == night && p.SFTSamples != nil {
				sum += *p.SFTSamples
			}
		}
		for _, n := range summaries[night].SFT.Samples {
			want += n
		}
		if sum != want {
			t.Errorf("night %s: %d SFT samples in the trend, the night's SFT set has %d", night, sum, want)
		}
	}
	if points != 6 {
		t.Errorf("%d trend points checked against the summaries, want 6", points)
	}

	// The task grid against the stream.
	type cellKey struct{ task, night string }
	want := map[cellKey][2]int{} // successes, scored
	for _, tr := range trs {
		ev := tr.Eval
		if tr.Outcome.Kind == traj.OutcomeEnvError || ev == nil || ev.Error != "" || len(ev.Unsupported) > 0 {
			continue
		}
		k := cellKey{tr.Task.ID, strings.TrimSuffix(tr.Run, "-"+strings.ToLower(bus.AppToken(tr.Task.App)))}
		c := want[k]
		c[1]++
		if ev.Passed {
			c[0]++
		}
		want[k] = c
	}
	if len(o.Tasks.Rows) != 4 {
		t.Errorf("task grid has %d rows, want 4", len(o.Tasks.Rows))
	}
	cells := 0
	for _, row := range o.Tasks.Rows {
		for ci, c := range row.Cells {
			w, ok := want[cellKey{row.Task, o.Columns[ci].Night}]
			if c == nil || !ok {
				t.Errorf("task %s, night %s: cell %v, stream has %v", row.Task, o.Columns[ci].Night, c, ok)
				continue
			}
			cells++
			if c.Successes != w[0] || c.Scored != w[1] || c.AllSucceeded != (w[1] > 0 && w[0] == w[1]) || c.NoneSucceeded != (w[1] > 0 && w[0] == 0) {
				t.Errorf("task %s, night %s: %d/%d (all %v, none %v); the stream: %d/%d", row.Task, o.Columns[ci].Night,
					c.Successes, c.Scored, c.AllSucceeded, c.NoneSucceeded, w[0], w[1])
			}
		}
	}
	if cells != 12 {
		t.Errorf("%d task cells checked, want 12", cells)
	}

	// Each run's per-task, planner and agreement figures add up to its
	// night's figures and to the stream's and the archive's counts.
	for _, r := range o.Reports {
		var groups, zero, tp, fp, fn, tn int
		for _, tf := range r.Tasks {
			groups, zero = groups+tf.Groups, zero+tf.ZeroVarianceGroups
			if j := tf.Judge; j != nil {
				tp, fp, fn, tn = tp+j.TP, fp+j.FP, fn+j.FN, tn+j.TN
			}
		}
		if r.Shards == nil || r.Judge == nil {
			t.Errorf("%s: no shard or judge figures", r.Run)
			continue
		}
		if jo := r.Judge.Overall; groups != r.Shards.Groups || zero != r.Shards.ZeroVarianceGroups || tp != jo.TP || fp != jo.FP || fn != jo.FN || tn != jo.TN {
			t.Errorf("%s: the tasks add up to %d groups (%d zero-variance), TP/FP/FN/TN %d/%d/%d/%d; the run: %d (%d), %d/%d/%d/%d", r.Run,
				groups, zero, tp, fp, fn, tn, r.Shards.Groups, r.Shards.ZeroVarianceGroups, jo.TP, jo.FP, jo.FN, jo.TN)
		}
		plans, truncated := 0, 0
		for _, tr := range trs {
			if tr.Run != r.Run {
				continue
			}
			for _, st := range tr.Steps {
				for _, c := range st.Candidates {
					plans++
					if c.FinishReason == "length" {
						truncated++
					}
				}
			}
		}
		if r.Planner.Plans != plans || r.Planner.Truncated != truncated {
			t.Errorf("%s: %d plans, %d truncated; the stream: %d, %d", r.Run, r.Planner.Plans, r.Planner.Truncated, plans, truncated)
		}
		pairs := 0 // pairs of usable votes on one trajectory, in the archive
		for _, d := range archived {
			if d.Judgement.Run != r.Run {
				continue
			}
			n := 0
			for _, v := range d.Judgement.Votes {
				if v.Verdict != nil {
					n++
				}
			}
			pairs += n * (n - 1) / 2
		}
		got := 0
		if a := r.Agreement; a != nil {
			for i := range a.Pairs {
				for j := i; j < len(a.Pairs); j++ {
					got += a.Pairs[i][j]
				}
			}
		}
		if got != pairs {
			t.Errorf("%s: the agreement matrix counts %d pairs of votes, the archive holds %d", r.Run, got, pairs)
		}
	}

	// The gallery: the latest night's trajectories, with their judge
	// decisions, at most GalleryPerClass of each.
	if len(o.Gallery) == 0 {
		t.Fatal("empty gallery")
	}
	perClass := map[string]int{}
	for _, g := range o.Gallery {
		perClass[g.Run+" "+g.Class]++
		if !strings.HasPrefix(g.Run, nights[2]+"-") {
			t.Errorf("gallery trajectory %s is of run %s, not of the latest night", g.ID, g.Run)
		}
		if d, ok := judgedAs[g.ID]; !ok || g.Decision != d || g.Class != string(d) {
			t.Errorf("gallery trajectory %s: class %q, decision %q; the archive: %q", g.ID, g.Class, g.Decision, d)
		}
		if len(g.Steps) == 0 || !bytes.Contains(raw, []byte(`id="t-`+g.ID+`"`)) {
			t.Errorf("gallery trajectory %s: %d steps, anchor in the page: %v", g.ID, len(g.Steps), bytes.Contains(raw, []byte(`id="t-`+g.ID+`"`)))
		}
	}
	for c, n := range perClass {
		if n > runreport.GalleryPerClass {
			t.Errorf("gallery: run and class %s have %d trajectories, want at most %d", c, n, runreport.GalleryPerClass)
		}
	}

	// In Chromium: the first night's page (two runs, no trend) and the
	// third's.
	first := renderReport(t, summaries[nights[0]].Report)
	third := renderReport(t, page)
	if third.Height <= first.Height {
		t.Errorf("the third night's page is %d px tall, the first's %d: the height does not follow the content", third.Height, first.Height)
	}
}

// median interpolates linearly between the two middle values.
func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(v))
	pos := 0.5 * float64(len(s)-1)
	lo := int(pos)
	hi := min(lo+1, len(s)-1)
	return s[lo] + (s[hi]-s[lo])*(pos-float64(lo))
}

func samePtr(a, b *float64) bool {
	return (a == nil) == (b == nil) && (a == nil || math.Abs(*a-*b) < 1e-9)
}

// pageData reads a report page's embedded JSON.
func pageData(t *testing.T, raw []byte) *runreport.Overview {
	t.Helper()
	m := regexp.MustCompile(`(?s)<script type="application/json" id="report-data">(.*?)</script>`).FindSubmatch(raw)
	if m == nil {
		t.Fatal("the page has no report-data script")
	}
	var o runreport.Overview
	if err := json.Unmarshal(m[1], &o); err != nil {
		t.Fatalf("report-data: %v", err)
	}
	return &o
}

func streamTrajectories(t *testing.T, b *bus.Bus) []*traj.Trajectory {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := pipetest.ReadStream(ctx, b, bus.Raw, bus.AllSubjects(bus.Raw))
	if err != nil {
		t.Fatal(err)
	}
	var out []*traj.Trajectory
	for _, m := range msgs {
		tr, err := traj.DecodeTrajectory(m.Body)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, tr)
	}
	return out
}

// pageCheck is what the page says of itself in Chromium (checkJS).
type pageCheck struct {
	Plots, Drawn, Thumbs, Loaded, Reports, Height int
	Sorted                                        bool
}

// checkJS opens every run's section, then counts the plots and the drawn
// ones, the thumbnails and those whose image decoded, sorts the task grid
// by its first night and reads the embedded JSON.
const checkJS = `(async () => {
  for (const d of document.querySelectorAll("details")) d.open = true;
  const plots = [...document.querySelectorAll("[data-plot]")];
  const drawn = plots.filter(p => { const s = p.querySelector("svg"); if (!s) return false; const r = s.getBoundingClientRect(); return r.width > 100 && r.height > 100; });
  const shots = [...document.querySelectorAll(".shot:not(.noimg)")];
  let loaded = 0;
  for (const s of shots) {
    const url = getComputedStyle(s).backgroundImage.replace(/^url\("?/, "").replace(/"?\)$/, "");
    const img = new Image(); img.src = url;
    try { await img.decode(); if (img.naturalWidth > 0) loaded++; } catch (e) {}
  }
  const t = document.querySelector("table[data-table=tasks]");
  t.tHead.rows[0].cells[2].click();
  const vals = [...t.tBodies[0].rows].map(r => parseFloat(r.cells[2].dataset.v));
  const data = JSON.parse(document.getElementById("report-data").textContent);
  return {plots: plots.length, drawn: drawn.length, thumbs: shots.length, loaded, reports: data.reports.length,
    height: document.documentElement.scrollHeight,
    sorted: vals.length > 1 && vals.every((v, i) => i === 0 || vals[i - 1] <= v)};
})()`

// renderReport renders a report page in Chromium and checks it.
func renderReport(t *testing.T, page string) *browser.Result {
	t.Helper()
	res := browsertest.Render(t, page, browser.Options{Eval: checkJS})
	var c pageCheck
	if err := json.Unmarshal(res.Eval, &c); err != nil {
		t.Fatalf("page check: %v (%s)", err, res.Eval)
	}
	if c.Plots == 0 || c.Drawn != c.Plots || c.Thumbs == 0 || c.Loaded != c.Thumbs || !c.Sorted || c.Reports == 0 {
		t.Errorf("%s: %d plots, %d drawn; %d thumbnails, %d loaded; task grid sorted %v; %d reports in the JSON", filepath.Base(page),
			c.Plots, c.Drawn, c.Thumbs, c.Loaded, c.Sorted, c.Reports)
	}
	// The page is as tall as its content (no fixed height): what
	// Chromium lays out is the document's height (the full-page
	// screenshot of that height is internal/infra/browser's test).
	if d := res.Height - c.Height; d < -1 || d > 1 || res.Height < 2000 { // ±1: a fractional height rounds both ways
		t.Errorf("%s: laid out %d px tall, the document is %d px", filepath.Base(page), res.Height, c.Height)
	}
	t.Logf("%s in %s: %d×%d px, load %v, %d plots, %d thumbnails", filepath.Base(page), res.Version, res.Width, res.Height, res.Load, c.Plots, c.Thumbs)
	return res
}
