package vmpool

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"
)

// machineLocks holds the machine locks of one pool's VMs, keyed by
// VMSpec.Key: the locks the pool holds, the keys it waits for (another
// process holds them, or the pool lost them), the retries of those every
// Config.LockRetry, and the watch on each held lock that can be lost
// (LossNotifier). What a lock means for a VM (start it, let it go) is the
// pool's: machineLocks tells it through lockEvents.
//
// Invariants:
//   - mu guards held, wanted, looping and closed. The pool may call
//     machineLocks with its own mutex held (pool.mu before mu, never the
//     other way round); machineLocks calls lockEvents, the Locker and
//     Unlock without mu held.
//   - A key is in at most one of held and wanted.
//   - Every Lock that TryLock returns is unlocked exactly once: by release
//     (in the background), by close, or by the retries when m closed
//     while they asked for it.
//   - The retries run (looping) while wanted is not empty and the pool's
//     context has not ended; want starts them when they do not run.
//   - A lost lock is reported at most once (lockEvents.lost), and not
//     after it was released: a released lock's watch ends. The report
//     races with a release (it is sent without mu), so the pool checks
//     holds again under its own mutex.
type machineLocks struct {
	locker Locker
	retry  time.Duration
	log    *slog.Logger
	ctx    context.Context // the pool's: ends when the pool closes
	spawn  func(func())    // runs f in a goroutine the pool owns and waits for at Close
	events lockEvents

	mu      sync.Mutex
	held    map[string]*heldLock
	wanted  map[string]string // key → the note TryLock is asked with
	looping bool
	closed  bool
}

// lockEvents is what the pool does when the retries take a lock or a held
// lock is lost. They are called without machineLocks' mutex held, from
// goroutines the pool owns.
type lockEvents struct {
	taken func(key string, l Lock)    // a wanted key's lock was taken: the lock is held
	busy  func(key, holder string)    // a retry found the key held by holder
	lost  func(key string, l Lock)    // held lock l was lost: the pool releases it or wants it again
	fail  func(key string, err error) // a retry's TryLock failed
}

// heldLock is a held lock and the end of its loss watch.
type heldLock struct {
	l    Lock
	done chan struct{} // closed when the lock is released or m closes
}

func newMachineLocks(ctx context.Context, locker Locker, retry time.Duration, log *slog.Logger,
	spawn func(func()), events lockEvents) *machineLocks {
	return &machineLocks{
		locker: locker, retry: retry, log: log, ctx: ctx, spawn: spawn, events: events,
		held: map[string]*heldLock{}, wanted: map[string]string{},
	}
}

// try takes key's lock now. It returns the held lock; or a nil lock and
// the holder's description when another process holds it, and then key
// is wanted (the retries take it when it comes free); or TryLock's error.
// The caller must be able to spawn (the pool open, its mutex held).
func (m *machineLocks) try(key, note string) (Lock, string, error) {
	l, holder, err := m.locker.TryLock(key, note)
	if err != nil {
		return nil, "", err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if l == nil {
		m.wantLocked(key, note)
		return nil, holder, nil
	}
	m.holdLocked(key, l)
	return l, "", nil
}

// want makes key wanted: the retries take its lock when it comes free.
// The caller must be able to spawn.
func (m *machineLocks) want(key, note string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.wantLocked(key, note)
}

func (m *machineLocks) wantLocked(key, note string) {
	if m.closed || m.held[key] != nil {
		return
	}
	m.wanted[key] = note
	if !m.looping {
		m.looping = true
		m.spawn(m.retries)
	}
}

// holdLocked records l as key's held lock and watches it for a loss.
func (m *machineLocks) holdLocked(key string, l Lock) {
	h := &heldLock{l: l, done: make(chan struct{})}
	m.held[key] = h
	ln, ok := l.(LossNotifier)
	if !ok {
		return
	}
	lost := ln.Lost()
	m.spawn(func() {
		select {
		case <-lost:
		case <-h.done:
			return
		case <-m.ctx.Done():
			return
		}
		m.mu.Lock()
		still := !m.closed && m.held[key] == h
		m.mu.Unlock()
		if still {
			m.events.lost(key, l)
		}
	})
}

// holds reports whether l is key's held lock.
func (m *machineLocks) holds(key string, l Lock) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[key]
	return h != nil && h.l == l
}

