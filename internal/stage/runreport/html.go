package runreport

import (
	"encoding/json"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"
	"unicode"
	"unicode/utf16"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/traj"
)

// page is what the HTML template gets: the overview, its trend plots,
// one section per run, the gallery's thumbnails and the embedded JSON.
type page struct {
	O         *Overview
	Generated string
	Title     string
	Latest    *Report
	Trends    []template.HTML
	Runs      []runPage
	Gallery   []galleryGroup
	Images    template.CSS
	Thumbs    map[string]thumbRef
	JSON      template.JS
	// Short are the columns' labels without what they all share.
	Short []string
}

// runPage is one run's section.
type runPage struct {
	R         *Report
	Index     int
	Open      bool
	Outcomes  []namedCount
	Decisions []namedCount
	Plots     map[string]template.HTML
	// Links are the gallery anchors of the run's decisions that the
	// page's gallery shows.
	Links map[string]string
}

// galleryGroup is the gallery's trajectories of one app and class.
type galleryGroup struct {
	App, Class, Anchor string
	Entries            []GalleryEntry
}

// thumbRef is a thumbnail's CSS class and size in the page.
type thumbRef struct {
	Class string
	W, H  int
}

// namedCount is a named count of the page's tables.
type namedCount struct {
	Name string
	N    int
}

// WriteHTML writes the overview as one self-contained HTML page: inline
// CSS, tables, plots as inline SVG (gonum.org/v1/plot), the gallery's
// thumbnails as data: URIs in the style sheet (one per screenshot), the
// figures as JSON in a <script type="application/json" id="report-data">,
// and a few lines of script that sort the tables; no external asset. now
// is the time the page says it was generated.
func (o *Overview) WriteHTML(w io.Writer, now time.Time) error {
	pg := page{O: o, Generated: now.UTC().Format(time.RFC3339), Thumbs: map[string]thumbRef{}}
	if len(o.Reports) == 0 {
		return errors.New("run report: an overview of no run")
	}
	pg.Latest = o.Reports[len(o.Reports)-1]
	pg.Title = traj.PrintName(o.Runs[0])
	if len(o.Runs) > 1 {
		pg.Title = fmt.Sprintf("%d runs, %s … %s", len(o.Runs), traj.PrintName(o.Runs[0]), traj.PrintName(o.Runs[len(o.Runs)-1]))
	}
	for i := len(o.Reports) - 1; i >= 0; i-- { // latest first
		r := o.Reports[i]
		rp := runPage{R: r, Index: i, Open: i == len(o.Reports)-1, Plots: map[string]template.HTML{}}
		for _, k := range sortedKeys(r.Overall.Outcomes) {
			rp.Outcomes = append(rp.Outcomes, namedCount{k, r.Overall.Outcomes[k]})
		}
		if r.Judge != nil {
			for _, d := range traj.Decisions {
				rp.Decisions = append(rp.Decisions, namedCount{string(d), r.Judge.Overall.Decisions[d]})
			}
		}
		if err := r.plots(rp.Plots); err != nil {
			return fmt.Errorf("run report: %w", err)
		}
		pg.Runs = append(pg.Runs, rp)
	}
	for _, c := range o.Columns {
		pg.Short = append(pg.Short, traj.PrintName(c.Label))
	}
	pg.Short = shortLabels(pg.Short)
	if len(o.Columns) > 1 {
		t, err := o.trendPlots(pg.Short)
		if err != nil {
			return fmt.Errorf("run report: %w", err)
		}
		pg.Trends = t
	}
	links := map[string]map[string]string{} // run → class → anchor
	for _, g := range o.Gallery {
		if n := len(pg.Gallery); n == 0 || pg.Gallery[n-1].Class != g.Class || pg.Gallery[n-1].App != g.App {
			pg.Gallery = append(pg.Gallery, galleryGroup{App: g.App, Class: g.Class,
				Anchor: fmt.Sprintf("g-%d-%s", len(pg.Gallery), strings.ReplaceAll(g.Class, " ", "_"))})
		}
		grp := &pg.Gallery[len(pg.Gallery)-1]
		grp.Entries = append(grp.Entries, g)
		if links[g.Run] == nil {
			links[g.Run] = map[string]string{}
		}
		if _, ok := links[g.Run][g.Class]; !ok {
			links[g.Run][g.Class] = grp.Anchor
		}
	}
	for i := range pg.Runs {
		pg.Runs[i].Links = links[pg.Runs[i].R.Run]
	}
	var css strings.Builder
	for _, key := range sortedKeys(o.images) {
		th := o.images[key]
		if th.URI == "" {
			continue
		}
		ref := thumbRef{Class: fmt.Sprintf("i%d", len(pg.Thumbs)), W: th.W, H: th.H}
		pg.Thumbs[key] = ref
		fmt.Fprintf(&css, ".%s{background-image:url(%s)}\n", ref.Class, th.URI)
	}
	pg.Images = template.CSS(css.String()) //nolint:gosec // base64 data: URIs we encoded
	body, err := json.Marshal(o)           // escapes <, > and &: safe in a script element
	if err != nil {
		return fmt.Errorf("run report: %w", err)
	}
	pg.JSON = template.JS(escapeFormat(body)) //nolint:gosec // JSON from json.Marshal
	if err := pageTemplate.Execute(w, pg); err != nil {
		return fmt.Errorf("run report: write HTML: %w", err)
	}
	return nil
}

