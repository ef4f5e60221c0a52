package ledger

import (
	"strings"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// NightRun is the rollout run of app in a night of nightly:
// "<night>-<app>", the app lower-cased as a subject token.
func NightRun(night, app string) string {
	return night + "-" + strings.ToLower(bus.AppToken(app))
}

// NightOf is the night a run of apps belongs to: for a run of one app
// named as NightRun names it, the night; for any other run, the run
// itself (a night of its own).
func NightOf(run string, apps []string) string {
	if len(apps) == 1 {
		if night, ok := strings.CutSuffix(run, "-"+strings.ToLower(bus.AppToken(apps[0]))); ok && night != "" {
			return night
		}
	}
	return run
}
