package runreport

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"math"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/font"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Colours of the plots (one palette for the whole page).
var (
	blue   = color.RGBA{R: 0x3b, G: 0x6e, B: 0xa8, A: 0xff}
	orange = color.RGBA{R: 0xe0, G: 0x8a, B: 0x2c, A: 0xff}
	green  = color.RGBA{R: 0x4c, G: 0x9a, B: 0x52, A: 0xff}
	red    = color.RGBA{R: 0xc4, G: 0x3c, B: 0x3c, A: 0xff}
	grey   = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	purple = color.RGBA{R: 0x7a, G: 0x5c, B: 0xa8, A: 0xff}
	series = []color.Color{blue, orange, green, purple, red}
)

// outcomeColour colours an episode on the VM timeline.
func outcomeColour(e Episode) color.Color {
	switch {
	case e.Outcome == traj.OutcomeEnvError:
		return red
	case e.Passed:
		return green
	case e.Outcome == traj.OutcomeFinished || e.Outcome == traj.OutcomeAnswered:
		return orange
	}
	return grey
}

// svg renders p as an inline SVG element (no XML declaration, fonts named
// not embedded).
func svg(p *plot.Plot, w, h vg.Length) (template.HTML, error) {
	c := vgsvg.NewWith(vgsvg.UseWH(w, h))
	p.Draw(draw.New(c))
	var b bytes.Buffer
	if _, err := c.WriteTo(&b); err != nil {
		return "", fmt.Errorf("render plot %q: %w", p.Title.Text, err)
	}
	s := b.String()
	if i := strings.Index(s, "<svg"); i > 0 {
		s = s[i:]
	}
	return template.HTML(s), nil //nolint:gosec // made by vgsvg from our own figures
}

// sans is the face of the plots' text: a sans-serif one at sizes for a
// screen (gonum's default is a 12-point serif title and 10-point ticks).
var sans = font.Font{Typeface: "Liberation", Variant: "Sans"}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text = title, x, y
	p.Title.TextStyle.Font = font.From(sans, 14)
	p.Title.Padding = vg.Points(8)
	for _, a := range []*plot.Axis{&p.X, &p.Y} {
		a.Label.TextStyle.Font = font.From(sans, 12)
		a.Tick.Label.Font = font.From(sans, 11)
	}
	p.Legend.TextStyle.Font = font.From(sans, 11)
	p.Add(plotter.NewGrid())
	return p
}

// axisKind is what a bar chart's values are: it decides the scale and
// the tick labels of its Y axis.
type axisKind int

const (
	// countAxis: whole numbers from 0, labelled without decimals.
	countAxis axisKind = iota
	// rateAxis: fractions, ticks from 0 % to 100 %.
	rateAxis
)

// headroom is the top of a Y axis whose largest value is top, with series
// legend lines above the bars (0 for no legend).
func headroom(top float64, series int) float64 {
	top = max(top, 1e-9)
	if series > 1 {
		return top * (1.15 + 0.12*float64(series))
	}
	return top * 1.12
}

// countTicks marks whole numbers only (steps of 1, 2 or 5 times a power
// of ten, at most about six of them), labelled without decimals.
type countTicks struct{}

// Ticks returns the marks between min and max.
func (countTicks) Ticks(lo, hi float64) []plot.Tick {
	step := 1.0
	for k := 0; (hi-lo)/step > 6; k++ {
		step = []float64{2, 5, 10}[k%3] * math.Pow10(k/3)
	}
	var ts []plot.Tick
	for v := math.Ceil(lo/step) * step; v <= hi+1e-9; v += step {
		ts = append(ts, plot.Tick{Value: v, Label: strconv.FormatFloat(v, 'f', 0, 64)})
	}
	return ts
}

// rateTicks marks 0 % to 100 % in quarters, whatever room the axis has
// above 1 for a legend.
type rateTicks struct{}

// Ticks returns the marks.
func (rateTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for _, v := range []float64{0, 0.25, 0.5, 0.75, 1} {
		if v >= lo-1e-9 && v <= hi+1e-9 {
			ts = append(ts, plot.Tick{Value: v, Label: strconv.Itoa(int(math.Round(v*100))) + " %"})
		}
	}
	return ts
}

