package advantage

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

// StateBucket is the JetStream key-value bucket of the advantage service:
// commit records of shard sets ("commit.<set>.<id>"), outcome-mode
// groups still waiting for members ("group.<set>.<group>"), and the
// leases that make one process at a time write an outcome group
// ("flush.<set>.<group>") or the set's manifest ("manifest.<set>").
const StateBucket = "CODA_ADVANTAGE"

// Counts counts what a commit (or a whole shard set) holds.
type Counts struct {
	Trajectories int `json:"trajectories"` // judged trajectories taken in (rows or not)
	Groups       int `json:"groups"`       // groups built, dropped ones included
	KeptGroups   int `json:"kept_groups"`  // groups that gave rows
	ZeroVariance int `json:"zero_variance_groups"`
	Dropped      int `json:"dropped_groups"`
	Excluded     int `json:"excluded_trajectories,omitempty"` // outcome mode: left out of their group
	Rows         int `json:"rows"`
	// RowsPerApp counts rows by app.
	RowsPerApp map[string]int `json:"rows_per_app"`
	// Sources counts trajectories and rows by run and planner checkpoint
	// (absent in commit records written before it was kept).
	Sources []shard.Source `json:"sources,omitempty"`
}

func (c *Counts) add(s grpo.Summary) {
	c.Groups += s.Groups
	c.KeptGroups += s.KeptGroups
	c.ZeroVariance += s.ZeroVariance
	c.Dropped += s.DroppedGroups
}

// Merge adds o to c.
func (c *Counts) Merge(o Counts) {
	c.Trajectories += o.Trajectories
	c.Groups += o.Groups
	c.KeptGroups += o.KeptGroups
	c.ZeroVariance += o.ZeroVariance
	c.Dropped += o.Dropped
	c.Excluded += o.Excluded
	c.Rows += o.Rows
	c.Sources = mergeSources(c.Sources, o.Sources)
	for a, n := range o.RowsPerApp {
		if c.RowsPerApp == nil {
			c.RowsPerApp = map[string]int{}
		}
		c.RowsPerApp[a] += n
	}
}

// Commit is the record of one commit: the shard it wrote (none when its
// trajectories gave no rows) and the messages and groups it holds. Its
// put in the state bucket is the commit point: a shard without a record is
// not part of the set (a crash between the upload and the record leaves
// an orphan file no manifest lists), a message with one is never written
// again.
type Commit struct {
	ID       string      `json:"id"`
	Set      string      `json:"set"`
	File     *shard.File `json:"file,omitempty"`
	Messages []string    `json:"messages"`         // judged message ids (trajectory.version)
	Groups   []string    `json:"groups,omitempty"` // outcome mode: group ids
	Counts   Counts      `json:"counts"`
	At       time.Time   `json:"at"`
}

// Member is one judged trajectory of an outcome-mode group in waiting.
type Member struct {
	ID      string `json:"trajectory_id"`
	Message string `json:"message"` // judged message id
	Archive string `json:"archive"` // judged archive key
}

// Group is an outcome-mode group waiting for its K members.
type Group struct {
	ID      string   `json:"id"`
	Run     string   `json:"run"`
	Samples int      `json:"samples"` // K
	Members []Member `json:"members"`
}

// Complete reports whether all K members are in.
func (g *Group) Complete() bool { return len(g.Members) >= g.Samples }

// state is the service's view of the state bucket for one set: the
// messages and groups already committed (kept current by a watch, so a
// message committed by another process is known before it could be
// redelivered).
type state struct {
	kv      jetstream.KeyValue
	set     string
	timeout time.Duration
	owner   string // this process's id in leases

	mu       sync.Mutex
	messages map[string]bool
	groups   map[string]bool
	commits  map[string]Commit
}

func openState(ctx context.Context, b *bus.Bus, t bus.Topology, set string) (*state, error) {
	kv, err := b.EnsureKeyValue(ctx, t, bus.KeyValueConfig(StateBucket, "codapipe advantage: shard-set commit records and outcome groups in waiting", 0))
	if err != nil {
		return nil, fmt.Errorf("advantage: state bucket: %w", err)
	}
	return &state{kv: kv, set: set, timeout: 10 * time.Second, owner: traj.NewID(),
		messages: map[string]bool{}, groups: map[string]bool{}, commits: map[string]Commit{}}, nil
}

