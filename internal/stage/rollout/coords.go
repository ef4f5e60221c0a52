package rollout

import (
	"fmt"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// Thresholds of the grounding warnings.
const (
	// warnOutOfRange: a larger share of out-of-range answers means the
	// executor writes in another coordinate space than configured.
	warnOutOfRange = 0.01
	// warnUnparsed: a larger share of answers that are no action at all.
	warnUnparsed = 0.10
	// warnMinPoints: the extent heuristic needs at least this many points.
	warnMinPoints = 100
)

// groundingWarnings says what looks wrong with the executor's answers over a run
// whose executor was configured with space: a share of out-of-range points
// (the executor writes in another space), many unparseable answers, or —
// after warnMinPoints points — numbers that never leave [0, 1000] although
// both axes of the space reach beyond 1050 (an executor on the 0–1000 grid
// read as pixels of a large screen), or never leave [0, 1] in a space far
// larger (fractions read as pixels or grid). Each warning names the
// figures and what to check.
func groundingWarnings(g ledger.Grounding, space traj.Coords) []string {
	if g.Grounded == 0 {
		return nil
	}
	var out []string
	name := uitars.CoordsString(space)
	if share := float64(g.OutOfRange) / float64(g.Grounded); share > warnOutOfRange {
		out = append(out, fmt.Sprintf("%.1f%% of the executor's answers (%d of %d) hold a point outside its coordinate space %s: "+
			"the executor probably answers in another space — check --executor-coords (docs/actions.md); these candidates score 0",
			100*share, g.OutOfRange, g.Grounded, name))
	}
	if share := float64(g.Unparsed) / float64(g.Grounded); share > warnUnparsed {
		out = append(out, fmt.Sprintf("%.1f%% of the executor's answers (%d of %d) are not an action the parser accepts: check the executor prompt and model",
			100*share, g.Unparsed, g.Grounded))
	}
	if g.Points >= warnMinPoints {
		switch {
		case g.ExtW > 100 && g.MaxX <= 1 && g.MaxY <= 1:
			out = append(out, fmt.Sprintf("all %d points of the executor lie within 1 unit of the origin of %s (%gx%g): "+
				"it probably answers in fractions (--executor-coords unit)", g.Points, name, g.ExtW, g.ExtH))
		case g.ExtW > 1050 && g.ExtH > 1050 && g.MaxX <= 1000 && g.MaxY <= 1000:
			// Only when both axes reach well beyond 1000: on a 1280×800
			// screen pixels-resized is 1288×812, a grid executor's y beyond
			// 812 is out of range already, and "no click in the right fifth"
			// alone is no evidence.
			out = append(out, fmt.Sprintf("no point of the executor's %d goes beyond 1000 although %s reaches %gx%g: "+
				"it may answer on a 0-1000 grid (--executor-coords grid1000); every point would then be off", g.Points, name, g.ExtW, g.ExtH))
		}
	}
	return out
}
