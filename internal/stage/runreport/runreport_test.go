package runreport_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/html"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/advantage"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/internal/stage/runreport"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

var judgeCommand = judge.Command()

// The two runs of the test, in one data directory: the run and a baseline
// with a weaker planner. Both judged; only the run gets a shard set.
var (
	runSpec = pipetest.Spec{
		Tasks: []string{"S01", "S02", "S03"}, Samples: 2, Group: 2, Seed: 3, Run: "report-run", Judge: &judgeCommand,
		Sim: `{"models": {"planner": {"default_skill": 0.9, "skill": {}}}}`,
	}
	baseSpec = pipetest.Spec{
		Tasks: []string{"S01", "S02", "S03"}, Samples: 2, Group: 2, Seed: 5, Run: "report-base", Judge: &judgeCommand,
		Sim: `{"models": {"planner": {"default_skill": 0.4, "skill": {}}}}`,
	}
)

// expected are the figures recomputed here from the stream's trajectories
// and judgements, by the documented definitions, without the package's
// code.
type expected struct {
	trajectories, successes, scored, envErrors int
	rate, averageAtK, passAtK, meanSteps       float64
	outcomes                                   map[string]int
	steps                                      map[int]int
	decisions                                  map[traj.Decision]int
	tp, fp, fn                                 int
	perVM                                      map[string]int
}

func recompute(trs []*traj.Trajectory, judged []*traj.Judged) expected {
	e := expected{outcomes: map[string]int{}, steps: map[int]int{}, decisions: map[traj.Decision]int{}, perVM: map[string]int{}}
	type task struct{ n, ok int }
	tasks := map[string]*task{}
	stepSum, stepN := 0, 0
	for _, t := range trs {
		e.trajectories++
		e.outcomes[string(t.Outcome.Kind)]++
		e.perVM[t.VM]++
		if tasks[t.Task.ID] == nil {
			tasks[t.Task.ID] = &task{}
		}
		if t.Outcome.Kind == traj.OutcomeEnvError {
			e.envErrors++
			continue
		}
		e.steps[len(t.Steps)]++
		stepSum += len(t.Steps)
		stepN++
		if t.Eval == nil || t.Eval.Error != "" || len(t.Eval.Unsupported) > 0 {
			continue
		}
		e.scored++
		tasks[t.Task.ID].n++
		if t.Eval.Passed {
			e.successes++
			tasks[t.Task.ID].ok++
		}
	}
	if e.scored > 0 {
		e.rate = float64(e.successes) / float64(e.scored)
	}
	if stepN > 0 {
		e.meanSteps = float64(stepSum) / float64(stepN)
	}
	scoredTasks := 0
	for _, k := range tasks {
		if k.n == 0 {
			continue
		}
		scoredTasks++
		e.averageAtK += float64(k.ok) / float64(k.n)
		if k.ok > 0 {
			e.passAtK++
		}
	}
	if scoredTasks > 0 {
		e.averageAtK /= float64(scoredTasks)
		e.passAtK /= float64(scoredTasks)
	}
	for _, j := range judged {
		d := j.Judgement.Decision
		e.decisions[d]++
		ev := j.Trajectory.Eval
		if d == traj.NotJudged || ev == nil || ev.Error != "" || len(ev.Unsupported) > 0 {
			continue
		}
		switch clean := d == traj.CleanSuccess; {
		case clean && ev.Passed:
			e.tp++
		case clean:
			e.fp++
		case ev.Passed:
			e.fn++
		}
	}
	return e
}

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9 }

// cli runs cmd with args as its main function does and returns stdout.
func cli(t *testing.T, cmd service.Command, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if code := service.MainContext(ctx, cmd, args, &out, &errb); code != 0 {
		t.Fatalf("%s %v: exit %d\n%s", cmd.Name, args, code, errb.String())
	}
	return out.String()
}