func (s *state) commitPrefix() string { return "commit." + s.set + "." }
func (s *state) groupKey(id string) string {
	return "group." + s.set + "." + bus.KeyToken(id)
}

// watch loads every commit record of the set and keeps loading new ones
// until ctx ends; it returns once the records present at the start are
// loaded, and the goroutine it starts is waited for by wait.
func (s *state) watch(ctx context.Context) (wait func(), err error) {
	w, err := s.kv.Watch(ctx, s.commitPrefix()+">", jetstream.IgnoreDeletes())
	if err != nil {
		return nil, fmt.Errorf("advantage: watch commits: %w", err)
	}
	ready := make(chan struct{})
	done := make(chan struct{})
	go func() { // owned by the caller through wait
		defer close(done)
		defer w.Stop()
		first := true
		for {
			select {
			case <-ctx.Done():
				return
			case e, ok := <-w.Updates():
				if !ok {
					return
				}
				if e == nil {
					if first {
						first = false
						close(ready)
					}
					continue
				}
				var c Commit
				if err := json.Unmarshal(e.Value(), &c); err == nil {
					s.learn(c)
				}
			}
		}
	}()
	select {
	case <-ready:
	case <-ctx.Done():
		<-done
		return nil, ctx.Err()
	}
	return func() { <-done }, nil
}

// learn records a commit as known.
func (s *state) learn(c Commit) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commits[c.ID] = c
	for _, m := range c.Messages {
		s.messages[m] = true
	}
	for _, g := range c.Groups {
		s.groups[g] = true
	}
}

func (s *state) messageDone(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.messages[id]
}

func (s *state) groupDone(id string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.groups[id]
}

// record stores a commit record: the commit point.
func (s *state) record(ctx context.Context, c Commit) error {
	body, err := json.Marshal(c)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if _, err := s.kv.Put(cctx, s.commitPrefix()+c.ID, body); err != nil {
		return fmt.Errorf("advantage: record commit %s: %w", c.ID, err)
	}
	s.learn(c)
	return nil
}

// committed returns every commit record of the set, read from the bucket
// (not only those this process has seen), ordered by id.
func (s *state) committed(ctx context.Context) ([]Commit, error) {
	return readRecords[Commit](ctx, s.kv, s.commitPrefix()+">", "commit")
}

