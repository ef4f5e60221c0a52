package judge

import "testing"

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
