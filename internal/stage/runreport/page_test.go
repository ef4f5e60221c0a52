package runreport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/browser"
	"github.com/codapipe/codapipe/internal/infra/browser/browsertest"
	"github.com/codapipe/codapipe/internal/stage/runreport"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// pageSpec is the corpus the 1,000-trajectory page is made of: 16 judged
// trajectories of the simulator, each repeated as other tasks, episodes
// and VMs.
var pageSpec = pipetest.Spec{
	Tasks: []string{"S01", "S02", "S03", "S04"}, Samples: 4, Group: 2, Seed: 7, Run: "page-night", Judge: &judgeCommand,
}

// MaxPageBytes is the size a night's page must stay under (issue 38).
const MaxPageBytes = 20 << 20

// bigPage writes the report page of nights nights of two apps of
// perApp trajectories each: the corpus's trajectories repeated with new
// ids, tasks (task-r), VMs (32) and start times, with their judgements and
// the corpus's screenshots, as ChimeraX and as KAlgebra.
func bigPage(tb testing.TB, nights, perApp int) (path string, o *runreport.Overview) {
	tb.Helper()
	p := pipetest.Once(tb, pageSpec)
	byID := map[string]*traj.Judged{}
	for _, j := range p.Judged {
		byID[j.Judgement.TrajectoryID] = j
	}
	night0 := time.Date(2026, 10, 1, 2, 0, 0, 0, time.UTC)
	var reports []*runreport.Report
	for n := range nights {
		for _, app := range []string{"ChimeraX", "KAlgebra"} {
			run := fmt.Sprintf("%s-%s", night0.AddDate(0, 0, n).Format(time.DateOnly), strings.ToLower(app))
			var trs []*traj.Trajectory
			var docs []*traj.Judged
			for r := 0; len(trs) < perApp; r++ {
				for _, t := range p.Trajectories {
					if len(trs) == perApp {
						break
					}
					c := *t
					c.Run, c.ID = run, fmt.Sprintf("%s-%s-%03d", t.ID, app, r)
					c.Task.App, c.Task.ID = app, fmt.Sprintf("%s/%s-%03d", app, strings.TrimPrefix(t.Task.ID, "ChimeraX/"), r)
					c.VM = fmt.Sprintf("%s-%d", t.VM, r%8)
					shift := time.Duration(n)*24*time.Hour + time.Duration(r/8)*3*time.Minute
					c.StartedAt, c.EndedAt = t.StartedAt.Add(shift), t.EndedAt.Add(shift)
					trs = append(trs, &c)
					if j := byID[t.ID]; j != nil {
						d := *j
						d.Judgement.Run, d.Judgement.App = run, app
						d.Judgement.TrajectoryID, d.Judgement.TaskID, d.Trajectory = c.ID, c.Task.ID, c
						docs = append(docs, &d)
					}
				}
			}
			reports = append(reports, runreport.FromTrajectories(run, trs, docs))
		}
	}
	o = runreport.OverviewOf(reports)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := o.LoadImages(ctx, p.Store(tb)); err != nil {
		tb.Fatal(err)
	}
	path = filepath.Join(tb.TempDir(), "nights.html")
	if err := o.WriteHTMLFile(path, time.Unix(0, 0)); err != nil {
		tb.Fatal(err)
	}
	return path, o
}

// renderJS counts the page's plots and those drawn (every run's section
// opened first).
const renderJS = `(() => {
  for (const d of document.querySelectorAll("details")) d.open = true;
  const plots = [...document.querySelectorAll("[data-plot]")];
  return {plots: plots.length, drawn: plots.filter(p => { const s = p.querySelector("svg"); if (!s) return false; const r = s.getBoundingClientRect(); return r.width > 100 && r.height > 100; }).length};
})()`

// render renders path in Chromium (browsertest.Render: no error in the
// page) and checks every plot is drawn.
func render(tb testing.TB, path string) *browser.Result {
	tb.Helper()
	res := browsertest.Render(tb, path, browser.Options{Eval: renderJS})
	var c struct{ Plots, Drawn int }
	if err := json.Unmarshal(res.Eval, &c); err != nil || c.Plots == 0 || c.Drawn != c.Plots {
		tb.Errorf("%d plots, %d drawn (%v)", c.Plots, c.Drawn, err)
	}
	return res
}

// TestAcceptReportPageSize: the page of a night of 1,000 trajectories
// (two apps, 500 each), and the page nightly writes after a month of
// such nights, with their galleries' thumbnails, stay under 20 MB and
// render in Chromium without an error (BenchmarkReportPage measures how
// fast).
func TestAcceptReportPageSize(t *testing.T) {
	for _, c := range []struct {
		name   string
		nights int
	}{{"one night", 1}, {"a month", 30}} {
		t.Run(c.name, func(t *testing.T) {
			path, o := bigPage(t, c.nights, 500)
			info, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if info.Size() > MaxPageBytes {
				t.Errorf("the page is %d bytes, more than %d", info.Size(), MaxPageBytes)
			}
			detailed := 2 * min(c.nights, runreport.DetailColumns)
			if len(o.Runs) != 2*c.nights || len(o.Reports) != detailed || len(o.Trend) != 2*c.nights || len(o.Gallery) == 0 {
				t.Errorf("%d runs, %d reports, %d trend points, %d in the gallery; want %d, %d, %d, some", len(o.Runs), len(o.Reports),
					len(o.Trend), len(o.Gallery), 2*c.nights, detailed, 2*c.nights)
			}
			var text strings.Builder
			o.Print(&text)
			if n, want := strings.Count(text.String(), ", trend only): "), 2*(c.nights-min(c.nights, runreport.DetailColumns)); n != want {
				t.Errorf("the text has %d lines of older runs, want %d:\n%s", n, want, text.String())
			}
			for _, r := range o.Reports {
				if r.Trajectories != 500 || len(r.Tasks) != 500/pageSpec.Samples {
					t.Errorf("%s: %d trajectories, %d tasks", r.Run, r.Trajectories, len(r.Tasks))
				}
			}
			res := render(t, path)
			t.Logf("%d night(s) of 1,000 trajectories: %d bytes, %d px tall, load %v in %s", c.nights, info.Size(), res.Height, res.Load, res.Version)
		})
	}
}

// BenchmarkReportPage measures the page of a night of 1,000
// trajectories (two apps) and of a month of them: its size, the time to
// write it (figures, plots, thumbnails) and the time Chromium takes to
// load it.
func BenchmarkReportPage(b *testing.B) {
	pipetest.Once(b, pageSpec) // the corpus, made once, not measured
	for _, c := range []struct {
		name   string
		nights int
	}{{"night", 1}, {"month", 30}} {
		b.Run(c.name, func(b *testing.B) {
			var size int64
			var write, load time.Duration
			for range b.N {
				start := time.Now()
				path, _ := bigPage(b, c.nights, 500)
				write += time.Since(start)
				info, err := os.Stat(path)
				if err != nil {
					b.Fatal(err)
				}
				size = info.Size()
				load += render(b, path).Load
			}
			b.ReportMetric(float64(size)/(1<<20), "report.page_mb_"+c.name)
			b.ReportMetric(float64(write.Milliseconds())/float64(b.N), "report.write_ms_"+c.name)
			b.ReportMetric(float64(load.Milliseconds())/float64(b.N), "report.load_ms_"+c.name)
		})
	}
}
