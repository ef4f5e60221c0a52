// Package appname holds the names of ScienceBoard's applications and the
// rule that spells an app as the benchmark does: what every command that
// takes an --app checks, without linking the task files' evaluator.
package appname

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
)

// The app names of the benchmark's task files (their "type" field).
const (
	ChimeraX  = "ChimeraX"
	KAlgebra  = "KAlgebra"
	Celestia  = "Celestia"
	GrassGIS  = "GrassGIS"
	Lean      = "Lean"
	TeXstudio = "TeXstudio"
)

// Apps returns the applications of the ScienceBoard benchmark, spelled as
// its task files spell them ("type").
func Apps() []string {
	return []string{ChimeraX, KAlgebra, Celestia, GrassGIS, Lean, TeXstudio}
}

// ErrUnknown is matched (errors.Is) by the error of Canonical for
// an app that none of the known names matches.
var ErrUnknown = errors.New("unknown app")

// Canonical returns the spelling of app among known: app itself when
// known holds it, else the one name of known equal to it ignoring case
// ("Chimerax" is ChimeraX). An app that no name of known matches is an
// error matching ErrUnknown that lists known; one that matches several
// names only ignoring case is an error naming them.
func Canonical(app string, known ...string) (string, error) {
	if slices.Contains(known, app) {
		return app, nil
	}
	var match []string
	for _, k := range known {
		if strings.EqualFold(k, app) && !slices.Contains(match, k) {
			match = append(match, k)
		}
	}
	switch len(match) {
	case 1:
		return match[0], nil
	case 0:
		return "", fmt.Errorf("%w %s (known apps: %s)", ErrUnknown, traj.QuoteName(app), strings.Join(known, ", "))
	}
	return "", fmt.Errorf("app %s is ambiguous: it matches %s, which differ only in case; give one of them exactly", traj.QuoteName(app), strings.Join(match, ", "))
}

// Check checks the app names a flag gives (traj.CheckName) and
// returns them with each ScienceBoard app spelled as the benchmark does
// (Canonical with Apps: chimerax is ChimeraX), so that it selects the
// same subject and history as rollout's. Any other name is an app of the
// user's own task folders (their "type"), kept as it is.
func Check(flag string, apps []string) ([]string, error) {
	for _, a := range apps {
		if err := traj.CheckName(traj.AppName, a); err != nil {
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
	}
	out := make([]string, 0, len(apps))
	for _, a := range apps {
		c, err := Canonical(a, Apps()...)
		switch {
		case errors.Is(err, ErrUnknown):
			c = a
		case err != nil:
			return nil, fmt.Errorf("%s: %w", flag, err)
		}
		out = append(out, c)
	}
	if err := Collisions(out); err != nil {
		return nil, fmt.Errorf("%s: %w", flag, err)
	}
	return out, nil
}

// ErrCollide is wrapped by the error of Collisions.
var ErrCollide = errors.New("apps collide on one subject")

// Collisions refuses two different app names that map to the same subject
// token (bus.AppToken: "K.A" and "K_A" are both K_A): their messages would
// share the subjects coda.traj.K_A, coda.judged.K_A, ..., and a consumer of
// one would take the other's.
func Collisions(apps []string) error {
	seen := map[string]string{}
	for _, a := range apps {
		tok := bus.AppToken(a)
		if other, ok := seen[tok]; ok && other != a {
			return fmt.Errorf("%w: %s and %s both map to the subject token %s (coda.traj.%s, ...); rename one of them",
				ErrCollide, traj.QuoteName(other), traj.QuoteName(a), tok, tok)
		}
		seen[tok] = a
	}
	return nil
}
