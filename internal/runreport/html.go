package runreport

import (
	"fmt"
	"html/template"
	"io"
	"os"
	"path/filepath"
	"sort"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/pkg/traj"
)

// page is what the HTML template gets: the report and its plots.
type page struct {
	R         *Report
	Generated string
	Outcomes  []namedCount
	Decisions []namedCount
	Plots     map[string]template.HTML
}

// namedCount is a named count of the page's tables.
type namedCount struct {
	Name string
	N    int
}

// WriteHTML writes the report as one self-contained HTML page: inline CSS,
// tables, and plots as inline SVG (gonum.org/v1/plot); no external asset.
// now is the time the page says it was generated.
func (r *Report) WriteHTML(w io.Writer, now time.Time) error {
	pg := page{R: r, Generated: now.UTC().Format(time.RFC3339), Plots: map[string]template.HTML{}}
	for _, k := range sortedKeys(r.Overall.Outcomes) {
		pg.Outcomes = append(pg.Outcomes, namedCount{k, r.Overall.Outcomes[k]})
	}
	if r.Judge != nil {
		for _, d := range traj.Decisions {
			pg.Decisions = append(pg.Decisions, namedCount{string(d), r.Judge.Overall.Decisions[d]})
		}
	}
	if err := r.plots(pg.Plots); err != nil {
		return fmt.Errorf("run report: %w", err)
	}
	if err := pageTemplate.Execute(w, pg); err != nil {
		return fmt.Errorf("run report: write HTML: %w", err)
	}
	return nil
}

// WriteHTMLFile writes the page to path (mode blob.FileMode()) through a
// temporary file renamed into place.
func (r *Report) WriteHTMLFile(path string, now time.Time) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return fmt.Errorf("run report: %w", err)
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err = r.WriteHTML(f, now); err != nil {
		return err
	}
	if err = blob.Publish(f); err != nil {
		return fmt.Errorf("run report: %w", err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("run report: %w", err)
	}
	if err = os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("run report: %w", err)
	}
	return nil
}