// groupedBars plots one bar per name for each series, side by side, with
// room above the bars (and for the legend when there are several
// series).
func groupedBars(title, ylabel string, kind axisKind, names []string, labels []string, values [][]float64) (*plot.Plot, error) {
	p := newPlot(title, "", ylabel)
	w := vg.Points(min(60, 240/float64(max(len(names), 1))) / float64(max(len(values), 1)))
	for i, vs := range values {
		b, err := plotter.NewBarChart(plotter.Values(vs), w)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		b.Color = series[i%len(series)]
		b.LineStyle.Width = 0
		b.Offset = w * vg.Length(float64(i)-float64(len(values)-1)/2)
		p.Add(b)
		if len(values) > 1 {
			p.Legend.Add(labels[i], b)
		}
	}
	p.NominalX(names...)
	p.Y.Min = 0
	top := 0.0
	for _, vs := range values {
		for _, v := range vs {
			top = max(top, v)
		}
	}
	p.Legend.Top = true
	switch kind {
	case rateAxis:
		p.Y.Tick.Marker = rateTicks{}
		p.Y.Max = headroom(1, len(values))
	default:
		p.Y.Tick.Marker = countTicks{}
		p.Y.Max = max(headroom(top, len(values)), 1)
	}
	return p, nil
}

// latencyDots plots, per stage, one dot per series (mean, p50, p95) on a
// log scale of milliseconds: a judge call of seconds and an observation
// of milliseconds both readable.
func latencyDots(title string, stages, labels []string, values [][]float64) (*plot.Plot, error) {
	p := newPlot(title, "", "milliseconds (log scale)")
	lo, hi := math.Inf(1), 0.0
	for i, vs := range values {
		pts := make(plotter.XYs, 0, len(vs))
		for j, v := range vs {
			if v <= 0 {
				continue // nothing measured
			}
			pts = append(pts, plotter.XY{X: float64(j) + 0.18*(float64(i)-float64(len(values)-1)/2), Y: v})
			lo, hi = min(lo, v), max(hi, v)
		}
		sc, err := plotter.NewScatter(pts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		sc.GlyphStyle = draw.GlyphStyle{Color: series[i%len(series)], Radius: vg.Points(4), Shape: []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}}[i%3]}
		p.Add(sc)
		p.Legend.Add(labels[i], sc)
	}
	if hi == 0 { // no latency at all
		lo, hi = 1, 10
	}
	p.NominalX(stages...)
	p.Y.Scale = plot.LogScale{}
	p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
	p.Y.Max = math.Pow10(int(math.Ceil(math.Log10(hi))) + 1) // a decade of room for the legend
	p.Legend.Top = true
	return p, nil
}

// histogram plots pre-binned counts of ylabel (rows, groups, plans).
func histogram(title, xlabel, ylabel string, h Histogram, fill color.Color) *plot.Plot {
	p := newPlot(title, xlabel, ylabel)
	p.Y.Tick.Marker = countTicks{}
	n := len(h.Counts)
	width := (h.Max - h.Min) / float64(max(n, 1))
	if width == 0 {
		width = 1
	}
	hist := &plotter.Histogram{Width: width, FillColor: fill, LineStyle: plotter.DefaultLineStyle}
	for i, c := range h.Counts {
		lo := h.Min + float64(i)*width
		hist.Bins = append(hist.Bins, plotter.HistogramBin{Min: lo, Max: lo + width, Weight: float64(c)})
	}
	p.Add(hist)
	top := 0
	for _, c := range h.Counts {
		top = max(top, c)
	}
	p.Y.Min, p.Y.Max = 0, max(headroom(float64(top), 1), 1)
	return p
}

// gantt draws the episodes of each VM as bars on a time axis (seconds
// from the run's first start).
type gantt struct {
	use VMUse
	row map[string]int
}

