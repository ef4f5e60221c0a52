package advantage

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/pkg/traj"
)

// errStopped fails the waiters of a commit that never happened because the
// service stopped.
var errStopped = errors.New("advantage: stopped before the rows were committed")

// pending is the open commit: the rows added to the open shard since the
// last commit, and the handlers waiting for them to be durable.
type pending struct {
	msgs    []string
	groups  []string
	counts  Counts
	started time.Time
	done    chan struct{}
	err     error
}

func newPending() *pending { return &pending{done: make(chan struct{})} }

// committer is group commit over one shard writer. Handlers add the rows
// of their message and wait; the open shard is committed — finished,
// uploaded, then recorded in the state bucket — when it is full, when
// every handler of the process is waiting, or when nothing was added for
// idle (or the oldest rows waited maxDelay); then every waiter is released
// to ack. A message is thus acked only after its rows are durable and
// recorded.
type committer struct {
	w        *shard.Writer
	st       *state
	workers  int
	idle     time.Duration
	maxDelay time.Duration
	onCommit func(Commit, time.Duration)

	mu       sync.Mutex
	cur      *pending
	working  int // handlers between begin and add/leave
	waiting  int // handlers waiting on cur
	lastAdd  time.Time
	commitMu sync.Mutex // one commit at a time
}

func newCommitter(w *shard.Writer, st *state, workers int, idle, maxDelay time.Duration) *committer {
	return &committer{w: w, st: st, workers: workers, idle: idle, maxDelay: maxDelay, cur: newPending()}
}

// begin marks a handler as working on rows.
func (c *committer) begin() {
	c.mu.Lock()
	c.working++
	c.mu.Unlock()
}

// leave marks a handler that began as done without adding rows.
func (c *committer) leave(ctx context.Context) {
	c.mu.Lock()
	c.working--
	flush := c.readyLocked(time.Now())
	c.mu.Unlock()
	if flush {
		c.flush(ctx, c.ready)
	}
}

// add appends one message's rows (possibly none) to the open commit and
// waits until it is committed; the error is the commit's. added (when not
// nil) is called once the rows are in the writer (or failed to go in),
// before the wait: the writer has copied them, so what they hold can be
// let go.
//
// A shard that is full already is committed first: otherwise every
// handler queued on mu ahead of the one committing it would add its rows
// to it (shards of 1.8 GB with --bytes-per-shard 512 MiB were seen).
func (c *committer) add(ctx context.Context, msg string, groups []string, rows []shard.Row, cnt Counts, added func()) error {
	c.mu.Lock()
	if len(rows) > 0 && c.w.Full() {
		c.mu.Unlock()
		c.flush(ctx, c.w.Full)
		c.mu.Lock()
	}
	c.working--
	var err error
	if len(rows) > 0 {
		err = c.w.Add(rows)
	}
	if added != nil {
		added()
	}
	if err != nil {
		c.mu.Unlock()
		// The open shard may hold part of the rows: abort it and make
		// everyone waiting on it try again.
		c.fail(fmt.Errorf("advantage: shard write: %w", err))
		return err
	}
	p := c.cur
	if p.started.IsZero() {
		p.started = time.Now()
	}
	p.msgs = append(p.msgs, msg)
	p.groups = append(p.groups, groups...)
	cnt.RowsPerApp = nil
	for _, r := range rows {
		if cnt.RowsPerApp == nil {
			cnt.RowsPerApp = map[string]int{}
		}
		cnt.RowsPerApp[r.App]++
	}
	p.counts.Merge(cnt)
	c.waiting++
	c.lastAdd = time.Now()
	flush := c.full()
	c.mu.Unlock()
	if flush {
		c.flush(ctx, c.full)
	}
	select {
	case <-p.done:
		return p.err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// readyLocked reports whether the open commit should be committed now
// without waiting for more rows.
func (c *committer) readyLocked(now time.Time) bool {
	if len(c.cur.msgs) == 0 {
		return false
	}
	if c.working == 0 && now.Sub(c.lastAdd) >= c.idle {
		return true
	}
	return now.Sub(c.cur.started) >= c.maxDelay
}

// ready is readyLocked now.
func (c *committer) ready() bool { return c.readyLocked(time.Now()) }

// full reports whether the open commit is to be committed at once: its
// shard is full, or every handler waits on it. Called with mu held.
func (c *committer) full() bool { return c.w.Full() || c.waiting >= c.workers }

// tick commits the open commit when it is ready; the service calls it
// periodically.
func (c *committer) tick(ctx context.Context) {
	c.mu.Lock()
	flush := c.readyLocked(time.Now())
	c.mu.Unlock()
	if flush {
		c.flush(ctx, c.ready)
	}
}

// flush commits the open commit: the shard (when it has rows), then the
// record; then it releases the waiters. The reason to commit, still (called
// with mu held), is checked again once flush has its turn: several
// handlers may have seen the same full shard, and the first one's commit
// answers them all, where each would otherwise commit the few rows added
// since as a small shard of their own.
func (c *committer) flush(ctx context.Context, still func() bool) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.mu.Lock()
	p := c.cur
	if len(p.msgs) == 0 || !still() {
		c.mu.Unlock()
		return
	}
	c.cur = newPending()
	c.waiting = 0
	began := time.Now()
	// The writer is only touched under mu; the commit (upload) runs with
	// mu held so no handler adds rows to a shard being finished.
	var file *shard.File
	var err error
	if c.w.Rows() > 0 {
		var f shard.File
		f, err = c.w.Commit(ctx)
		if err == nil {
			file = &f
		} else {
			c.w.Abort()
		}
	}
	c.mu.Unlock()
	if err == nil {
		rec := Commit{ID: traj.NewID(), Set: c.st.set, File: file, Messages: p.msgs, Groups: p.groups, Counts: p.counts, At: time.Now().UTC()}
		if err = c.st.record(context.WithoutCancel(ctx), rec); err == nil && c.onCommit != nil {
			c.onCommit(rec, time.Since(began))
		}
	}
	p.err = err
	close(p.done)
}

// fail aborts the open shard and releases its waiters with err.
func (c *committer) fail(err error) {
	c.commitMu.Lock()
	defer c.commitMu.Unlock()
	c.mu.Lock()
	p := c.cur
	c.cur = newPending()
	c.waiting = 0
	c.w.Abort()
	c.mu.Unlock()
	p.err = err
	close(p.done)
}
