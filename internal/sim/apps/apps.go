// Package apps is part of codapipe's SIMULATOR (see package sim): the
// catalogue of the simulated applications, one package each below this
// one, and their tasks. Adding an app to the simulator is adding its
// package (its desktop.AppSpec, an implementation of desktop.App, its
// tasks) and listing it here, in All and TaskSets.
package apps

import (
	"sync"

	"github.com/codapipe/codapipe/internal/sim/apps/celestia"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// All returns every simulated app, in catalogue order.
func All() []desktop.AppSpec {
	return []desktop.AppSpec{chimerax.Spec(), celestia.Spec(), kalgebra.Spec(), grass.Spec()}
}

// TaskSets returns the tasks of every app, in catalogue order: what the
// simulator's task files hold (see package taskgen).
func TaskSets() ([]taskgen.Set, error) {
	var out []taskgen.Set
	for _, tasks := range []func() (taskgen.Set, error){chimerax.Tasks, celestia.Tasks, kalgebra.Tasks, grass.Tasks} {
		s, err := tasks()
		if err != nil {
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

// Catalog returns the catalogue of every simulated app, what simulated
// machines run: desktop.NewMachine(desktop.MachineConfig{Apps:
// apps.Catalog(), ...}). It is built once and shared.
func Catalog() *desktop.Catalog { return catalog() }

var catalog = sync.OnceValue(func() *desktop.Catalog {
	c, err := desktop.NewCatalog(All()...)
	if err != nil {
		panic(err) // the apps' layouts are fixed: TestCatalog checks them
	}
	return c
})