// plots renders the page's plots by name.
func (r *Report) plots(out map[string]template.HTML) error {
	const w, h = 13 * vg.Centimeter, 7 * vg.Centimeter
	add := func(name string, p *plot.Plot, err error, pw, ph vg.Length) error {
		if err != nil {
			return err
		}
		s, err := svg(p, pw, ph)
		if err != nil {
			return err
		}
		out[name] = s
		return nil
	}
	var names []string
	var rate, avg, pass []float64
	if len(r.ByApp) != 1 { // with one app "overall" is that app
		names = []string{"overall"}
		rate, avg, pass = []float64{r.Overall.Rate}, []float64{r.Overall.AverageAtK}, []float64{r.Overall.PassAtK}
	}
	for _, a := range r.ByApp {
		names = append(names, traj.PrintName(a.App))
		rate, avg, pass = append(rate, a.Rate), append(avg, a.AverageAtK), append(pass, a.PassAtK)
	}
	k := fmt.Sprint(r.Samples)
	p, err := groupedBars("Success by app", "", rateAxis, names, []string{"success rate", "Average@" + k, "Pass@" + k}, [][]float64{rate, avg, pass})
	if err := add("success", p, err, w, h); err != nil {
		return err
	}
	var sn []string
	var sv []float64
	for _, c := range r.Steps {
		sn, sv = append(sn, fmt.Sprint(c.Value)), append(sv, float64(c.N))
	}
	if len(sn) > 0 {
		p, err = groupedBars("Steps per episode", "episodes", countAxis, sn, []string{"episodes"}, [][]float64{sv})
		p.X.Label.Text = "steps"
		if err := add("steps", p, err, w, h); err != nil {
			return err
		}
	}
	var on []string
	var ov []float64
	for _, k := range sortedKeys(r.Overall.Outcomes) {
		on, ov = append(on, k), append(ov, float64(r.Overall.Outcomes[k]))
	}
	p, err = groupedBars("Outcome mix", "episodes", countAxis, on, []string{"episodes"}, [][]float64{ov})
	if err := add("outcomes", p, err, w, h); err != nil {
		return err
	}
	if len(r.VMs.PerVM) > 0 {
		gh := vg.Length(4.5+0.7*float64(len(r.VMs.PerVM))) * vg.Centimeter
		if r.VMs.EventDocuments > 0 {
			gh += 1.5 * vg.Centimeter // three more legend entries
		}
		if err := add("gantt", ganttPlot(r.VMs), nil, 26*vg.Centimeter, min(gh, 30*vg.Centimeter)); err != nil {
			return err
		}
	}
	l := r.Latency
	stages := []string{"observe", "plan", "ground", "exec"}
	lat := [][]float64{
		{l.Observe.Mean, l.Plan.Mean, l.Ground.Mean, l.Exec.Mean},
		{l.Observe.P50, l.Plan.P50, l.Ground.P50, l.Exec.P50},
		{l.Observe.P95, l.Plan.P95, l.Ground.P95, l.Exec.P95},
	}
	if r.Judge != nil {
		stages = append(stages, "judge")
		lat[0], lat[1], lat[2] = append(lat[0], l.Judge.Mean), append(lat[1], l.Judge.P50), append(lat[2], l.Judge.P95)
	}
	p, err = latencyDots("Latency per stage", stages, []string{"mean", "p50", "p95"}, lat)
	if err := add("latency", p, err, w, h); err != nil {
		return err
	}
	if r.Judge != nil {
		var dn []string
		var dv []float64
		short := map[traj.Decision]string{traj.CleanSuccess: "clean", traj.RedundantSuccess: "redundant", traj.NotJudged: "not judged"}
		for _, d := range traj.Decisions {
			name := string(d)
			if s, ok := short[d]; ok {
				name = s
			}
			dn, dv = append(dn, name), append(dv, float64(r.Judge.Overall.Decisions[d]))
		}
		p, err = groupedBars("Judge decisions", "trajectories", countAxis, dn, []string{"trajectories"}, [][]float64{dv})
		if err := add("decisions", p, err, w, h); err != nil {
			return err
		}
	}
	if s := r.Shards; s != nil && s.Rows > 0 {
		if err := add("rewards", histogram("Rewards of the run's shard rows", "reward", s.Rewards, blue), nil, w, h); err != nil {
			return err
		}
		if err := add("advantages", histogram("Advantages of the run's shard rows", "advantage", s.Advantages, purple), nil, w, h); err != nil {
			return err
		}
	}
	if b := r.Baseline; b != nil {
		var bn []string
		var vals [4][]float64
		for _, d := range b.rows() {
			bn = append(bn, traj.PrintName(d.App))
			for i, v := range []*float64{d.BaselineRate, d.Rate, d.BaselineAverage, d.AverageAtK} {
				vals[i] = append(vals[i], deref(v))
			}
		}
		p, err = groupedBars("Run against baseline "+traj.PrintName(b.Baseline), "", rateAxis, bn,
			[]string{"baseline success", "success", "baseline Average@" + k, "Average@" + k}, vals[:])
		if err := add("baseline", p, err, w, h); err != nil {
			return err
		}
	}
	return nil
}

func deref(p *float64) float64 {
	if p == nil {
		return 0
	}
	return *p
}

