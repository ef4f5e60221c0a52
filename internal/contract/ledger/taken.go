package ledger

import (
	"cmp"
	"context"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/codapipe/codapipe/internal/infra/bus"
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

// TrajectoryOf returns the trajectory id a stream message id names: the raw
// stream's <id>, or <id>~<tag> for an episode run again (rollout --verify),
// and the judged stream's <id>.<judge version> (archive.MessageID).
func TrajectoryOf(msgID string) string {
	if i := strings.IndexAny(msgID, ".~"); i >= 0 {
		return msgID[:i]
	}
	return msgID
}

// DeadLetters are the trajectories some consumer (any judge or advantage
// process) dead-lettered, read from the bus once per subject, for the
// end-of-drain comparison: a trajectory dead-lettered was received, not
// lost. Not safe for concurrent use.
type DeadLetters struct {
	Bus  *bus.Bus
	read map[string]map[string]bool // by subject: the trajectory ids
}

// Remove returns missing without the trajectories dead-lettered from any
// of subjects. On an error (the dead letters could not be read) it
// returns missing as it is, with the error.
func (d *DeadLetters) Remove(ctx context.Context, missing []string, subjects ...string) ([]string, error) {
	if d.read == nil {
		d.read = map[string]map[string]bool{}
	}
	dead := map[string]bool{}
	for _, subj := range subjects {
		ids, ok := d.read[subj]
		if !ok {
			msgs, err := d.Bus.DeadLetterIDs(ctx, subj)
			if err != nil {
				return missing, err
			}
			ids = map[string]bool{}
			for _, m := range msgs {
				ids[TrajectoryOf(m)] = true
			}
			d.read[subj] = ids
		}
		maps.Copy(dead, ids)
	}
	return slices.DeleteFunc(slices.Clone(missing), func(id string) bool { return dead[id] }), nil
}

// UnreceivedFunc has Ledger.Unreceived's signature (a stand-in where a
// consumer is given the comparison rather than the ledger).
type UnreceivedFunc func(ctx context.Context, run string, have func(id string) bool) (missing []string, listed int, finished bool, err error)

// Lost is the end-of-drain check of one run and app: the trajectories
// unreceived (Ledger.Unreceived) finds the run's ledger lists as published
// and have does not know, less those some process dead-lettered from
// subjects (Remove), sorted, and how many the ledger lists. err is
// unreceived's; readErr says why the dead letters could not be read, and
// lost is then what the ledger alone finds missing.
func (d *DeadLetters) Lost(ctx context.Context, unreceived UnreceivedFunc, run string, have func(id string) bool, subjects ...string) (lost []string, listed int, readErr, err error) {
	missing, listed, _, err := unreceived(ctx, run, have)
	if err != nil || len(missing) == 0 {
		return nil, listed, nil, err
	}
	lost, readErr = d.Remove(ctx, missing, subjects...)
	return lost, listed, readErr, nil
}