// TestAcceptReportMatchesStream runs two small simulated runs with the judge
// (and advantage for the first), then `rollout report` on each: its JSON
// figures equal those recomputed from the stream, and its HTML page parses,
// embeds its plots and shows the figures.
func TestAcceptReportMatchesStream(t *testing.T) {
	dir := t.TempDir()
	run := pipetest.Run(t, dir, runSpec)
	base := pipetest.Run(t, dir, baseSpec)
	cli(t, advantage.Command(), "--data", dir, "--log-level", "warn", "--drain", "--runs", runSpec.Run)

	cases := []struct {
		name     string
		p        *pipetest.Pipeline
		baseline *pipetest.Pipeline
		shards   bool
	}{
		{"run with baseline and shards", run, base, true},
		{"baseline alone", base, nil, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			page := filepath.Join(t.TempDir(), "report.html")
			args := []string{"report", "--data", dir, "--log-level", "warn", "--run", c.p.Spec.Run, "--json", "--out", page}
			if c.baseline != nil {
				args = append(args, "--baseline", c.baseline.Spec.Run)
			}
			out := cli(t, rollout.Command(), args...)
			var r runreport.Report
			if err := json.Unmarshal([]byte(out), &r); err != nil {
				t.Fatalf("report JSON: %v\n%s", err, out)
			}
			want := recompute(c.p.Trajectories, c.p.Judged)
			checkFigures(t, &r, want)
			if c.baseline != nil {
				checkBaseline(t, &r, want, recompute(c.baseline.Trajectories, nil))
			} else if r.Baseline != nil {
				t.Errorf("baseline figures without --baseline: %+v", r.Baseline)
			}
			checkShards(t, &r, c.shards)
			checkPage(t, page, &r, want)
			checkGallery(t, &r, c.p.Trajectories)
		})
	}

	// A range: both runs, oldest first; one app; none since a later time;
	// the flags that do not go together.
	t.Run("range", func(t *testing.T) {
		out := cli(t, rollout.Command(), "report", "--data", dir, "--log-level", "warn", "--runs", "report-*", "--app", "ChimeraX", "--json")
		var o runreport.Overview
		if err := json.Unmarshal([]byte(out), &o); err != nil {
			t.Fatalf("range JSON: %v", err)
		}
		if fmt.Sprint(o.Runs) != fmt.Sprint([]string{runSpec.Run, baseSpec.Run}) && fmt.Sprint(o.Runs) != fmt.Sprint([]string{baseSpec.Run, runSpec.Run}) {
			t.Errorf("runs %v, want both", o.Runs)
		}
		if len(o.Columns) != 2 || len(o.Trend) != 2 || len(o.Reports) != 2 {
			t.Errorf("%d columns, %d trend points, %d reports; want 2 each", len(o.Columns), len(o.Trend), len(o.Reports))
		}
		for _, p := range o.Trend {
			want := recompute(map[string]*pipetest.Pipeline{runSpec.Run: run, baseSpec.Run: base}[p.Run].Trajectories, nil)
			if !near(p.Success, want.rate) || !near(p.AverageAtK, want.averageAtK) || !near(p.PassAtK, want.passAtK) {
				t.Errorf("%s: success %v, Average@K %v, Pass@K %v; the stream: %v, %v, %v", p.Run, p.Success, p.AverageAtK, p.PassAtK,
					want.rate, want.averageAtK, want.passAtK)
			}
		}
		for _, c := range []struct {
			name string
			args []string
			code int
			msg  string
		}{
			{"another app", []string{"--runs", "report-*", "--app", "KAlgebra"}, 1, "no run on the stream matches"},
			{"since later", []string{"--since", "2100-01-01"}, 1, "no run on the stream matches"},
			{"bad since", []string{"--since", "yesterday"}, 2, "want a date"},
			{"run and runs", []string{"--run", runSpec.Run, "--runs", "report-*"}, 2, "one or the other"},
			{"baseline of a range", []string{"--runs", "report-*", "--baseline", baseSpec.Run}, 2, "--baseline compares one run"},
			{"bad pattern", []string{"--runs", "report-["}, 1, "syntax error in pattern"},
		} {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			var stdout, stderr bytes.Buffer
			code := service.MainContext(ctx, rollout.Command(), append([]string{"report", "--data", dir, "--log-level", "warn"}, c.args...), &stdout, &stderr)
			cancel()
			if code != c.code || !strings.Contains(stderr.String(), c.msg) {
				t.Errorf("%s: exit %d, want %d with %q:\n%s", c.name, code, c.code, c.msg, stderr.String())
			}
		}
	})
}

