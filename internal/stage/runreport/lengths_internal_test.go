package runreport

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/pkg/traj"
)

// The report compares each episode's recorded prediction with its
// trajectory's VM time: history predictions give the errors, step-limit
// ones are counted, environment errors and episodes without a prediction
// are left out.
func TestLengthFigures(t *testing.T) {
	at := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	tr := func(task string, sample int, d time.Duration, kind traj.OutcomeKind) *traj.Trajectory {
		return &traj.Trajectory{Task: traj.TaskRef{ID: task}, Sample: sample, StartedAt: at, EndedAt: at.Add(d), Outcome: traj.Outcome{Kind: kind}}
	}
	trs := []*traj.Trajectory{
		tr("A", 0, 100*time.Second, traj.OutcomeFinished), // predicted 120 from history: error 20, 20 %
		tr("A", 1, 50*time.Second, traj.OutcomeStepLimit), // predicted 100 from history: error 50, 100 %
		tr("B", 0, 30*time.Second, traj.OutcomeFinished),  // step limit fallback
		tr("C", 0, 10*time.Second, traj.OutcomeEnvError),  // left out
		tr("D", 0, 10*time.Second, traj.OutcomeFinished),  // no prediction recorded
		tr("E", 0, 10*time.Second, traj.OutcomeFinished),  // not in the ledger
	}
	done := map[ledger.EpisodeKey]ledger.Record{
		{Task: "A", Sample: 0}: {PredictedS: 120, PredictedFromHistory: true},
		{Task: "A", Sample: 1}: {PredictedS: 100, PredictedFromHistory: true},
		{Task: "B", Sample: 0}: {PredictedS: 150},
		{Task: "C", Sample: 0}: {PredictedS: 150, PredictedFromHistory: true},
		{Task: "D", Sample: 0}: {},
	}
	f := lengthFigures(trs, done)
	if f == nil || f.FromHistory != 2 || f.Fallback != 1 || math.Abs(f.MeanAbsErrorS-35) > 1e-9 || math.Abs(f.MeanRelError-0.6) > 1e-9 {
		t.Errorf("figures: %+v", f)
	}
	if f := lengthFigures(trs, map[ledger.EpisodeKey]ledger.Record{}); f != nil {
		t.Errorf("no predictions: %+v, want nil", f)
	}
}

// The HTML page shows the length figures in their own table, and says so
// when the run recorded no prediction.
func TestLengthFiguresOnThePage(t *testing.T) {
	at := time.Date(2026, 11, 26, 1, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name    string
		lengths *LengthFigures
		want    []string
	}{
		{"with predictions", &LengthFigures{FromHistory: 7, Fallback: 3, MeanAbsErrorS: 12.25, MeanRelError: 0.375},
			[]string{`<table data-table="lengths">`, "<td>7</td>", "<td>3</td>", "12.2 s", "37.5%"}},
		{"without", nil, []string{"No episode of the run recorded a length prediction."}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var b strings.Builder
			r := &Report{Run: "r1", Apps: []string{"KAlgebra"}, Samples: 1, Lengths: tc.lengths,
				Overall: ledger.Scores{Outcomes: map[string]int{"passed": 1}}, ByApp: []AppScores{{App: "KAlgebra"}}}
			if err := OverviewOf([]*Report{r}).WriteHTML(&b, at); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if !strings.Contains(b.String(), w) {
					t.Errorf("the page lacks %q", w)
				}
			}
		})
	}
}

// A shard may hold ±Inf and NaN rewards: they are counted apart, and the
// finite ones binned; a range too wide for a float64 does not crash.
func TestHistogramNonFinite(t *testing.T) {
	for _, c := range []struct {
		name   string
		values []float64
		binned int
		odd    int
	}{
		{"infinities and NaN", []float64{1, 2, math.Inf(1), math.NaN(), math.Inf(-1), 3}, 3, 3},
		{"overflowing range", []float64{-math.MaxFloat64, 0, math.MaxFloat64}, 3, 0},
		{"none finite", []float64{math.NaN()}, 0, 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			h := Histogram{values: c.values}
			h.bin(HistogramBins)
			n := 0
			for _, k := range h.Counts {
				n += k
			}
			if n != c.binned || h.NonFinite != c.odd {
				t.Errorf("binned %d, non-finite %d; want %d, %d", n, h.NonFinite, c.binned, c.odd)
			}
		})
	}
}
