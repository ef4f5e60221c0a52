// Package apps is part of codapipe's SIMULATOR (see package sim): the
// catalogue of the simulated applications, one package each below this
// one. Adding an app to the simulator is adding its package (an
// implementation of desktop.App with its task specs) and listing it here.
package apps

import (
	"sync"

	"github.com/codapipe/codapipe/internal/sim/apps/celestia"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// All returns every simulated app, in catalogue order.
func All() []desktop.App {
	return []desktop.App{chimerax.App(), celestia.App(), kalgebra.App(), grass.App()}
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