// release lets key's held lock go, in the background (a Locker over the
// network may take a while; the pool's Close waits for it). The caller
// must be able to spawn.
func (m *machineLocks) release(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	h := m.held[key]
	if h == nil || m.closed {
		return
	}
	delete(m.held, key)
	close(h.done)
	m.spawn(func() {
		if err := h.l.Unlock(); err != nil {
			m.log.Debug("vmpool: unlock of a lost lock", "key", key, "err", err)
		}
	})
}

// lost reports whether key's held lock is known to be lost (at Close,
// when the loss events are no longer heeded).
func (m *machineLocks) lost(key string) bool {
	m.mu.Lock()
	h := m.held[key]
	m.mu.Unlock()
	if h == nil {
		return false
	}
	ln, ok := h.l.(LossNotifier)
	if !ok {
		return false
	}
	select {
	case <-ln.Lost():
		return true
	default:
		return false
	}
}

// close unlocks every held lock and stops wanting the others; it returns
// the errors of the unlocks by key. The pool calls it after waiting for
// its goroutines; should that wait have run out of time, retries still
// under way unlock what they take, and watches report nothing.
func (m *machineLocks) close() map[string]error {
	m.mu.Lock()
	m.closed = true
	held := m.held
	m.held, m.wanted = map[string]*heldLock{}, map[string]string{}
	m.mu.Unlock()
	errs := map[string]error{}
	for key, h := range held {
		close(h.done)
		if err := h.l.Unlock(); err != nil {
			errs[key] = err
		}
	}
	return errs
}

// retries asks the Locker, every m.retry, for the wanted keys' locks,
// without m.mu (it may take a while), and records what it gets under it;
// then it tells the pool. It ends when nothing is wanted or m closes.
func (m *machineLocks) retries() {
	t := time.NewTicker(m.retry)
	defer t.Stop()
	for {
		select {
		case <-m.ctx.Done():
			m.stopLooping()
			return
		case <-t.C:
		}
		m.mu.Lock()
		if m.closed || m.ctx.Err() != nil { // the tick and the end came together
			m.looping = false
			m.mu.Unlock()
			return
		}
		type try struct {
			key, note, holder string
			l                 Lock
			err               error
		}
		tries := make([]try, 0, len(m.wanted))
		for key, note := range m.wanted {
			tries = append(tries, try{key: key, note: note})
		}
		m.mu.Unlock()
		for i := range tries {
			tr := &tries[i]
			tr.l, tr.holder, tr.err = m.locker.TryLock(tr.key, tr.note)
		}
		m.mu.Lock()
		var taken, unwanted []try
		for _, tr := range tries {
			if tr.l == nil {
				continue
			}
			if _, ok := m.wanted[tr.key]; !ok || m.closed {
				unwanted = append(unwanted, tr) // m closed meanwhile
				continue
			}
			delete(m.wanted, tr.key)
			m.holdLocked(tr.key, tr.l)
			taken = append(taken, tr)
		}
		done := len(m.wanted) == 0 || m.closed
		if done {
			m.looping = false
		}
		m.mu.Unlock()
		for _, tr := range unwanted {
			_ = tr.l.Unlock()
		}
		for _, tr := range tries {
			switch {
			case tr.err != nil:
				m.events.fail(tr.key, tr.err)
			case tr.l == nil:
				m.events.busy(tr.key, tr.holder)
			}
		}
		for _, tr := range taken {
			m.events.taken(tr.key, tr.l)
		}
		if done {
			return
		}
	}
}

func (m *machineLocks) stopLooping() {
	m.mu.Lock()
	m.looping = false
	m.mu.Unlock()
}

// errLockLost is the error a VM records when its machine lock is lost.
var errLockLost = errors.New("the VM's machine lock was lost; another process may drive the VM now")