// Styles of the VM events on the timeline.
var (
	resetColour     = color.RGBA{R: 0x44, G: 0x44, B: 0x44, A: 0xff}
	failureGlyph    = draw.GlyphStyle{Color: color.Black, Radius: vg.Points(4.5), Shape: draw.CrossGlyph{}}
	quarantineGlyph = draw.GlyphStyle{Color: purple, Radius: vg.Points(5), Shape: draw.PyramidGlyph{}}
)

func (g *gantt) Plot(c draw.Canvas, plt *plot.Plot) {
	tx, ty := plt.Transforms(&c)
	// Starts and resets: a thin dark bar through the row's middle, drawn
	// under the episodes; one still going when its document was written
	// runs to the end of the timeline.
	for _, s := range g.use.Spans {
		end := s.End
		if end.IsZero() {
			end = g.use.End
		}
		if !end.After(s.Start) {
			continue
		}
		y := float64(g.row[s.VM])
		x0, x1 := s.Start.Sub(g.use.Start).Seconds(), end.Sub(g.use.Start).Seconds()
		pts := []vg.Point{
			{X: tx(x0), Y: ty(y - 0.12)}, {X: tx(x1), Y: ty(y - 0.12)},
			{X: tx(x1), Y: ty(y + 0.12)}, {X: tx(x0), Y: ty(y + 0.12)},
		}
		c.FillPolygon(resetColour, c.ClipPolygonXY(pts))
	}
	for _, e := range g.use.Episodes {
		if e.Start.IsZero() || !e.End.After(e.Start) {
			continue
		}
		y := float64(g.row[e.VM])
		x0, x1 := e.Start.Sub(g.use.Start).Seconds(), e.End.Sub(g.use.Start).Seconds()
		pts := []vg.Point{
			{X: tx(x0), Y: ty(y - 0.35)}, {X: tx(x1), Y: ty(y - 0.35)},
			{X: tx(x1), Y: ty(y + 0.35)}, {X: tx(x0), Y: ty(y + 0.35)},
		}
		c.FillPolygon(outcomeColour(e), c.ClipPolygonXY(pts))
		c.StrokeLines(draw.LineStyle{Color: color.White, Width: vg.Points(0.5)}, c.ClipLinesXY(append(pts, pts[0]))...)
	}
	// Failures and quarantines: markers on the row, above the bars.
	for _, e := range g.use.Events {
		st := failureGlyph
		if e.Kind == ledger.VMQuarantined {
			st = quarantineGlyph
		}
		pt := vg.Point{X: tx(e.Time.Sub(g.use.Start).Seconds()), Y: ty(float64(g.row[e.VM]) + 0.2)}
		if c.Contains(pt) {
			c.DrawGlyph(st, pt)
		}
	}
}

func (g *gantt) DataRange() (xmin, xmax, ymin, ymax float64) {
	// The rows, and room above them for the legend; the VMs' first starts
	// come before the first episode (negative seconds).
	xmax = max(g.use.End.Sub(g.use.Start).Seconds(), 1)
	for _, s := range g.use.Spans {
		xmin = min(xmin, s.Start.Sub(g.use.Start).Seconds())
		xmax = max(xmax, s.End.Sub(g.use.Start).Seconds())
	}
	for _, e := range g.use.Events {
		xmin = min(xmin, e.Time.Sub(g.use.Start).Seconds())
		xmax = max(xmax, e.Time.Sub(g.use.Start).Seconds())
	}
	ymax = float64(len(g.row)) + 1.5
	if g.use.EventDocuments > 0 {
		ymax += 0.3 * float64(len(g.row)) // three more legend entries
	}
	return xmin, xmax, -0.5, ymax
}

// legendBox is a legend entry of a given colour.
type legendBox struct{ c color.Color }

func (l legendBox) Thumbnail(c *draw.Canvas) {
	c.FillPolygon(l.c, []vg.Point{{X: c.Min.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Min.Y}, {X: c.Max.X, Y: c.Max.Y}, {X: c.Min.X, Y: c.Max.Y}})
}

// legendGlyph is a legend entry of a marker.
type legendGlyph struct{ st draw.GlyphStyle }