// checkGallery: the gallery's steps point where the executed actions
// point, in the screenshot's pixels (uitars.Screen.Pixel), and name
// their trajectory's decision class.
func checkGallery(t *testing.T, r *runreport.Report, trs []*traj.Trajectory) {
	t.Helper()
	byID := map[string]*traj.Trajectory{}
	for _, tr := range trs {
		byID[tr.ID] = tr
	}
	points := 0
	for _, g := range r.Gallery {
		tr := byID[g.ID]
		if tr == nil || len(g.Steps) != len(tr.Steps) {
			t.Errorf("gallery trajectory %s: not the stream's, or its steps differ", g.ID)
			continue
		}
		for i, st := range g.Steps {
			s := tr.Steps[i]
			a := s.Candidates[s.Executed].Action
			var want [][2]int
			if a != nil {
				for _, p := range []*traj.Point{a.Point, a.Start, a.End} {
					if p != nil {
						x, y := uitars.Screen{W: s.Screenshot.Width, H: s.Screenshot.Height}.Pixel(*p)
						want = append(want, [2]int{x, y})
					}
				}
			}
			if fmt.Sprint(st.Points) != fmt.Sprint(want) || st.Image != s.Screenshot.SHA256 || st.Code != s.Code {
				t.Errorf("gallery %s step %d: points %v, image %s; the stream: %v, %s", g.ID, i, st.Points, st.Image, want, s.Screenshot.SHA256)
			}
			points += len(want)
		}
	}
	if points == 0 {
		t.Error("no gallery step points anywhere")
	}
}

func checkFigures(t *testing.T, r *runreport.Report, want expected) {
	t.Helper()
	o := r.Overall
	if r.Trajectories != want.trajectories || o.Episodes != want.trajectories || r.LedgerEpisodes != want.trajectories {
		t.Errorf("trajectories %d, episodes %d, ledger %d; want %d", r.Trajectories, o.Episodes, r.LedgerEpisodes, want.trajectories)
	}
	if o.Successes != want.successes || o.EnvErrors != want.envErrors {
		t.Errorf("successes %d, env errors %d; want %d, %d", o.Successes, o.EnvErrors, want.successes, want.envErrors)
	}
	for name, got := range map[string][2]float64{
		"success rate": {o.Rate, want.rate}, "Average@K": {o.AverageAtK, want.averageAtK},
		"Pass@K": {o.PassAtK, want.passAtK}, "mean steps": {o.MeanSteps, want.meanSteps},
	} {
		if !near(got[0], got[1]) {
			t.Errorf("%s = %v, want %v", name, got[0], got[1])
		}
	}
	if fmt.Sprint(o.Outcomes) != fmt.Sprint(want.outcomes) {
		t.Errorf("outcomes %v, want %v", o.Outcomes, want.outcomes)
	}
	steps := map[int]int{}
	for _, c := range r.Steps {
		steps[c.Value] = c.N
	}
	if fmt.Sprint(steps) != fmt.Sprint(want.steps) {
		t.Errorf("steps histogram %v, want %v", steps, want.steps)
	}
	perVM := map[string]int{}
	for _, v := range r.VMs.PerVM {
		perVM[v.VM] = v.Episodes
	}
	if fmt.Sprint(perVM) != fmt.Sprint(want.perVM) || len(r.VMs.Episodes) != want.trajectories {
		t.Errorf("episodes per VM %v (%d on the timeline), want %v", perVM, len(r.VMs.Episodes), want.perVM)
	}
	if r.VMs.Utilisation <= 0 || r.VMs.Utilisation > 1 {
		t.Errorf("VM utilisation %v, want in (0, 1]", r.VMs.Utilisation)
	}
	if r.Judge == nil {
		t.Fatal("no judge figures")
	}
	jo := r.Judge.Overall
	for _, d := range traj.Decisions {
		if jo.Decisions[d] != want.decisions[d] {
			t.Errorf("decision %s: %d, want %d", d, jo.Decisions[d], want.decisions[d])
		}
	}
	if jo.TP != want.tp || jo.FP != want.fp || jo.FN != want.fn {
		t.Errorf("TP/FP/FN %d/%d/%d, want %d/%d/%d", jo.TP, jo.FP, jo.FN, want.tp, want.fp, want.fn)
	}
	if want.tp+want.fp > 0 && (jo.Precision == nil || !near(*jo.Precision, float64(want.tp)/float64(want.tp+want.fp))) {
		t.Errorf("precision %v, want %d/%d", jo.Precision, want.tp, want.tp+want.fp)
	}
	if want.tp+want.fn > 0 && (jo.Recall == nil || !near(*jo.Recall, float64(want.tp)/float64(want.tp+want.fn))) {
		t.Errorf("recall %v, want %d/%d", jo.Recall, want.tp, want.tp+want.fn)
	}
	if r.Plans.Sampled == 0 || r.Latency.Plan.Mean <= 0 {
		t.Errorf("plans %+v, plan latency %+v: want sampled steps and a plan latency", r.Plans, r.Latency.Plan)
	}
}

