package advantage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Selection says which judged trajectories a shard set takes, as the
// flags give it (--runs, --checkpoints, --since). A trajectory is taken
// when it matches every part given; one that does not is acknowledged and
// counted as outside the selection, never written and never
// dead-lettered. The selection is part of the set's identity (Config.Set):
// another selection is another set, with its own consumer.
type Selection struct {
	// Runs are rollout run names (empty: any run).
	Runs []string
	// Checkpoints are planner checkpoint tags (empty: any checkpoint).
	Checkpoints []string
	// Since is "" (no time bound), SinceAll (every judged trajectory the
	// stream retains), an RFC 3339 time, or a duration back from when the
	// set is started ("36h"): only episodes started at or after it.
	Since string
}

// SinceAll is the Since that asks for every judged trajectory retained.
const SinceAll = "all"

// ErrNoSelection is returned when a new shard set is asked for without a
// selection: a new consumer would deliver every judged trajectory the
// stream retains, of every run and checkpoint.
var ErrNoSelection = service.Usage(errors.New("a new shard set needs a selection"))

// sinceMargin starts a consumer this much before Since: the judged
// message of an episode is stored after the episode started, unless the
// clocks of rollout's host and the NATS server disagree.
const sinceMargin = 10 * time.Minute

// IsZero reports whether nothing is selected (no --runs, --checkpoints
// or --since).
func (s Selection) IsZero() bool {
	return len(s.Runs) == 0 && len(s.Checkpoints) == 0 && s.Since == ""
}

// normalized splits comma-separated values, trims, drops empty and
// repeated values, and sorts.
func (s Selection) normalized() Selection {
	return Selection{Runs: service.NameList(s.Runs), Checkpoints: service.NameList(s.Checkpoints), Since: strings.TrimSpace(s.Since)}
}

// key is the selection's part of the set id ("" for none).
func (s Selection) key() string {
	if s.IsZero() {
		return ""
	}
	b, _ := json.Marshal(s)
	return string(b)
}

// resolve turns the flags into the recorded selection, a relative Since
// counted back from now.
func (s Selection) resolve(now time.Time) (shard.Selection, error) {
	out := shard.Selection{Runs: s.Runs, Checkpoints: s.Checkpoints}
	switch since := s.Since; {
	case since == "":
	case strings.EqualFold(since, SinceAll):
		out.All = true
	default:
		t, err := time.Parse(time.RFC3339, since)
		if err != nil {
			d, derr := time.ParseDuration(since)
			if derr != nil || d < 0 {
				return out, service.Usage(fmt.Errorf("advantage: --since %q: want an RFC 3339 time (2026-11-25T02:00:00Z), a duration back from now (36h) or %q", since, SinceAll))
			}
			t = now.Add(-d)
		}
		t = t.UTC()
		out.Since = &t
	}
	return out, nil
}

// selector matches trajectories against a resolved selection.
type selector struct {
	sel shard.Selection
	// apps, when not empty, are the set's apps: a trajectory of another
	// app whose name maps to the same subject token ("K.A" and "K_A")
	// arrives on the same subject and is not the set's.
	apps []string
}

// match reports whether t is selected, and if not, why.
func (x selector) match(t *traj.Trajectory) (bool, string) {
	if len(x.apps) > 0 && !slices.Contains(x.apps, t.Task.App) {
		return false, "app " + traj.QuoteName(t.Task.App) + ", which shares the subject of the set's " + strings.Join(x.apps, ", ")
	}
	if len(x.sel.Runs) > 0 && !slices.Contains(x.sel.Runs, t.Run) {
		return false, "run " + t.Run
	}
	if len(x.sel.Checkpoints) > 0 && !slices.Contains(x.sel.Checkpoints, t.Models.Planner.Checkpoint) {
		return false, "checkpoint " + t.Models.Planner.Checkpoint
	}
	if x.sel.Since != nil && t.StartedAt.Before(*x.sel.Since) {
		return false, "started " + t.StartedAt.UTC().Format(time.RFC3339)
	}
	return true, ""
}

