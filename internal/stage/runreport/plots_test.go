package runreport

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"gonum.org/v1/plot"
)

func tickLabels(ts []plot.Tick) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Label)
	}
	return out
}

func TestCountTicks(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   []string
	}{
		{0, 3.4, []string{"0", "1", "2", "3"}},
		{0, 6, []string{"0", "1", "2", "3", "4", "5", "6"}},
		{0, 11.2, []string{"0", "2", "4", "6", "8", "10"}},
		{0, 28, []string{"0", "5", "10", "15", "20", "25"}},
		{0, 1234, []string{"0", "500", "1000"}},
		{0, 1100, []string{"0", "200", "400", "600", "800", "1000"}},
	} {
		if got := tickLabels(countTicks{}.Ticks(c.lo, c.hi)); !reflect.DeepEqual(got, c.want) {
			t.Errorf("countTicks(%v, %v) = %v, want %v", c.lo, c.hi, got, c.want)
		}
	}
	if got, want := tickLabels(rateTicks{}.Ticks(0, 1.5)), []string{"0 %", "25 %", "50 %", "75 %", "100 %"}; !reflect.DeepEqual(got, want) {
		t.Errorf("rateTicks = %v, want %v", got, want)
	}
}

// A rate chart's axis is labelled 0–100 % (its room above is the
// legend's); a count chart has whole-number ticks and room above its
// tallest bar; latency is on a log scale.
func TestPlotAxes(t *testing.T) {
	p, err := groupedBars("Success", "", rateAxis, []string{"A", "B"}, []string{"rate", "avg"}, [][]float64{{0.2, 1}, {0.4, 0.9}})
	if err != nil {
		t.Fatal(err)
	}
	if got := tickLabels(p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)); got[len(got)-1] != "100 %" || p.Y.Min != 0 {
		t.Errorf("rate axis %v..%v ticks %v", p.Y.Min, p.Y.Max, got)
	}
	p, err = groupedBars("Outcomes", "episodes", countAxis, []string{"a", "b"}, []string{"n"}, [][]float64{{25, 3}})
	if err != nil {
		t.Fatal(err)
	}
	if p.Y.Max <= 25 || strings.Contains(strings.Join(tickLabels(p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)), " "), ".") {
		t.Errorf("count axis to %v, ticks %v", p.Y.Max, tickLabels(p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max)))
	}
	p, err = latencyDots("Latency", []string{"observe", "judge"}, []string{"mean"}, [][]float64{{12, 12900}})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := p.Y.Scale.(plot.LogScale); !ok || p.Y.Min > 12 || p.Y.Max < 12900 {
		t.Errorf("latency axis %T %v..%v", p.Y.Scale, p.Y.Min, p.Y.Max)
	}
	if _, err := svg(p, 300, 200); err != nil {
		t.Fatal(err)
	}
}

// With one app, "overall" would repeat it: neither the summary lines nor
// the page's table show it; with two they do.
func TestOneAppHasNoOverall(t *testing.T) {
	for _, apps := range [][]string{{"ChimeraX"}, {"ChimeraX", "KAlgebra"}} {
		r := &Report{Run: "r", Apps: apps, Samples: 4}
		r.Overall.Outcomes = map[string]int{"finished": 1}
		for _, a := range apps {
			r.ByApp = append(r.ByApp, AppScores{App: a})
		}
		var text, page strings.Builder
		r.Print(&text)
		if err := OverviewOf([]*Report{r}).WriteHTML(&page, time.Unix(0, 0)); err != nil {
			t.Fatal(err)
		}
		want := len(apps) > 1
		if got := strings.Contains(text.String(), "  overall "); got != want {
			t.Errorf("%d apps: the summary has an overall line: %v\n%s", len(apps), got, text.String())
		}
		if got := strings.Contains(page.String(), "<tr><th>overall</th>"); got != want {
			t.Errorf("%d apps: the page has an overall row: %v", len(apps), got)
		}
	}
}

func TestShortLabels(t *testing.T) {
	for _, c := range []struct{ in, want []string }{
		{[]string{"2026-11-26 · step-3", "2026-11-27 · step-4"}, []string{"26 · step-3", "27 · step-4"}},
		{[]string{"demo-20261128-103535 · sim-step-0", "demo-20261128-121749 · sim-step-0"}, []string{"103535", "121749"}},
		{[]string{"a", "a"}, []string{"a", "a"}},
		{[]string{"n1"}, []string{"n1"}},
		{[]string{"night-1 · c", "night-2 · c", "other · c"}, []string{"night-1", "night-2", "other"}},
	} {
		if got := shortLabels(c.in); fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("shortLabels(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}