func checkBaseline(t *testing.T, r *runreport.Report, run, base expected) {
	t.Helper()
	b := r.Baseline
	if b == nil {
		t.Fatal("no baseline figures")
	}
	o := b.Overall
	if o.Rate == nil || o.BaselineRate == nil || o.RateDelta == nil || o.AverageDelta == nil {
		t.Fatalf("overall comparison %+v has missing figures", o)
	}
	if !near(*o.BaselineRate, base.rate) || !near(*o.BaselineAverage, base.averageAtK) ||
		!near(*o.RateDelta, run.rate-base.rate) || !near(*o.AverageDelta, run.averageAtK-base.averageAtK) {
		t.Errorf("comparison %+v; want baseline rate %v, Average@K %v, deltas %v, %v", o, base.rate, base.averageAtK,
			run.rate-base.rate, run.averageAtK-base.averageAtK)
	}
	if len(b.Apps) != 1 || b.Apps[0].App != "ChimeraX" {
		t.Errorf("apps compared %+v, want ChimeraX", b.Apps)
	}
}

func checkShards(t *testing.T, r *runreport.Report, want bool) {
	t.Helper()
	s := r.Shards
	if !want {
		if s != nil {
			t.Errorf("shard figures for a run no set lists: %+v", s)
		}
		return
	}
	if s == nil || s.Rows == 0 || s.Groups == 0 {
		t.Fatalf("shard figures %+v, want the run's rows", s)
	}
	sum := func(c []int) int {
		n := 0
		for _, x := range c {
			n += x
		}
		return n
	}
	if sum(s.Rewards.Counts) != s.Rows || sum(s.Advantages.Counts) != s.Rows {
		t.Errorf("histograms hold %d and %d rows, want %d", sum(s.Rewards.Counts), sum(s.Advantages.Counts), s.Rows)
	}
	if !near(s.ZeroVarianceShare, float64(s.ZeroVarianceGroups)/float64(s.Groups)) {
		t.Errorf("zero-variance share %v of %d/%d", s.ZeroVarianceShare, s.ZeroVarianceGroups, s.Groups)
	}
}