// readRecords reads every JSON record of the bucket whose key matches
// filter, ordered by key, within a minute; what names one record in
// errors. A record deleted between the listing and its read is left out.
func readRecords[T any](ctx context.Context, kv jetstream.KeyValue, filter, what string) ([]T, error) {
	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	lister, err := kv.ListKeysFiltered(cctx, filter)
	if err != nil {
		return nil, fmt.Errorf("advantage: list %ss: %w", what, err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	out := make([]T, 0, len(keys))
	for _, k := range keys {
		e, err := kv.Get(cctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("advantage: read %s %s: %w", what, k, err)
		}
		var rec T
		if err := json.Unmarshal(e.Value(), &rec); err != nil {
			return nil, fmt.Errorf("advantage: %s %s: %w", what, k, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// addMember adds m to the group (created with K = samples when missing)
// with compare-and-set, and returns the group as stored.
func (s *state) addMember(ctx context.Context, id, run string, samples int, m Member) (*Group, error) {
	key := s.groupKey(id)
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	for attempt := 0; ; attempt++ {
		var g Group
		var rev uint64
		e, err := s.kv.Get(cctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
			g = Group{ID: id, Run: run, Samples: samples}
		case err != nil:
			return nil, fmt.Errorf("advantage: group %s: %w", id, err)
		default:
			if err := json.Unmarshal(e.Value(), &g); err != nil {
				return nil, fmt.Errorf("advantage: group %s: %w", id, err)
			}
			rev = e.Revision()
		}
		if slices.ContainsFunc(g.Members, func(x Member) bool { return x.ID == m.ID }) {
			return &g, nil
		}
		g.Members = append(g.Members, m)
		slices.SortFunc(g.Members, func(a, b Member) int { return strings.Compare(a.ID, b.ID) })
		body, err := json.Marshal(g)
		if err != nil {
			return nil, err
		}
		if rev == 0 {
			_, err = s.kv.Create(cctx, key, body)
		} else {
			_, err = s.kv.Update(cctx, key, body, rev)
		}
		if err == nil {
			return &g, nil
		}
		if attempt >= 20 || cctx.Err() != nil {
			return nil, fmt.Errorf("advantage: group %s: %w", id, err)
		}
		// Another process changed the group first: read it again.
	}
}

// waiting returns every outcome group of the set in waiting.
func (s *state) waiting(ctx context.Context) ([]Group, error) {
	return readRecords[Group](ctx, s.kv, "group."+s.set+".>", "group")
}

// forget deletes a committed group's waiting record.
func (s *state) forget(ctx context.Context, id string) error {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return s.kv.Delete(cctx, s.groupKey(id))
}

// A lease is a claim on a piece of work shared by the advantage processes
// of one set, kept in the state bucket under one key and changed only by
// compare-and-swap: an outcome group's flush ("flush.<set>.<group>", whose
// record says Done once the group is committed) and the set's manifest
// ("manifest.<set>", the single writer of manifest.json at a time). The
// holder names itself (Owner, one id per process) and holds it Until a
// time; a lease whose time has passed (its holder died, or stalls past it)
// may be taken by another process.
type leaseRec struct {
	Owner string    `json:"owner,omitempty"`
	Until time.Time `json:"until"`
	// Done: the work is done for good (an outcome group committed).
	Done bool `json:"done,omitempty"`
	// Commits is, for the manifest lease, how many commit records the
	// last manifest written listed: a writer with fewer leaves it.
	Commits int `json:"commits,omitempty"`
}

// lease is a held (or, with rec.Done, finished) lease.
type lease struct {
	key string
	rev uint64
	rec leaseRec
}

// heldError says another process holds a lease until a time.
type heldError struct {
	key   string
	owner string
	until time.Time
}

func (e *heldError) Error() string {
	return fmt.Sprintf("advantage: %s held by process %s until %s", e.key, e.owner, e.until.Format(time.RFC3339Nano))
}

func (s *state) flushKey(group string) string { return "flush." + s.set + "." + bus.KeyToken(group) }
func (s *state) manifestKey() string          { return "manifest." + s.set }

// acquire takes the lease on key for ttl: it creates it, renews it when
// this process holds it, or takes it over when its time has passed. A
// lease marked Done is returned as it is (not taken); one another process
// holds gives a *heldError.
func (s *state) acquire(ctx context.Context, key string, ttl time.Duration) (lease, error) {
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	var last error
	for attempt := 0; attempt < 20 && cctx.Err() == nil; attempt++ {
		var rec leaseRec
		var rev uint64
		e, err := s.kv.Get(cctx, key)
		switch {
		case errors.Is(err, jetstream.ErrKeyNotFound):
		case err != nil:
			last = err
			continue
		default:
			if err := json.Unmarshal(e.Value(), &rec); err != nil {
				return lease{}, fmt.Errorf("advantage: lease %s: %w", key, err)
			}
			rev = e.Revision()
		}
		if rec.Done {
			return lease{key: key, rev: rev, rec: rec}, nil
		}
		now := time.Now()
		if rec.Owner != "" && rec.Owner != s.owner && now.Before(rec.Until) {
			return lease{}, &heldError{key: key, owner: rec.Owner, until: rec.Until}
		}
		rec.Owner, rec.Until = s.owner, now.Add(ttl)
		body, err := json.Marshal(rec)
		if err != nil {
			return lease{}, err
		}
		if rev == 0 {
			rev, err = s.kv.Create(cctx, key, body)
		} else {
			rev, err = s.kv.Update(cctx, key, body, rev)
		}
		if err == nil {
			return lease{key: key, rev: rev, rec: rec}, nil
		}
		last = err // another process changed it first, or a transient error: read it again
	}
	return lease{}, fmt.Errorf("advantage: lease %s: %w", key, errors.Join(last, cctx.Err()))
}

// release gives a held lease back, recording done and commits with it. A
// release that fails leaves the lease to expire.
func (s *state) release(ctx context.Context, l lease, done bool, commits int) error {
	rec := leaseRec{Done: done || l.rec.Done, Commits: max(commits, l.rec.Commits)}
	body, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	cctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	return bus.RetryTransient(cctx, s.timeout, func(ctx context.Context) error {
		_, err := s.kv.Update(ctx, l.key, body, l.rev)
		return err
	}, nil)
}

// markGroupDone records a group committed (by any process) as known.
func (s *state) markGroupDone(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.groups[id] = true
}