// WriteHTMLFile writes the page to path (mode blob.FileMode()) through a
// temporary file renamed into place.
func (o *Overview) WriteHTMLFile(path string, now time.Time) (err error) {
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
	if err = o.WriteHTML(f, now); err != nil {
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

// shortLabels drops from labels the prefix and the suffix they all share,
// cut at a separator ("-", " ", "·", "_", ".", ":"), so that the nights
// "2026-11-26 · step-3" and "2026-11-27 · step-4" read "26 · step-3" and
// "27 · step-4"; fewer than two labels, or labels it would empty, are
// kept.
func shortLabels(labels []string) []string {
	if len(labels) < 2 {
		return labels
	}
	isSep := func(r rune) bool { return strings.ContainsRune("- ·_.:", r) }
	pre, suf := []rune(labels[0]), []rune(labels[0])
	for _, l := range labels[1:] {
		r := []rune(l)
		n := 0
		for n < len(pre) && n < len(r) && pre[n] == r[n] {
			n++
		}
		pre = pre[:n]
		m := 0
		for m < len(suf) && m < len(r) && suf[len(suf)-1-m] == r[len(r)-1-m] {
			m++
		}
		suf = suf[len(suf)-m:]
	}
	for len(pre) > 0 && !isSep(pre[len(pre)-1]) { // cut back to a separator
		pre = pre[:len(pre)-1]
	}
	for len(suf) > 0 && !isSep(suf[0]) {
		suf = suf[1:]
	}
	out := make([]string, len(labels))
	for i, l := range labels {
		r := []rune(l)
		if len(pre)+len(suf) >= len(r) {
			return labels
		}
		out[i] = strings.Trim(string(r[len(pre):len(r)-len(suf)]), " ·")
		if out[i] == "" {
			return labels
		}
	}
	return out
}

// escapeFormat writes the control and format characters (a right-to-left
// override, say) of JSON text as \u escapes: json.Marshal leaves the
// format characters raw, and a name holding one would reorder the page's
// source as an editor shows it.
func escapeFormat(body []byte) []byte {
	var b strings.Builder
	for _, r := range string(body) {
		if r < 0x20 || unicode.Is(unicode.Cf, r) {
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				fmt.Fprintf(&b, "\\u%04x\\u%04x", r1, r2)
				continue
			}
			fmt.Fprintf(&b, "\\u%04x", r)
			continue
		}
		b.WriteRune(r)
	}
	return []byte(b.String())
}

// trendPlots plots the headline figures over the columns, one line per
// app.
func (o *Overview) trendPlots(labels []string) ([]template.HTML, error) {
	names := make([]string, len(o.Apps))
	for i, a := range o.Apps {
		names[i] = traj.PrintName(a)
	}
	series := func(get func(p TrendPoint) *float64) [][]*float64 {
		out := make([][]*float64, len(o.Apps))
		for i := range out {
			out[i] = make([]*float64, len(o.Columns))
		}
		for _, p := range o.Trend {
			out[slices.Index(o.Apps, p.App)][p.Column] = get(p)
		}
		return out
	}
	f := func(v float64) *float64 { return &v }
	n := func(v *int) *float64 {
		if v == nil {
			return nil
		}
		return f(float64(*v))
	}
	type spec struct {
		title, ylabel string
		kind          trendKind
		get           func(p TrendPoint) *float64
	}
	specs := []spec{
		{"Success rate", "", trendRate, func(p TrendPoint) *float64 { return f(p.Success) }},
		{"Average@K", "", trendRate, func(p TrendPoint) *float64 { return f(p.AverageAtK) }},
		{"Pass@K", "", trendRate, func(p TrendPoint) *float64 { return f(p.PassAtK) }},
		{"Judge precision (against the evaluator)", "", trendRate, func(p TrendPoint) *float64 { return p.Precision }},
		{"Judge recall (against the evaluator)", "", trendRate, func(p TrendPoint) *float64 { return p.Recall }},
		{"Judge calls per trajectory", "calls", trendCalls, func(p TrendPoint) *float64 { return p.Calls }},
		{"Identical-plan share", "", trendRate, func(p TrendPoint) *float64 { return f(p.IdenticalPlans) }},
		{"Zero-variance group share", "", trendRate, func(p TrendPoint) *float64 { return p.ZeroVariance }},
		{"Shard rows", "rows", trendCount, func(p TrendPoint) *float64 { return n(p.Rows) }},
		{"SFT samples", "samples", trendCount, func(p TrendPoint) *float64 { return n(p.SFTSamples) }},
		{"VM utilisation", "", trendRate, func(p TrendPoint) *float64 { return f(p.Utilisation) }},
		{"Planner latency (p50 per step)", "ms (log scale)", trendMS, func(p TrendPoint) *float64 { return f(p.PlanP50MS) }},
		{"Executor latency (p50 per step)", "ms (log scale)", trendMS, func(p TrendPoint) *float64 { return f(p.GroundP50MS) }},
		{"Judge latency (p50 per trajectory)", "ms (log scale)", trendMS, func(p TrendPoint) *float64 { return p.JudgeP50MS }},
	}
	var out []template.HTML
	for _, s := range specs {
		p, err := trendLines(s.title, s.ylabel, s.kind, labels, names, series(s.get))
		if err != nil {
			return nil, err
		}
		h, err := svg(p, 10*vg.Centimeter, 6.5*vg.Centimeter) // three a row
		if err != nil {
			return nil, err
		}
		out = append(out, h)
	}
	return out, nil
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
		if err := add("rewards", histogram("Rewards of the run's shard rows", "reward", "rows", s.Rewards, blue), nil, w, h); err != nil {
			return err
		}
		if err := add("advantages", histogram("Advantages of the run's shard rows", "advantage", "rows", s.Advantages, purple), nil, w, h); err != nil {
			return err
		}
		if err := add("spread", histogram("Advantage spread per group", "largest − smallest advantage of a group", "groups", s.AdvantageSpread, green), nil, w, h); err != nil {
			return err
		}
		if err := add("rewardsd", histogram("Reward spread per group", "standard deviation of a group's rewards", "groups", s.RewardSD, orange), nil, w, h); err != nil {
			return err
		}
	}
	if pl := r.Planner; len(pl.CompletionTokens.Counts) > 0 {
		if err := add("tokens", histogram("Plan length", "completion tokens", "plans", pl.CompletionTokens, blue), nil, w, h); err != nil {
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
	"f2p": func(v *float64) string { return cond(v != nil, func() string { return fmt.Sprintf("%.2f", *v) }) },
	"ip":  func(v *int) string { return cond(v != nil, func() string { return fmt.Sprint(*v) }) },
	"ms":  func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"msp": func(v *float64) string { return cond(v != nil, func() string { return fmt.Sprintf("%.0f", *v) }) },
	"ts":  func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") },
	"dur": func(a, b time.Time) string { return b.Sub(a).Round(time.Second).String() },
	// heat is the colour class of a success rate: h0 (0 %) to h10 (100 %).
	"heat": func(v float64) string { return fmt.Sprintf("h%d", int(math.Round(10*v))) },
	// vote reads a vote's verdict.
	"vote": func(c *bool) string {
		switch {
		case c == nil:
			return "no verdict"
		case *c:
			return "correct"
		}
		return "incorrect"
	},
	"thumb": func(m map[string]thumbRef, key string) *thumbRef {
		if t, ok := m[key]; ok {
			return &t
		}
		return nil
	},
	"radius":   func(w int) int { return max(6, w/60) },
	"add":      func(a, b int) int { return a + b },
	"div":      func(a, b int) int { return a / b },
	"galleryN": func() int { return GalleryPerClass },
	// disagree: a judged, evaluated trajectory on which the judge's clean
	// success and the evaluator's pass differ.
	"disagree": func(g GalleryEntry) bool {
		decided := g.Decision != "" && g.Decision != traj.NotJudged && g.Decision != traj.Undecided
		return decided && g.Passed != nil && *g.Passed != (g.Decision == traj.CleanSuccess)
	},
	"anchor": func(id string) string { return "t-" + id },
	"sorted": func(m map[string]int) []string {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		return keys
	},
}).Parse(pageHTML))

