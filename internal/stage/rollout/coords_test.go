package rollout

import (
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

func TestGroundingWarnings(t *testing.T) {
	cases := []struct {
		name  string
		g     ledger.Grounding
		space traj.Coords
		want  []string // substrings, one per expected warning
	}{
		{"clean", ledger.Grounding{Grounded: 1000, Points: 800, MaxX: 1200, MaxY: 790, ExtW: 1288, ExtH: 812}, uitars.Resized(), nil},
		{"nothing grounded", ledger.Grounding{}, uitars.Resized(), nil},
		{"out of range", ledger.Grounding{Grounded: 1000, OutOfRange: 20, Points: 800, MaxX: 1200, MaxY: 800, ExtW: 1288, ExtH: 812}, uitars.Resized(),
			[]string{"2.0% of the executor's answers (20 of 1000) hold a point outside its coordinate space pixels-resized"}},
		{"1% is tolerated", ledger.Grounding{Grounded: 1000, OutOfRange: 10, Points: 800, MaxX: 1200, MaxY: 800, ExtW: 1288, ExtH: 812}, uitars.Resized(), nil},
		{"unparsed", ledger.Grounding{Grounded: 100, Unparsed: 11, Points: 80, MaxX: 1200, MaxY: 800, ExtW: 1288, ExtH: 812}, uitars.Resized(),
			[]string{"11.0% of the executor's answers (11 of 100) are not an action"}},
		{"grid read as pixels", ledger.Grounding{Grounded: 300, Points: 200, MaxX: 997, MaxY: 640, ExtW: 1932, ExtH: 1092}, uitars.Resized(),
			[]string{"no point of the executor's 200 goes beyond 1000 although pixels-resized reaches 1932x1092: it may answer on a 0-1000 grid (--executor-coords grid1000)"}},
		{"grid read as pixels, few points", ledger.Grounding{Grounded: 300, Points: 99, MaxX: 997, MaxY: 640, ExtW: 1932, ExtH: 1092}, uitars.Resized(), nil},
		// On 1280x800 the heuristic is off: no click in the right fifth is
		// no evidence (and a grid executor's y beyond 812 is out of range).
		{"1280x800 without the right fifth", ledger.Grounding{Grounded: 300, Points: 200, MaxX: 997, MaxY: 640, ExtW: 1288, ExtH: 812}, uitars.Resized(), nil},
		{"fractions read as grid", ledger.Grounding{Grounded: 300, Points: 200, MaxX: 0.97, MaxY: 0.9, ExtW: 1000, ExtH: 1000}, uitars.Grid(),
			[]string{"within 1 unit of the origin of grid1000 (1000x1000): it probably answers in fractions (--executor-coords unit)"}},
		{"grid in grid", ledger.Grounding{Grounded: 300, Points: 200, MaxX: 997, MaxY: 640, ExtW: 1000, ExtH: 1000}, uitars.Grid(), nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := groundingWarnings(c.g, c.space)
			if len(got) != len(c.want) {
				t.Fatalf("warnings %q, want %d", got, len(c.want))
			}
			for i, w := range c.want {
				if !strings.Contains(got[i], w) {
					t.Errorf("warning %q lacks %q", got[i], w)
				}
			}
		})
	}
}
