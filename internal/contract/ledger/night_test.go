package ledger_test

import (
	"testing"

	"github.com/codapipe/codapipe/internal/contract/ledger"
)

func TestNightOf(t *testing.T) {
	for _, c := range []struct {
		run  string
		apps []string
		want string
	}{
		{ledger.NightRun("2026-11-26", "ChimeraX"), []string{"ChimeraX"}, "2026-11-26"},
		{ledger.NightRun("n1", "GRASS GIS"), []string{"GRASS GIS"}, "n1"},
		{"2026-11-26-chimerax", []string{"KAlgebra"}, "2026-11-26-chimerax"},
		{"mixed", []string{"ChimeraX", "KAlgebra"}, "mixed"},
		{"-chimerax", []string{"ChimeraX"}, "-chimerax"},
	} {
		t.Run(c.run, func(t *testing.T) {
			if got := ledger.NightOf(c.run, c.apps); got != c.want {
				t.Errorf("NightOf(%q, %v) = %q, want %q", c.run, c.apps, got, c.want)
			}
		})
	}
}