// startTime is where a new consumer of the selection starts (zero: the
// stream's beginning).
func (x selector) startTime() time.Time {
	if x.sel.Since == nil {
		return time.Time{}
	}
	return x.sel.Since.Add(-sinceMargin)
}

func selectionKey(set string) string { return "select." + set }

// selection returns the set's recorded selection, recording it from the
// configuration when the set is new: a relative --since is resolved once,
// when the set starts, so every later process of the set reads the same
// bound. A new set (no record and no consumer) without a selection is
// refused with ErrNoSelection; a set made before selections were recorded
// (its consumer exists) continues as it was, reading everything.
func (st *state) selection(ctx context.Context, b *bus.Bus, durable string, given Selection, now time.Time) (shard.Selection, error) {
	key := selectionKey(st.set)
	read := func(cctx context.Context) (shard.Selection, bool, error) {
		e, err := st.kv.Get(cctx, key)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			return shard.Selection{}, false, nil
		}
		if err != nil {
			return shard.Selection{}, false, fmt.Errorf("advantage: read the selection of set %s: %w", st.set, err)
		}
		var sel shard.Selection
		if err := json.Unmarshal(e.Value(), &sel); err != nil {
			return sel, false, fmt.Errorf("advantage: selection of set %s: %w", st.set, err)
		}
		return sel, true, nil
	}
	cctx, cancel := context.WithTimeout(ctx, st.timeout)
	defer cancel()
	if sel, ok, err := read(cctx); ok || err != nil {
		return sel, err
	}
	var sel shard.Selection
	if given.IsZero() {
		exists, err := b.ConsumerExists(cctx, bus.StreamName(bus.Judged), durable)
		if err != nil {
			return sel, err
		}
		if !exists {
			return sel, fmt.Errorf("%w: give --runs NAME[,NAME] (rollout --run names), --checkpoints TAG[,TAG] or --since TIME|DURATION; "+
				"--since all takes every judged trajectory the stream still retains, of every run and checkpoint (without a selection a new --out would re-include all of them)", ErrNoSelection)
		}
		sel.All = true
	} else {
		var err error
		if sel, err = given.resolve(now); err != nil {
			return sel, err
		}
	}
	body, err := json.Marshal(sel)
	if err != nil {
		return sel, err
	}
	if _, err := st.kv.Create(cctx, key, body); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return sel, fmt.Errorf("advantage: record the selection of set %s: %w", st.set, err)
		}
		// Another process of the set was first: its record counts.
		rec, ok, rerr := read(cctx)
		if rerr != nil || !ok {
			return sel, cmp.Or(rerr, fmt.Errorf("advantage: the selection of set %s vanished", st.set))
		}
		return rec, nil
	}
	return sel, nil
}

// sourcesOf counts the judged trajectories ts and the rows they gave
// per (run, planner checkpoint).
func sourcesOf(ts []*traj.Trajectory, rows []shard.Row) []shard.Source {
	type key struct{ run, ckpt string }
	idx := map[key]int{}
	var out []shard.Source
	at := func(k key) *shard.Source {
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, shard.Source{Run: k.run, Checkpoint: k.ckpt})
		}
		return &out[i]
	}
	for _, t := range ts {
		at(key{t.Run, t.Models.Planner.Checkpoint}).Trajectories++
	}
	for i := range rows {
		at(key{rows[i].Run, rows[i].PolicyCheckpoint}).Rows++
	}
	return out
}

// mergeSources adds b's counts into a, by (run, checkpoint).
func mergeSources(a, b []shard.Source) []shard.Source {
	for _, s := range b {
		i := slices.IndexFunc(a, func(x shard.Source) bool { return x.Run == s.Run && x.Checkpoint == s.Checkpoint })
		if i < 0 {
			a = append(a, s)
			continue
		}
		a[i].Trajectories += s.Trajectories
		a[i].Rows += s.Rows
	}
	return a
}
