package advantage

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codapipe/codapipe/pkg/traj"
)

// A shard set is bound to one judge version (traj.JudgeVersion.ID), as a
// run is bound to one planner checkpoint: its rows all rest on judgements
// of that version, so a trajectory judged again by another judge (another
// policy, prompt or model: another message on the judged stream) never
// gives its rows a second time. The binding is recorded once per set in
// the state bucket ("judge.<set>", created with compare-and-set, so the
// processes of a set agree): the version --judge-version names, or else
// the first version the set takes. Judgements of other versions are
// acknowledged and counted (Stats.OtherJudgeVersion), never written.

// judgeBinding is the record of a set's judge version.
type judgeBinding struct {
	ID    string            `json:"judge_version"`
	Judge traj.JudgeVersion `json:"judge,omitzero"` // the version's parts, when known
	// Given is true when --judge-version chose it.
	Given bool `json:"given,omitempty"`
}

func judgeKey(set string) string { return "judge." + set }

// binder holds a set's judge version once bound, and the judge versions it
// turned away (each logged once).
type binder struct {
	st *state

	mu     sync.Mutex
	bound  *judgeBinding
	logged map[string]bool
}

// readBinding reads the set's recorded judge version (nil: none yet).
func (st *state) readBinding(ctx context.Context) (*judgeBinding, error) {
	cctx, cancel := context.WithTimeout(ctx, st.timeout)
	defer cancel()
	e, err := st.kv.Get(cctx, judgeKey(st.set))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("advantage: read the judge version of set %s: %w", st.set, err)
	}
	var b judgeBinding
	if err := json.Unmarshal(e.Value(), &b); err != nil || b.ID == "" {
		return nil, fmt.Errorf("advantage: judge version of set %s: %q is not a binding record (%v)", st.set, e.Value(), err)
	}
	return &b, nil
}

// bindJudge records b as the set's judge version unless one is recorded
// already, and returns the one recorded: the first process to bind the
// set wins, the others read its record.
func (st *state) bindJudge(ctx context.Context, b judgeBinding) (*judgeBinding, error) {
	body, err := json.Marshal(b)
	if err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, st.timeout)
	defer cancel()
	if _, err := st.kv.Create(cctx, judgeKey(st.set), body); err != nil {
		if !errors.Is(err, jetstream.ErrKeyExists) {
			return nil, fmt.Errorf("advantage: record the judge version of set %s: %w", st.set, err)
		}
		rec, rerr := st.readBinding(ctx)
		if rerr != nil || rec == nil {
			return nil, cmp.Or(rerr, fmt.Errorf("advantage: the judge version of set %s vanished", st.set))
		}
		return rec, nil
	}
	return &b, nil
}

// committedVersion is the judge version of most messages the set's commit
// records hold ("" none; ties: the smaller id): what a set made before
// sets were bound is bound to when it continues.
func (st *state) committedVersion() string {
	st.mu.Lock()
	defer st.mu.Unlock()
	n := map[string]int{}
	for id := range st.messages {
		// Judged message ids only (outcome commits also hold "group:…").
		if i := strings.LastIndexByte(id, '.'); i >= 0 && !strings.HasPrefix(id, "group:") && traj.ValidJudgeVersionID(id[i+1:]) {
			n[id[i+1:]]++
		}
	}
	best := ""
	for _, v := range slices.Sorted(maps.Keys(n)) {
		if best == "" || n[v] > n[best] {
			best = v
		}
	}
	return best
}

// start binds the set at start when its version is known then: the one
// given (--judge-version), else the one a set made before bindings
// mostly holds. A set with neither is bound by its first judgement
// (take).
func (b *binder) start(ctx context.Context, given string) (*judgeBinding, error) {
	rec, err := b.st.readBinding(ctx)
	if err != nil {
		return nil, err
	}
	if rec == nil {
		v := cmp.Or(given, b.st.committedVersion())
		if v == "" {
			return nil, nil
		}
		if rec, err = b.st.bindJudge(ctx, judgeBinding{ID: v, Given: given != ""}); err != nil {
			return nil, err
		}
	}
	if given != "" && rec.ID != given {
		return nil, fmt.Errorf("advantage: set %s is bound to judge version %s, not %s", b.st.set, rec.ID, given)
	}
	b.mu.Lock()
	b.bound = rec
	b.mu.Unlock()
	return rec, nil
}

// take reports whether a judgement of version v belongs to the set,
// binding the set to v when it has no version yet.
func (b *binder) take(ctx context.Context, v traj.JudgeVersion) (ok, first bool, bound string, err error) {
	id := v.ID()
	b.mu.Lock()
	rec := b.bound
	b.mu.Unlock()
	if rec == nil {
		if rec, err = b.st.bindJudge(ctx, judgeBinding{ID: id, Judge: v}); err != nil {
			return false, false, "", err
		}
		b.mu.Lock()
		b.bound = rec
		b.mu.Unlock()
	}
	if rec.ID == id {
		return true, false, id, nil
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.logged == nil {
		b.logged = map[string]bool{}
	}
	first = !b.logged[id]
	b.logged[id] = true
	return false, first, rec.ID, nil
}

// boundVersion is the set's judge version ("" not bound yet).
func (b *binder) boundVersion() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.bound == nil {
		return ""
	}
	return b.bound.ID
}

// current is the set's judge version, read from the state bucket when
// this process has not bound it ("" none yet).
func (b *binder) current(ctx context.Context) (string, error) {
	if v := b.boundVersion(); v != "" {
		return v, nil
	}
	rec, err := b.st.readBinding(ctx)
	if err != nil || rec == nil {
		return "", err
	}
	b.mu.Lock()
	if b.bound == nil {
		b.bound = rec
	}
	b.mu.Unlock()
	return rec.ID, nil
}

// JudgeVersionNotes says, one line per judge version, which judgements
// were acknowledged unwritten because the set is bound to another judge
// version, and how to make a set of them: the text the command prints and
// the summary keeps.
func JudgeVersionNotes(st Stats) []string {
	var out []string
	for _, v := range slices.Sorted(maps.Keys(st.OtherJudgeVersion)) {
		out = append(out, fmt.Sprintf("%d judgements of judge version %s skipped: the set is bound to judge version %s; "+
			"advantage --judge-version %s makes a set of those (another set, in its own folder under --out)",
			st.OtherJudgeVersion[v], v, st.JudgeVersion, v))
	}
	return out
}