func (l legendGlyph) Thumbnail(c *draw.Canvas) {
	c.DrawGlyph(l.st, c.Center())
}

func ganttPlot(use VMUse) *plot.Plot {
	p := newPlot("Episodes per VM over time", "seconds since the run's first episode started", "")
	g := &gantt{use: use, row: map[string]int{}}
	names := make([]string, len(use.PerVM))
	for i, v := range use.PerVM {
		g.row[v.VM] = i
		names[i] = v.VM
	}
	p.Add(g)
	p.NominalY(names...)
	p.Legend.Top = true
	p.Legend.Add("passed", legendBox{green})
	p.Legend.Add("finished, not passed", legendBox{orange})
	p.Legend.Add("failed / step limit / other", legendBox{grey})
	p.Legend.Add("environment error (fault)", legendBox{red})
	if use.EventDocuments > 0 {
		p.Legend.Add("VM start / reset (revert to snapshot)", legendBox{resetColour})
		p.Legend.Add("VM failure (start, reset, health check or episode)", legendGlyph{failureGlyph})
		p.Legend.Add("VM quarantined", legendGlyph{quarantineGlyph})
	}
	return p
}

// trendKind is the Y axis of a trend plot.
type trendKind int

const (
	trendRate  trendKind = iota // fractions, 0 % to 100 %
	trendCount                  // whole numbers from 0
	trendCalls                  // a number from 0 (calls per trajectory)
	trendMS                     // milliseconds on a log scale
)

// trendLines plots one line per series over the runs (x: the run's
// index, labelled with runs); a nil value leaves a gap.
func trendLines(title, ylabel string, kind trendKind, runs []string, names []string, values [][]*float64) (*plot.Plot, error) {
	p := newPlot(title, "", ylabel)
	top, lo := 0.0, math.Inf(1)
	for i, vs := range values {
		pts := plotter.XYs{}
		for j, v := range vs {
			if v == nil || (kind == trendMS && *v <= 0) {
				continue
			}
			pts = append(pts, plotter.XY{X: float64(j), Y: *v})
			top, lo = max(top, *v), min(lo, *v)
		}
		if len(pts) == 0 {
			continue
		}
		l, sc, err := plotter.NewLinePoints(pts)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", title, err)
		}
		c := series[i%len(series)]
		l.Color, l.Width = c, vg.Points(2)
		sc.GlyphStyle = draw.GlyphStyle{Color: c, Radius: vg.Points(3.5), Shape: []draw.GlyphDrawer{draw.CircleGlyph{}, draw.SquareGlyph{}, draw.TriangleGlyph{}}[i%3]}
		p.Add(l, sc)
		p.Legend.Add(names[i], l, sc)
	}
	p.X.Tick.Marker = runTicks(runs)
	p.X.Min, p.X.Max = -0.3, float64(len(runs)-1)+0.3
	p.Legend.Top = true
	switch kind {
	case trendRate:
		p.Y.Tick.Marker = rateTicks{}
		p.Y.Min, p.Y.Max = 0, headroom(1, len(values))
	case trendCount:
		p.Y.Tick.Marker = countTicks{}
		p.Y.Min, p.Y.Max = 0, max(headroom(top, len(values)), 1)
	case trendCalls:
		p.Y.Min, p.Y.Max = 0, max(headroom(top, len(values)), 1)
	case trendMS:
		if math.IsInf(lo, 1) {
			lo, top = 1, 10
		}
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		p.Y.Min = math.Pow10(int(math.Floor(math.Log10(lo))))
		p.Y.Max = math.Pow10(int(math.Ceil(math.Log10(top))) + 1)
	}
	return p, nil
}

// runTicks labels the X axis of a trend with the runs' labels.
type runTicks []string

// Ticks returns one mark per run.
func (r runTicks) Ticks(lo, hi float64) []plot.Tick {
	var ts []plot.Tick
	for i, l := range r {
		if float64(i) >= lo && float64(i) <= hi {
			ts = append(ts, plot.Tick{Value: float64(i), Label: l})
		}
	}
	return ts
}
