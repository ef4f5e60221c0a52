package judge

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestConsumerName: a judge that takes only some runs never shares its
// consumer with one that judges every run, whether its name is the default
// or given (--durable).
func TestConsumerName(t *testing.T) {
	runs := []string{"night-1-chimerax"}
	sel := runsSuffix(runs)
	cases := []struct {
		name, durable string
		runs          []string
		want          string
	}{
		{"default", "", nil, "judge_v1"},
		{"default with runs", "", runs, "judge_v1" + sel},
		{"given", "judges", nil, "judges"},
		{"given with runs", "judges", runs, "judges" + sel},
		{"given with its suffix already", "judges" + sel, runs, "judges" + sel},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := consumerName(c.durable, "v1", nil, c.runs); got != c.want {
				t.Errorf("consumerName(%q, runs %v) = %q, want %q", c.durable, c.runs, got, c.want)
			}
		})
	}
	if sel == "" || sel == runsSuffix([]string{"night-2-chimerax"}) {
		t.Errorf("runsSuffix gives %q for two different selections alike", sel)
	}
}

// TestRunsStart: a run-selected consumer starts at the earliest recorded
// start of its runs; a run not started yet is bounded by now; a lookup
// that fails says so.
func TestRunsStart(t *testing.T) {
	now := time.Date(2026, 11, 28, 3, 0, 0, 0, time.UTC)
	starts := map[string]time.Time{"night-a": now.Add(-2 * time.Hour), "night-b": now.Add(-time.Hour)}
	lookup := func(_ context.Context, run string) (time.Time, bool, error) {
		if run == "broken" {
			return time.Time{}, false, errors.New("ledger down")
		}
		s, ok := starts[run]
		return s, ok, nil
	}
	cases := []struct {
		name string
		runs []string
		want time.Time
		err  bool
	}{
		{"earliest", []string{"night-b", "night-a"}, now.Add(-2 * time.Hour), false},
		{"not started yet", []string{"night-c"}, now, false},
		{"one started", []string{"night-c", "night-b"}, now.Add(-time.Hour), false},
		{"lookup fails", []string{"night-a", "broken"}, time.Time{}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := RunsStart(context.Background(), c.runs, now, lookup)
			if (err != nil) != c.err || !got.Equal(c.want) {
				t.Errorf("RunsStart(%v) = %v, %v; want %v (error %v)", c.runs, got, err, c.want, c.err)
			}
		})
	}
}