var pageTemplate = template.Must(template.New("report").Funcs(template.FuncMap{
	"pct":  func(v float64) string { return fmt.Sprintf("%.1f%%", 100*v) },
	"name": traj.PrintName, // run and app names: control and format characters quoted
	"pctp": func(v *float64) string {
		if v == nil {
			return "—"
		}
		return fmt.Sprintf("%.1f%%", 100**v)
	},
	"dpct": func(v *float64) string {
		if v == nil {
			return "—"
		}
		return fmt.Sprintf("%+.1f pts", 100**v)
	},
	"f1":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f2":  func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"ms":  func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"ts":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"dur": func(a, b time.Time) string { return b.Sub(a).Round(time.Second).String() },
	"sorted": func(m map[string]int) []string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	},
}).Parse(pageHTML))

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>codapipe run report: {{name .R.Run}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", sans-serif; margin: 2em auto; max-width: 1100px; color: #222; padding: 0 1em; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.2em; margin-top: 2em; border-bottom: 1px solid #ccc; padding-bottom: 0.2em; }
.meta { color: #555; }
table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.7em; text-align: right; }
th { background: #f3f3f3; }
td:first-child, th:first-child { text-align: left; }
.plot svg { max-width: 100%; height: auto; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.note { color: #7a5200; background: #fff8e5; padding: 0.4em 0.7em; border-left: 3px solid #e0a000; margin: 0.3em 0; }
.kpi { display: inline-block; margin: 0.3em 1.5em 0.3em 0; }
.kpi b { font-size: 1.4em; display: block; }
</style>
</head>
<body>
<h1>Run report: {{name .R.Run}}</h1>
<p class="meta">apps {{range $i, $a := .R.Apps}}{{if $i}}, {{end}}{{name $a}}{{end}} · planner checkpoint {{range $i, $c := .R.Checkpoints}}{{if $i}}, {{end}}{{$c}}{{else}}unknown{{end}} · K={{.R.Samples}}, G={{.R.Group}} · generated {{.Generated}}</p>
<div>
<span class="kpi" id="kpi-trajectories"><b>{{.R.Trajectories}}</b>trajectories</span>
<span class="kpi" id="kpi-success"><b>{{pct .R.Overall.Rate}}</b>success ({{.R.Overall.Successes}} scored successes)</span>
<span class="kpi" id="kpi-average"><b>{{pct .R.Overall.AverageAtK}}</b>Average@{{.R.Samples}}</span>
<span class="kpi" id="kpi-pass"><b>{{pct .R.Overall.PassAtK}}</b>Pass@{{.R.Samples}}</span>
<span class="kpi" id="kpi-steps"><b>{{f2 .R.Overall.MeanSteps}}</b>mean steps</span>
<span class="kpi" id="kpi-utilisation"><b>{{pct .R.VMs.Utilisation}}</b>VM utilisation</span>
</div>
{{range .R.Notes}}<p class="note">{{.}}</p>
{{end}}
<h2>Success by app</h2>
<table id="apps">
<tr><th>app</th><th>episodes</th><th>scored tasks</th><th>successes</th><th>success rate</th><th>Average@{{.R.Samples}}</th><th>Pass@{{.R.Samples}}</th><th>env errors</th><th>unscored</th><th>mean steps</th></tr>
{{range .R.ByApp}}<tr><td>{{name .App}}</td><td>{{.Episodes}}</td><td>{{.ScoredTasks}}</td><td>{{.Successes}}</td><td>{{pct .Rate}}</td><td>{{pct .AverageAtK}}</td><td>{{pct .PassAtK}}</td><td>{{.EnvErrors}}</td><td>{{.Unscored}}</td><td>{{f2 .MeanSteps}}</td></tr>
{{end}}{{if ne (len .R.ByApp) 1}}{{with .R.Overall}}<tr><th>overall</th><th>{{.Episodes}}</th><th>{{.ScoredTasks}}</th><th>{{.Successes}}</th><th>{{pct .Rate}}</th><th>{{pct .AverageAtK}}</th><th>{{pct .PassAtK}}</th><th>{{.EnvErrors}}</th><th>{{.Unscored}}</th><th>{{f2 .MeanSteps}}</th></tr>{{end}}{{end}}
</table>
<p class="meta">Average@K: the mean over tasks of the success fraction of their scored samples; Pass@K: the share of tasks with at least one success. Environment errors and unscored episodes count in neither (as in the rollout summary). Run ledger: {{.R.LedgerEpisodes}} published episodes.</p>
<div class="plot">{{index .Plots "success"}}</div>
{{with .R.Baseline}}
<h2>Against baseline {{name .Baseline}}</h2>
<div class="plots"><table id="baseline">
<tr><th>app</th><th>baseline success</th><th>success</th><th>Δ success</th><th>baseline Average@{{$.R.Samples}}</th><th>Average@{{$.R.Samples}}</th><th>Δ Average@{{$.R.Samples}}</th></tr>
{{range .Apps}}<tr><td>{{name .App}}</td><td>{{pctp .BaselineRate}}</td><td>{{pctp .Rate}}</td><td>{{dpct .RateDelta}}</td><td>{{pctp .BaselineAverage}}</td><td>{{pctp .AverageAtK}}</td><td>{{dpct .AverageDelta}}</td></tr>
{{end}}{{if ne (len .Apps) 1}}{{with .Overall}}<tr><th>overall</th><th>{{pctp .BaselineRate}}</th><th>{{pctp .Rate}}</th><th>{{dpct .RateDelta}}</th><th>{{pctp .BaselineAverage}}</th><th>{{pctp .AverageAtK}}</th><th>{{dpct .AverageDelta}}</th></tr>{{end}}{{end}}
</table>
<div class="plot">{{index $.Plots "baseline"}}</div></div>
{{end}}
<h2>Episodes</h2>
<div class="plots">
<table id="outcomes">
<tr><th>outcome</th><th>episodes</th></tr>
{{range .Outcomes}}<tr><td>{{.Name}}</td><td>{{.N}}</td></tr>
{{end}}</table>
<table id="steps">
<tr><th>steps</th><th>episodes</th></tr>
{{range .R.Steps}}<tr><td>{{.Value}}</td><td>{{.N}}</td></tr>
{{end}}</table>
</div>
<div class="plots"><div class="plot">{{index .Plots "outcomes"}}</div>
<div class="plot">{{index .Plots "steps"}}</div>
</div>
<h2>VM utilisation</h2>
<p class="meta">{{if not .R.VMs.Start.IsZero}}from {{ts .R.VMs.Start}} to {{ts .R.VMs.End}} ({{dur .R.VMs.Start .R.VMs.End}}); {{end}}utilisation: the VMs' episode time over the span × VMs.{{if .R.VMs.EventDocuments}} Resets (reverts to the snapshot), failures and quarantines are the pool's, from {{.R.VMs.EventDocuments}} VM events document(s) of the run.{{end}}</p>
<table id="vms">
<tr><th>VM</th><th>episodes</th><th>busy s</th><th>utilisation</th><th>env errors</th>{{if .R.VMs.EventDocuments}}<th>resets</th><th>reset s</th><th>failures</th><th>quarantined</th>{{end}}</tr>
{{range .R.VMs.PerVM}}<tr><td>{{.VM}}</td><td>{{.Episodes}}</td><td>{{f1 .BusySeconds}}</td><td>{{pct .Utilisation}}</td><td>{{.EnvErrors}}</td>{{if $.R.VMs.EventDocuments}}<td>{{.Resets}}</td><td>{{f1 .ResetSeconds}}</td><td>{{.Failures}}</td><td>{{.Quarantined}}</td>{{end}}</tr>
{{end}}</table>
<div class="plot">{{index .Plots "gantt"}}</div>
<h2>Plans</h2>
<table id="plans">
<tr><th>figure</th><th>value</th></tr>
<tr><td>sampled steps (2+ plans)</td><td>{{.R.Plans.Sampled}}</td></tr>
<tr><td>steps with all G+1 plans identical</td><td>{{.R.Plans.Identical}} ({{pct .R.IdenticalPlansShare}})</td></tr>
<tr><td>groups with two or more different plans</td><td>{{.R.Plans.Varied}} of {{.R.Plans.Groups}} ({{pct .R.VariedGroupsShare}})</td></tr>
</table>
<h2>Judge</h2>
{{with .R.Judge}}{{$o := .Overall}}
<p class="meta">judge version {{.Version}} ({{.Judge.Policy}})</p>
<div class="plots"><div>
<table id="decisions">
<tr><th>decision</th><th>trajectories</th></tr>
{{range $.Decisions}}<tr><td>{{.Name}}</td><td>{{.N}}</td></tr>
{{end}}</table>
<table id="judge">
<tr><th>figure</th><th>value</th></tr>
<tr><td>judged trajectories</td><td>{{$o.Trajectories}}</td></tr>
<tr><td>calls per trajectory</td><td>{{f2 $o.CallsPerTrajectory}}</td></tr>
<tr><td>checked by the evaluator</td><td>{{$o.Evaluated}} (TP {{$o.TP}}, FP {{$o.FP}}, FN {{$o.FN}}, TN {{$o.TN}}); undecided, left out: {{$o.EvaluatedUndecided}} ({{$o.UndecidedPassed}} passed)</td></tr>
<tr><td>precision</td><td>{{pctp $o.Precision}}</td></tr>
<tr><td>recall</td><td>{{pctp $o.Recall}}</td></tr>
<tr><td>F1</td><td>{{pctp $o.F1}}</td></tr>
</table>
</div>
<div class="plot">{{index $.Plots "decisions"}}</div></div>
<p class="meta">precision/recall: the judge's clean success against the task evaluator's pass, on the trajectories the evaluator could check.</p>
{{else}}<p>No judgement of the run in the judged archive.</p>{{end}}
<h2>Rewards and advantages</h2>
{{with .R.Shards}}
<table id="shards">
<tr><th>figure</th><th>value</th></tr>
<tr><td>shard sets</td><td>{{range $i, $s := .Sets}}{{if $i}}, {{end}}{{$s}}{{end}}</td></tr>
<tr><td>rows of the run</td><td>{{.Rows}}</td></tr>
<tr><td>groups</td><td>{{.Groups}}</td></tr>
<tr><td>zero-variance groups</td><td>{{.ZeroVarianceGroups}} ({{pct .ZeroVarianceShare}})</td></tr>
</table>
<div class="plots"><div class="plot">{{index $.Plots "rewards"}}</div><div class="plot">{{index $.Plots "advantages"}}</div></div>
{{else}}<p>No shard set lists the run.</p>{{end}}
<h2>Latency per stage</h2>
<div class="plots"><table id="latency">
<tr><th>stage</th><th>mean ms</th><th>p50 ms</th><th>p95 ms</th></tr>
{{with .R.Latency}}<tr><td>observe</td><td>{{ms .Observe.Mean}}</td><td>{{ms .Observe.P50}}</td><td>{{ms .Observe.P95}}</td></tr>
<tr><td>plan</td><td>{{ms .Plan.Mean}}</td><td>{{ms .Plan.P50}}</td><td>{{ms .Plan.P95}}</td></tr>
<tr><td>ground</td><td>{{ms .Ground.Mean}}</td><td>{{ms .Ground.P50}}</td><td>{{ms .Ground.P95}}</td></tr>
<tr><td>exec</td><td>{{ms .Exec.Mean}}</td><td>{{ms .Exec.P50}}</td><td>{{ms .Exec.P95}}</td></tr>
{{end}}{{if .R.Judge}}<tr><td>judge (per trajectory)</td><td>{{ms .R.Latency.Judge.Mean}}</td><td>{{ms .R.Latency.Judge.P50}}</td><td>{{ms .R.Latency.Judge.P95}}</td></tr>{{end}}
</table>
<div class="plot">{{index .Plots "latency"}}</div></div>
<h2>Episode lengths</h2>
{{with .R.Lengths}}
<table id="lengths">
<tr><th>figure</th><th>value</th></tr>
<tr><td>predicted from the length history</td><td>{{.FromHistory}}</td></tr>
<tr><td>predicted from the step limit (no history)</td><td>{{.Fallback}}</td></tr>
<tr><td>mean absolute error of the history's predictions</td><td>{{printf "%.1f" .MeanAbsErrorS}} s</td></tr>
<tr><td>mean relative error</td><td>{{pct .MeanRelError}}</td></tr>
</table>
<p class="meta">The scheduler orders episodes longest predicted first; a prediction is compared with the episode's VM time (ended_at − started_at), environment errors left out.</p>
{{else}}<p>No episode of the run recorded a length prediction.</p>{{end}}
</body>
</html>
`