func checkPage(t *testing.T, path string, r *runreport.Report, want expected) {
	t.Helper()
	info, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode().Perm() != blob.FileMode() {
		t.Errorf("page mode %v, want %v", info.Mode().Perm(), blob.FileMode())
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	doc, err := html.Parse(bytes.NewReader(raw))
	if err != nil {
		t.Fatalf("page does not parse as HTML: %v", err)
	}
	pg := parsePage(t, doc)
	plots := 5 // success, steps, outcomes, VM timeline, latency
	if r.Judge != nil {
		plots++
	}
	if r.Shards != nil {
		plots += 4 // rewards, advantages, advantage spread, reward spread
	}
	if r.Baseline != nil {
		plots++
	}
	if len(r.Planner.CompletionTokens.Counts) > 0 {
		plots++
	}
	if pg.plots != plots {
		t.Errorf("page embeds %d plots, want %d", pg.plots, plots)
	}
	tables := pg.tables
	var data runreport.Overview
	if err := json.Unmarshal([]byte(pg.data), &data); err != nil {
		t.Fatalf("the page's report-data JSON: %v", err)
	}
	if len(data.Reports) != 1 || data.Reports[0].Trajectories != r.Trajectories || data.Reports[0].Overall.Rate != r.Overall.Rate {
		t.Errorf("the page's JSON holds %d reports, want the one of --json", len(data.Reports))
	}
	if strings.Contains(string(raw), "url(http") || strings.Contains(string(raw), "@import") {
		t.Error("page's CSS refers to an external asset")
	}
	pct := func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) }
	for table, figures := range map[string][]string{
		"apps":     {pct(want.rate), pct(want.averageAtK), pct(want.passAtK), fmt.Sprintf("%.2f", want.meanSteps)},
		"outcomes": keysOf(want.outcomes),
		"vms":      keysOf(want.perVM),
		"decisions": {string(traj.CleanSuccess), fmt.Sprint(want.decisions[traj.CleanSuccess]),
			string(traj.Failure), fmt.Sprint(want.decisions[traj.Failure])},
		"latency": {"observe", "plan", "ground", "exec"},
	} {
		got, ok := tables[table]
		if !ok {
			t.Errorf("page has no table %q", table)
			continue
		}
		for _, f := range figures {
			if !strings.Contains(got, f) {
				t.Errorf("table %q does not show %q:\n%s", table, f, got)
			}
		}
	}
	if _, ok := tables["baseline"]; ok != (r.Baseline != nil) {
		t.Errorf("baseline table shown %v, want %v", ok, r.Baseline != nil)
	}
}

// page is what a report page holds: its plots, its tables' text by
// data-table name (the first of each name), its embedded JSON, its
// thumbnails and its gallery anchors.
type page struct {
	plots   int
	tables  map[string]string
	data    string
	anchors map[string]bool
	links   []string
}

// parsePage walks a report page, failing the test on an external or
// scripted asset: the page holds two scripts, the figures as
// application/json and the sorter of its tables, both inline.
func parsePage(t *testing.T, doc *html.Node) page {
	t.Helper()
	pg := page{tables: map[string]string{}, anchors: map[string]bool{}}
	scripts := 0
	var walk func(n *html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			attr := map[string]string{}
			for _, a := range n.Attr {
				attr[a.Key] = a.Val
			}
			switch n.Data {
			case "script":
				scripts++
				if _, ok := attr["src"]; ok {
					t.Errorf("page loads a script from %q", attr["src"])
				}
				if attr["id"] == "report-data" {
					if attr["type"] != "application/json" {
						t.Errorf("report-data has type %q", attr["type"])
					}
					pg.data = text(n)
				}
			case "link", "img", "iframe", "object", "embed":
				t.Errorf("page has a <%s> element: want no external asset", n.Data)
			case "table":
				if name := attr["data-table"]; name != "" {
					if _, ok := pg.tables[name]; !ok {
						pg.tables[name] = text(n)
					}
				}
			case "div":
				if attr["data-plot"] != "" && strings.Contains(renderNode(n), "<svg") {
					pg.plots++
				}
			case "a":
				if h := attr["href"]; strings.HasPrefix(h, "#") {
					pg.links = append(pg.links, h[1:])
				}
			}
			if id := attr["id"]; id != "" {
				if pg.anchors[id] {
					t.Errorf("two elements have id %q", id)
				}
				pg.anchors[id] = true
			}
			for _, k := range []string{"href", "src"} {
				if strings.Contains(attr[k], "://") {
					t.Errorf("page refers to %s=%q", k, attr[k])
				}
			}
		}
		for c := range n.ChildNodes() {
			walk(c)
		}
	}
	walk(doc)
	if scripts != 2 {
		t.Errorf("page has %d scripts, want 2 (the figures as JSON, the table sorter)", scripts)
	}
	for _, l := range pg.links {
		if !pg.anchors[l] {
			t.Errorf("link #%s has no target in the page", l)
		}
	}
	return pg
}

func renderNode(n *html.Node) string {
	var b bytes.Buffer
	if err := html.Render(&b, n); err != nil {
		return ""
	}
	return b.String()
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// text is the text content of n.
func text(n *html.Node) string {
	var b strings.Builder
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.TextNode {
			b.WriteString(n.Data)
			b.WriteByte(' ')
		}
		for c := range n.ChildNodes() {
			walk(c)
		}
	}
	walk(n)
	return b.String()
}