// cond is f() when ok, else "—".
func cond(ok bool, f func() string) string {
	if !ok {
		return "—"
	}
	return f()
}

const pageHTML = `<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>codapipe run report: {{.Title}}</title>
<style>
body { font-family: system-ui, -apple-system, "Segoe UI", "Liberation Sans", sans-serif; margin: 1.5em auto; max-width: 1240px; color: #222; padding: 0 1em; font-size: 15px; line-height: 1.4; }
h1 { font-size: 1.6em; margin-bottom: 0.2em; }
h2 { font-size: 1.3em; margin-top: 1.8em; border-bottom: 2px solid #ccc; padding-bottom: 0.2em; }
h3 { font-size: 1.1em; margin-top: 1.4em; }
nav a { margin-right: 1em; }
.meta { color: #555; }
table { border-collapse: collapse; margin: 0.8em 0; }
th, td { border: 1px solid #ddd; padding: 0.25em 0.6em; text-align: right; }
th { background: #f3f3f3; }
table.sortable th { cursor: pointer; }
table.sortable th:after { content: " ⇅"; color: #aaa; font-size: 0.8em; }
td:first-child, th:first-child, td.l, th.l { text-align: left; }
.plot svg { max-width: 100%; height: auto; }
.plots { display: flex; flex-wrap: wrap; gap: 1em; align-items: flex-start; }
.note { color: #7a5200; background: #fff8e5; padding: 0.4em 0.7em; border-left: 3px solid #e0a000; margin: 0.3em 0; }
.kpi { display: inline-block; margin: 0.3em 1.5em 0.3em 0; }
.kpi b { font-size: 1.4em; display: block; }
details.run { margin: 1em 0; border: 1px solid #ddd; padding: 0.2em 1em 1em; }
details.run > summary { font-size: 1.2em; font-weight: 600; cursor: pointer; padding: 0.4em 0; }
td.cell { text-align: center; min-width: 4.2em; }
.h0 { background: #f4c7c3; } .h1 { background: #f6d3c3; } .h2 { background: #f8dfc4; } .h3 { background: #faeac5; } .h4 { background: #fbf3c8; }
.h5 { background: #f5f5c9; } .h6 { background: #e6f2c8; } .h7 { background: #d7edc6; } .h8 { background: #c8e8c4; } .h9 { background: #b9e3c2; } .h10 { background: #a8dcbf; }
.wide { overflow-x: auto; }
table.small { font-size: 0.85em; }
.mark { font-weight: 700; font-size: 0.85em; }
.traj { border: 1px solid #ddd; margin: 1em 0; padding: 0.5em 1em; }
.steps { display: flex; flex-wrap: wrap; gap: 0.8em; }
figure.step { margin: 0; width: 320px; font-size: 0.85em; }
.shot { position: relative; background-size: 100% 100%; background-color: #eee; border: 1px solid #ccc; }
.shot svg { position: absolute; left: 0; top: 0; width: 100%; height: 100%; }
.noimg { display: flex; align-items: center; justify-content: center; color: #888; }
figure.step pre { white-space: pre-wrap; word-break: break-word; background: #f7f7f7; padding: 0.3em; margin: 0.3em 0; max-height: 12em; overflow: auto; }
.yes { color: #2c7a35; } .no { color: #b03030; }
{{.Images}}
</style>
</head>
<body>
<h1>Run report: {{.Title}}</h1>
<p class="meta">apps {{range $i, $a := .O.Apps}}{{if $i}}, {{end}}{{name $a}}{{end}} · runs {{range $i, $r := .O.Runs}}{{if $i}}, {{end}}{{name $r}}{{end}} · generated {{.Generated}}</p>
<nav>{{if .Trends}}<a href="#trends">trends</a>{{end}}<a href="#tasks">tasks</a><a href="#gallery">gallery</a>{{range .Runs}}<a href="#run-{{.Index}}">{{name .R.Run}}</a>{{end}}</nav>
{{with .Latest}}<div>
<span class="kpi" id="kpi-run"><b>{{name .Run}}</b>latest run (planner {{range $i, $c := .Checkpoints}}{{if $i}}, {{end}}{{name $c}}{{else}}unknown{{end}})</span>
<span class="kpi" id="kpi-trajectories"><b>{{.Trajectories}}</b>trajectories</span>
<span class="kpi" id="kpi-success"><b>{{pct .Overall.Rate}}</b>success ({{.Overall.Successes}} scored successes)</span>
<span class="kpi" id="kpi-average"><b>{{pct .Overall.AverageAtK}}</b>Average@{{.Samples}}</span>
<span class="kpi" id="kpi-pass"><b>{{pct .Overall.PassAtK}}</b>Pass@{{.Samples}}</span>
<span class="kpi" id="kpi-utilisation"><b>{{pct .VMs.Utilisation}}</b>VM utilisation</span>
</div>{{end}}
{{range .O.Notes}}<p class="note">{{.}}</p>
{{end}}
{{if .Trends}}<h2 id="trends">Trends over nights and checkpoints</h2>
<p class="meta">One point per run and app; the X axis is the night and the planner checkpoint of the runs (nightly's runs are named &lt;night&gt;-&lt;app&gt;).</p>
<div class="wide"><table class="sortable small" data-table="trend">
<thead><tr><th>night · checkpoint</th><th class="l">app</th><th class="l">run</th><th>episodes</th><th>success</th><th>Average@K</th><th>Pass@K</th><th>judge precision</th><th>judge recall</th><th>judge calls</th><th>identical plans</th><th>zero-variance groups</th><th>rows</th><th>SFT samples</th><th>VM utilisation</th><th>plan p50 ms</th><th>ground p50 ms</th><th>judge p50 ms</th></tr></thead>
<tbody>{{range .O.Trend}}<tr><td data-v="{{.Column}}" title="{{name (index $.O.Columns .Column).Label}}">{{index $.Short .Column}}</td><td class="l">{{name .App}}</td><td class="l">{{name .Run}}</td><td>{{.Episodes}}</td><td>{{pct .Success}}</td><td>{{pct .AverageAtK}}</td><td>{{pct .PassAtK}}</td><td>{{pctp .Precision}}</td><td>{{pctp .Recall}}</td><td>{{f2p .Calls}}</td><td>{{pct .IdenticalPlans}}</td><td>{{pctp .ZeroVariance}}</td><td>{{ip .Rows}}</td><td>{{ip .SFTSamples}}</td><td>{{pct .Utilisation}}</td><td>{{ms .PlanP50MS}}</td><td>{{ms .GroundP50MS}}</td><td>{{msp .JudgeP50MS}}</td></tr>
{{end}}</tbody></table></div>
<div class="plots">{{range $i, $p := .Trends}}<div class="plot" data-plot="trend-{{$i}}">{{$p}}</div>{{end}}</div>
{{end}}
<h2 id="tasks">Tasks</h2>
<p class="meta">Each cell: the task's successes over its scored samples in that night and checkpoint, coloured by the rate. <span class="mark">K/K</span>: every scored sample passed; <span class="mark">0/K</span>: none did. Both give the task's groups no outcome variance. Click a column to sort; a task's links open its trajectories in the gallery (latest run).</p>
<table class="sortable" data-table="tasks">
<thead><tr><th class="l">app</th><th class="l">task</th>{{range $i, $c := .O.Columns}}<th title="{{name $c.Label}}: {{range $j, $r := $c.Runs}}{{if $j}}, {{end}}{{name $r}}{{end}}">{{index $.Short $i}}</th>{{end}}<th>groups (latest)</th><th>zero-variance groups (latest)</th><th>judge TP/FP/FN/TN (latest)</th><th class="l">gallery</th></tr></thead>
<tbody>{{range .O.Tasks.Rows}}{{$last := index .Cells (len .Cells | add -1)}}<tr><td>{{name .App}}</td><td class="l">{{name .Task}}</td>{{range .Cells}}{{if and . .Scored}}<td class="cell {{heat .Rate}}" data-v="{{.Rate}}">{{.Successes}}/{{.Scored}}{{if .AllSucceeded}} <span class="mark">K/K</span>{{else if .NoneSucceeded}} <span class="mark">0/K</span>{{end}}</td>{{else if .}}<td class="cell" data-v="-1" title="no scored sample">0/0</td>{{else}}<td class="cell" data-v="-1">—</td>{{end}}{{end}}{{with $last}}<td>{{.Groups}}</td><td>{{.ZeroVarianceGroups}}</td><td>{{with .Judge}}{{.TP}}/{{.FP}}/{{.FN}}/{{.TN}}{{else}}—{{end}}</td><td class="l">{{range $i, $g := .Gallery}}<a href="#{{anchor $g}}" title="trajectory {{$g}}">#{{add $i 1}}</a> {{end}}</td>{{else}}<td>—</td><td>—</td><td>—</td><td></td>{{end}}</tr>
{{end}}</tbody></table>
<h2 id="gallery">Gallery</h2>
<p class="meta">The latest run of each app: up to {{galleryN}} trajectories of each judge decision (of each outcome when not judged), the first by trajectory id. Each step: the screenshot the planner saw with the executed action's point drawn on it, the plan, and the code run.</p>
{{range .Gallery}}<h3 id="{{.Anchor}}">{{name .App}} · {{.Class}}</h3>
{{range .Entries}}<div class="traj" id="{{anchor .ID}}">
<p><b>{{name .Task}}</b> sample {{.Sample}} · run {{name .Run}} · trajectory {{.ID}} · outcome {{.Outcome}} · evaluator {{with .Passed}}{{if .}}<span class="yes">passed</span>{{else}}<span class="no">failed</span>{{end}}{{else}}could not score{{end}}{{with .Decision}} · judge <b>{{.}}</b>{{end}}{{if disagree .}} · <span class="no">the judge and the evaluator disagree</span>{{end}}</p>
{{with .Reason}}<p class="meta">judge: {{.}}</p>{{end}}
{{with .Votes}}<p class="meta">votes: {{range $i, $v := .}}{{if $i}}; {{end}}{{$v.Slot}} {{vote $v.Correct}}{{with $v.Error}} ({{.}}){{end}}{{end}}</p>{{end}}
{{with .Captions}}<details><summary>the judge's captions ({{len .}})</summary><ol>{{range .}}<li>{{.}}</li>{{end}}</ol></details>{{end}}
<div class="steps">{{range .Steps}}<figure class="step">{{with thumb $.Thumbs .Image}}<div class="shot {{.Class}}" style="width: {{.W}}px; height: {{.H}}px">{{else}}<div class="shot noimg" style="width: 320px; height: 200px">no image{{end}}{{if .Points}}<svg viewBox="0 0 {{.Width}} {{.Height}}" preserveAspectRatio="none">{{$r := radius .Width}}{{range $i, $p := .Points}}<circle cx="{{index $p 0}}" cy="{{index $p 1}}" r="{{$r}}" fill="none" stroke="#e0202a" stroke-width="{{div $r 2}}"/>{{end}}{{if eq (len .Points) 2}}<line x1="{{index (index .Points 0) 0}}" y1="{{index (index .Points 0) 1}}" x2="{{index (index .Points 1) 0}}" y2="{{index (index .Points 1) 1}}" stroke="#e0202a" stroke-width="{{div $r 2}}"/>{{end}}</svg>{{end}}</div>
<figcaption>step {{.Index}}{{with .Action}} · {{.}}{{end}}{{with .Error}} · <span class="no">{{.}}</span>{{end}}<pre>{{.Plan}}</pre><code>{{.Code}}</code></figcaption></figure>
{{end}}</div></div>
{{end}}{{else}}<p>No trajectory to show.</p>{{end}}
<h2>Runs</h2>
{{range .Runs}}{{template "run" .}}{{end}}
<script type="application/json" id="report-data">{{.JSON}}</script>
<script>
// Sorts a table.sortable by the clicked column: numbers by value (a cell's data-v first), text alphabetically.
for (const th of document.querySelectorAll("table.sortable thead th")) {
  th.addEventListener("click", () => {
    const body = th.closest("table").tBodies[0], i = th.cellIndex, dir = th.dataset.dir === "asc" ? -1 : 1;
    th.dataset.dir = dir > 0 ? "asc" : "desc";
    const key = (r) => { const c = r.cells[i]; const v = c ? (c.dataset.v ?? c.textContent.trim()) : ""; const n = parseFloat(v); return isNaN(n) ? v : n; };
    const rows = Array.from(body.rows);
    rows.sort((a, b) => { const x = key(a), y = key(b); return (typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y))) * dir; });
    for (const r of rows) body.appendChild(r);
  });
}
</script>
</body>
</html>
{{define "run"}}{{$r := .R}}{{$p := .Plots}}<details class="run" id="run-{{.Index}}"{{if .Open}} open{{end}}>
<summary>Run {{name $r.Run}} · night {{name $r.Night}} · planner {{range $i, $c := $r.Checkpoints}}{{if $i}}, {{end}}{{name $c}}{{else}}unknown{{end}} · {{$r.Trajectories}} trajectories</summary>
<p class="meta">apps {{range $i, $a := $r.Apps}}{{if $i}}, {{end}}{{name $a}}{{end}} · K={{$r.Samples}}, G={{$r.Group}} · run ledger: {{$r.LedgerEpisodes}} published episodes</p>
{{range $r.Notes}}<p class="note">{{.}}</p>
{{end}}
<h3>Success by app</h3>
<table data-table="apps">
<tr><th>app</th><th>episodes</th><th>scored tasks</th><th>successes</th><th>success rate</th><th>Average@{{$r.Samples}}</th><th>Pass@{{$r.Samples}}</th><th>env errors</th><th>unscored</th><th>mean steps</th></tr>
{{range $r.ByApp}}<tr><td>{{name .App}}</td><td>{{.Episodes}}</td><td>{{.ScoredTasks}}</td><td>{{.Successes}}</td><td>{{pct .Rate}}</td><td>{{pct .AverageAtK}}</td><td>{{pct .PassAtK}}</td><td>{{.EnvErrors}}</td><td>{{.Unscored}}</td><td>{{f2 .MeanSteps}}</td></tr>
{{end}}{{if ne (len $r.ByApp) 1}}{{with $r.Overall}}<tr><th>overall</th><th>{{.Episodes}}</th><th>{{.ScoredTasks}}</th><th>{{.Successes}}</th><th>{{pct .Rate}}</th><th>{{pct .AverageAtK}}</th><th>{{pct .PassAtK}}</th><th>{{.EnvErrors}}</th><th>{{.Unscored}}</th><th>{{f2 .MeanSteps}}</th></tr>{{end}}{{end}}
</table>
<p class="meta">Average@K: the mean over tasks of the success fraction of their scored samples; Pass@K: the share of tasks with at least one success. Environment errors and unscored episodes count in neither (as in the rollout summary).</p>
<div class="plot" data-plot="success">{{index $p "success"}}</div>
{{with $r.Baseline}}
<h3>Against baseline {{name .Baseline}}</h3>
<div class="plots"><table data-table="baseline">
<tr><th>app</th><th>baseline success</th><th>success</th><th>Δ success</th><th>baseline Average@{{$r.Samples}}</th><th>Average@{{$r.Samples}}</th><th>Δ Average@{{$r.Samples}}</th></tr>
{{range .Apps}}<tr><td>{{name .App}}</td><td>{{pctp .BaselineRate}}</td><td>{{pctp .Rate}}</td><td>{{dpct .RateDelta}}</td><td>{{pctp .BaselineAverage}}</td><td>{{pctp .AverageAtK}}</td><td>{{dpct .AverageDelta}}</td></tr>
{{end}}{{if ne (len .Apps) 1}}{{with .Overall}}<tr><th>overall</th><th>{{pctp .BaselineRate}}</th><th>{{pctp .Rate}}</th><th>{{dpct .RateDelta}}</th><th>{{pctp .BaselineAverage}}</th><th>{{pctp .AverageAtK}}</th><th>{{dpct .AverageDelta}}</th></tr>{{end}}{{end}}
</table>
<div class="plot" data-plot="baseline">{{index $p "baseline"}}</div></div>
{{end}}
<h3>Episodes</h3>
<div class="plots">
<table data-table="outcomes">
<tr><th>outcome</th><th>episodes</th></tr>
{{range .Outcomes}}<tr><td>{{.Name}}</td><td>{{.N}}</td></tr>
{{end}}</table>
<table data-table="steps">
<tr><th>steps</th><th>episodes</th></tr>
{{range $r.Steps}}<tr><td>{{.Value}}</td><td>{{.N}}</td></tr>
{{end}}</table>
</div>
<div class="plots"><div class="plot" data-plot="outcomes">{{index $p "outcomes"}}</div>
{{with index $p "steps"}}<div class="plot" data-plot="steps">{{.}}</div>{{end}}
</div>
<h3>VM utilisation</h3>
<p class="meta">{{if not $r.VMs.Start.IsZero}}from {{ts $r.VMs.Start}} to {{ts $r.VMs.End}} ({{dur $r.VMs.Start $r.VMs.End}}); {{end}}utilisation: the VMs' episode time over the span × VMs.{{if $r.VMs.EventDocuments}} Resets (reverts to the snapshot), failures and quarantines are the pool's, from {{$r.VMs.EventDocuments}} VM events document(s) of the run.{{end}}</p>
<table data-table="vms" class="sortable">
<thead><tr><th>VM</th><th>episodes</th><th>busy s</th><th>utilisation</th><th>env errors</th>{{if $r.VMs.EventDocuments}}<th>resets</th><th>reset s</th><th>failures</th><th>quarantined</th>{{end}}</tr></thead>
<tbody>{{range $r.VMs.PerVM}}<tr><td>{{.VM}}</td><td>{{.Episodes}}</td><td>{{f1 .BusySeconds}}</td><td>{{pct .Utilisation}}</td><td>{{.EnvErrors}}</td>{{if $r.VMs.EventDocuments}}<td>{{.Resets}}</td><td>{{f1 .ResetSeconds}}</td><td>{{.Failures}}</td><td>{{.Quarantined}}</td>{{end}}</tr>
{{end}}</tbody></table>
{{with index $p "gantt"}}<div class="plot" data-plot="gantt">{{.}}</div>{{end}}
<h3>Plans</h3>
<div class="plots"><table data-table="plans">
<tr><th>figure</th><th>value</th></tr>
<tr><td>sampled steps (2+ plans)</td><td>{{$r.Plans.Sampled}}</td></tr>
<tr><td>steps with all G+1 plans identical</td><td>{{$r.Plans.Identical}} ({{pct $r.IdenticalPlansShare}})</td></tr>
<tr><td>groups with two or more different plans</td><td>{{$r.Plans.Varied}} of {{$r.Plans.Groups}} ({{pct $r.VariedGroupsShare}})</td></tr>
<tr><td>plans (candidates)</td><td>{{$r.Planner.Plans}}</td></tr>
<tr><td>prompt tokens mean / p50 / p95</td><td>{{f1 $r.Planner.PromptTokens.Mean}} / {{f1 $r.Planner.PromptTokens.P50}} / {{f1 $r.Planner.PromptTokens.P95}}</td></tr>
<tr><td>truncated at max_tokens (finish reason "length")</td><td>{{$r.Planner.Truncated}} ({{pct $r.Planner.TruncatedShare}})</td></tr>
</table>
<table data-table="finish">
<tr><th>finish reason</th><th>plans</th></tr>
{{range $k := sorted $r.Planner.FinishReasons}}<tr><td>{{$k}}</td><td>{{index $r.Planner.FinishReasons $k}}</td></tr>
{{end}}</table>
{{with index $p "tokens"}}<div class="plot" data-plot="tokens">{{.}}</div>{{end}}</div>
<h3>Judge</h3>
{{with $r.Judge}}{{$o := .Overall}}
<p class="meta">judge version {{.Version}} ({{.Judge.Policy}})</p>
<div class="plots"><div>
<table data-table="decisions">
<tr><th>decision</th><th>trajectories</th></tr>
{{range $.Decisions}}<tr><td>{{with index $.Links .Name}}<a href="#{{.}}">{{end}}{{.Name}}{{if index $.Links .Name}}</a>{{end}}</td><td>{{.N}}</td></tr>
{{end}}</table>
<table data-table="judge">
<tr><th>figure</th><th>value</th></tr>
<tr><td>judged trajectories</td><td>{{$o.Trajectories}}</td></tr>
<tr><td>calls per trajectory</td><td>{{f2 $o.CallsPerTrajectory}}</td></tr>
<tr><td>checked by the evaluator</td><td>{{$o.Evaluated}} (TP {{$o.TP}}, FP {{$o.FP}}, FN {{$o.FN}}, TN {{$o.TN}}); undecided, left out: {{$o.EvaluatedUndecided}} ({{$o.UndecidedPassed}} passed)</td></tr>
<tr><td>precision</td><td>{{pctp $o.Precision}}</td></tr>
<tr><td>recall</td><td>{{pctp $o.Recall}}</td></tr>
<tr><td>F1</td><td>{{pctp $o.F1}}</td></tr>
</table>
</div>
<div class="plot" data-plot="decisions">{{index $p "decisions"}}</div></div>
<p class="meta">precision/recall: the judge's clean success against the task evaluator's pass, on the trajectories the evaluator could check; per task in the tasks table.</p>
{{else}}<p>No judgement of the run in the judged archive.</p>{{end}}
{{with $r.Agreement}}{{$a := .}}
<h3>Judge agreement</h3>
<p class="meta">Slots are a judge model at one screenshot size. A cell: the share of pairs of two different usable votes on the same trajectory, one of each slot, that agree (the pairs counted below it); the diagonal pairs votes of one slot. "with decision": the share of a slot's votes that agree with the trajectory's decision (a clean or redundant success against any other).</p>
<table data-table="agreement">
<tr><th>slot</th><th>votes</th><th>judged correct</th><th>with decision</th>{{range .Slots}}<th>{{.}}</th>{{end}}</tr>
{{range $i, $s := .Slots}}<tr><td>{{$s}}</td><td>{{index $a.Votes $i}}</td><td>{{pct (index $a.YesShare $i)}}</td><td>{{pctp (index $a.WithDecision $i)}}</td>{{range $j, $v := index $a.Agree $i}}<td>{{pctp $v}}<br><span class="meta">{{index (index $a.Pairs $i) $j}} pairs</span></td>{{end}}</tr>
{{end}}</table>
{{end}}
<h3>Rewards and advantages</h3>
{{with $r.Shards}}
<table data-table="shards">
<tr><th>figure</th><th>value</th></tr>
<tr><td>shard sets</td><td>{{range $i, $s := .Sets}}{{if $i}}, {{end}}{{$s}}{{end}}</td></tr>
<tr><td>rows of the run</td><td>{{.Rows}}</td></tr>
<tr><td>groups</td><td>{{.Groups}}</td></tr>
<tr><td>zero-variance groups</td><td>{{.ZeroVarianceGroups}} ({{pct .ZeroVarianceShare}})</td></tr>
</table>
<div class="plots"><div class="plot" data-plot="rewards">{{index $p "rewards"}}</div><div class="plot" data-plot="advantages">{{index $p "advantages"}}</div>
<div class="plot" data-plot="spread">{{index $p "spread"}}</div><div class="plot" data-plot="rewardsd">{{index $p "rewardsd"}}</div></div>
{{else}}<p>No shard set lists the run.</p>{{end}}
{{with $r.SFT}}<p>SFT: {{.Samples}} samples from {{.Trajectories}} trajectories of the run in the set {{.Set}}.</p>{{end}}
<h3>Latency per stage</h3>
<div class="plots"><table data-table="latency">
<tr><th>stage</th><th>mean ms</th><th>p50 ms</th><th>p95 ms</th></tr>
{{with $r.Latency}}<tr><td>observe</td><td>{{ms .Observe.Mean}}</td><td>{{ms .Observe.P50}}</td><td>{{ms .Observe.P95}}</td></tr>
<tr><td>plan</td><td>{{ms .Plan.Mean}}</td><td>{{ms .Plan.P50}}</td><td>{{ms .Plan.P95}}</td></tr>
<tr><td>ground</td><td>{{ms .Ground.Mean}}</td><td>{{ms .Ground.P50}}</td><td>{{ms .Ground.P95}}</td></tr>
<tr><td>exec</td><td>{{ms .Exec.Mean}}</td><td>{{ms .Exec.P50}}</td><td>{{ms .Exec.P95}}</td></tr>
{{end}}{{if $r.Judge}}<tr><td>judge (per trajectory)</td><td>{{ms $r.Latency.Judge.Mean}}</td><td>{{ms $r.Latency.Judge.P50}}</td><td>{{ms $r.Latency.Judge.P95}}</td></tr>{{end}}
</table>
<div class="plot" data-plot="latency">{{index $p "latency"}}</div></div>
<h3>Episode lengths</h3>
{{with $r.Lengths}}
<table data-table="lengths">
<tr><th>figure</th><th>value</th></tr>
<tr><td>predicted from the length history</td><td>{{.FromHistory}}</td></tr>
<tr><td>predicted from the step limit (no history)</td><td>{{.Fallback}}</td></tr>
<tr><td>mean absolute error of the history's predictions</td><td>{{printf "%.1f" .MeanAbsErrorS}} s</td></tr>
<tr><td>mean relative error</td><td>{{pct .MeanRelError}}</td></tr>
</table>
<p class="meta">The scheduler orders episodes longest predicted first; a prediction is compared with the episode's VM time (ended_at − started_at), environment errors left out.</p>
{{else}}<p>No episode of the run recorded a length prediction.</p>{{end}}
</details>
{{end}}`
