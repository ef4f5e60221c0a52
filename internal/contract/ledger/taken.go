package ledger

import (
	"cmp"
	"maps"
	"slices"
	"sync"
)

// Taken is what one consumer (a judge or advantage process) took in during a
// drain, for the end-of-drain comparison with the run ledgers
// (Ledger.Unreceived): the runs and apps of the trajectories it took, and the
// ids it set aside without a result of its own (dead-lettered, or acknowledged
// unwritten). Safe for concurrent use; the zero value is ready.
type Taken struct {
	mu    sync.Mutex
	runs  map[RunApp]bool
	aside map[string]bool
}

// RunApp names one app's trajectories of a run.
type RunApp struct{ Run, App string }

// Took records trajectory id of run and app; aside: it was set aside.
func (k *Taken) Took(run, app, id string, aside bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.runs == nil {
		k.runs = map[RunApp]bool{}
	}
	k.runs[RunApp{run, app}] = true
	if aside {
		k.setAside(id)
	}
}

// SetAside records that trajectory id was set aside (it is taken in, not
// lost), whether or not its run was recorded.
func (k *Taken) SetAside(id string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.setAside(id)
}

func (k *Taken) setAside(id string) {
	if k.aside == nil {
		k.aside = map[string]bool{}
	}
	k.aside[id] = true
}

// Runs returns the runs and apps taken, ordered by run then app, and a copy
// of the ids set aside.
func (k *Taken) Runs() ([]RunApp, map[string]bool) {
	k.mu.Lock()
	defer k.mu.Unlock()
	runs := slices.SortedFunc(maps.Keys(k.runs), func(a, b RunApp) int {
		return cmp.Or(cmp.Compare(a.Run, b.Run), cmp.Compare(a.App, b.App))
	})
	aside := maps.Clone(k.aside)
	if aside == nil {
		aside = map[string]bool{}
	}
	return runs, aside
}
