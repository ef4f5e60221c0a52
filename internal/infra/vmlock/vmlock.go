// Package vmlock keeps VM pools on several hosts from driving one VM: a
// vmpool.Locker whose locks are keys of a JetStream key-value bucket with
// a TTL. The holder renews its key (compare-and-swap on the revision it
// wrote) every third of the TTL; a holder that dies stops renewing, and its
// key expires, so another pool takes the VM within the TTL.
package vmlock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/nats-io/nats.go/jetstream"
)

// Bucket is the key-value bucket of the VM locks: key = the VM's machine
// key (vmpool.VMSpec.Key, escaped with bus.KeyToken), value = who holds it.
const Bucket = "CODA_VMLOCKS"

// DefaultTTL is how long a lock outlives its holder's last renewal.
const DefaultTTL = 30 * time.Second

// Locker is a vmpool.Locker on the CODA_VMLOCKS bucket.
type Locker struct {
	kv      jetstream.KeyValue
	ttl     time.Duration
	timeout time.Duration
	owner   string // host and process, in every lock's value
	log     *slog.Logger
}

var (
	_ vmpool.Locker       = (*Locker)(nil)
	_ vmpool.LossNotifier = (*held)(nil)
)

// Open creates (with t's replicas and ttl as the bucket's TTL; DefaultTTL
// when ttl <= 0) or opens the lock bucket. An existing bucket keeps its
// TTL unless t.Update; the locks renew at a third of the bucket's TTL.
func Open(ctx context.Context, b *bus.Bus, t bus.Topology, ttl time.Duration, log *slog.Logger) (*Locker, error) {
	if ttl <= 0 {
		ttl = DefaultTTL
	}
	if log == nil {
		log = slog.Default()
	}
	kv, err := b.EnsureKeyValue(ctx, t, bus.KeyValueConfig(Bucket, "codapipe VM locks shared by rollout hosts (key: VM machine key; expire unless renewed)", ttl))
	if err != nil {
		return nil, fmt.Errorf("vmlock: %w", err)
	}
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if st, err := kv.Status(cctx); err == nil && st.TTL() > 0 {
		ttl = st.TTL()
	}
	host, _ := os.Hostname()
	return &Locker{kv: kv, ttl: ttl, timeout: min(5*time.Second, ttl/3), owner: fmt.Sprintf("host=%s pid=%d", host, os.Getpid()), log: log}, nil
}

// TTL is the lock lifetime without renewal.
func (l *Locker) TTL() time.Duration { return l.ttl }

// TryLock takes key's lock when no live holder has it, and keeps renewing
// it until Unlock. It returns the holder's description when another holds
// it.
func (l *Locker) TryLock(key, note string) (vmpool.Lock, string, error) {
	k := bus.KeyToken(key)
	// lock= tells this take's writes from any other's (renew's check of
	// a write whose answer was lost).
	val := []byte(fmt.Sprintf("%s key=%s %s since=%s lock=%016x", l.owner, key, note, time.Now().UTC().Format(time.RFC3339), rand.Uint64()))
	ctx, cancel := context.WithTimeout(context.Background(), l.timeout)
	defer cancel()
	sent := time.Now()
	rev, err := l.kv.Create(ctx, k, val)
	if errors.Is(err, jetstream.ErrKeyExists) {
		e, gerr := l.kv.Get(ctx, k)
		switch {
		case errors.Is(gerr, jetstream.ErrKeyNotFound):
			return nil, "a holder whose lock just expired", nil
		case gerr != nil:
			return nil, "", fmt.Errorf("vmlock: read lock %s: %w", key, gerr)
		}
		return nil, string(e.Value()), nil
	}
	if err != nil {
		return nil, "", fmt.Errorf("vmlock: lock %s: %w", key, err)
	}
	rctx, lose := context.WithCancel(context.Background())
	h := &held{l: l, key: key, k: k, val: val, rev: rev, sent: sent, rctx: rctx, lose: lose, lostCh: make(chan struct{})}
	h.mu.Lock()
	h.expiry = time.AfterFunc(time.Until(h.deadlineLocked()), h.expire)
	h.mu.Unlock()
	h.stopRenew = bus.Every(rctx, l.ttl/3, h.renew)
	return h, "", nil
}

// held is a lock this process holds.
type held struct {
	l   *Locker
	key string
	k   string
	val []byte
	// stopRenew stops the renewals and waits for them; lose ends them
	// from within, once the lock is lost, and cancels rctx, under which a
	// renewal's requests run (so that it does not hold Unlock up).
	stopRenew func()
	rctx      context.Context
	lose      context.CancelFunc

	lostCh chan struct{} // closed when the lock is lost

	mu       sync.Mutex
	rev      uint64
	sent     time.Time   // when the write of rev was sent: the key lives at least a TTL from then
	expiry   *time.Timer // at deadlineLocked: the lock is lost unless a renewal was written since
	lost     bool
	unlocked bool
}

// Lost is closed once this holder can no longer be sure it holds the
// lock: a renewal was refused (the key expired and another holder may
// have it), or no renewal was written for nine tenths of the TTL (a holder
// cut off from NATS, or stalled), so that the key may expire soon.
func (h *held) Lost() <-chan struct{} { return h.lostCh }

// deadlineLocked is when the lock is taken for lost unless a renewal is
// written before: a tenth of the TTL before the key can expire, which is a
// TTL after the last write was sent, or later.
func (h *held) deadlineLocked() time.Time { return h.sent.Add(h.l.ttl - h.l.ttl/10) }

// expire runs at the deadline: the lock is lost unless a renewal moved
// the deadline meanwhile.
func (h *held) expire() {
	h.mu.Lock()
	deadline, last := h.deadlineLocked(), h.sent
	h.mu.Unlock()
	if time.Now().Before(deadline) {
		return // renewed: the timer was set again
	}
	h.loseLock(fmt.Errorf("no renewal written for %v (TTL %v)", time.Since(last).Round(time.Millisecond), h.l.ttl))
}

// renew rewrites the key (every third of the TTL), only over the
// revision it wrote last. A failure that may pass (NATS unreachable, a
// leader election) is retried every second (a tenth of the TTL if that
// is shorter) until a write goes through, or the deadline takes the lock
// for lost; a renewal refused means the lock expired and another took it
// — unless an earlier try of this renewal was written after all and only
// its answer was lost. A lost lock's Lost channel is closed and its
// renewals end.
func (h *held) renew(ctx context.Context) {
	retry := min(time.Second, h.l.ttl/10)
	var firstTry time.Time // when the first failed try of this renewal was sent
	for {
		h.mu.Lock()
		rev := h.rev
		h.mu.Unlock()
		// Under rctx, not ctx: Unlock waits for a renewal under way rather
		// than cancel it and take the cancellation for a lost lock.
		uctx, cancel := context.WithTimeout(h.rctx, h.l.timeout)
		sent := time.Now()
		next, err := h.l.kv.Update(uctx, h.k, h.val, rev)
		cancel()
		switch {
		case err == nil:
			h.renewed(next, sent)
			return
		case !bus.IsTransient(err):
			if !firstTry.IsZero() {
				if rev, ok := h.ownWrite(); ok {
					// Written at the earliest when the first try was sent.
					h.renewed(rev, firstTry)
					return
				}
			}
			h.loseLock(err)
			return
		}
		if firstTry.IsZero() {
			firstTry = sent
		}
		h.l.log.Warn("vmlock: could not renew a VM lock; retrying", "key", h.key, "retry", retry, "err", err)
		t := time.NewTimer(retry)
		select {
		case <-ctx.Done(): // Unlock, or the deadline took the lock for lost
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// renewed records a renewal written as revision rev, sent at sent.
func (h *held) renewed(rev uint64, sent time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.rev, h.sent = rev, sent
	if !h.lost && !h.unlocked {
		h.expiry.Reset(time.Until(h.deadlineLocked()))
	}
}

// ownWrite reads the key: its revision, when it holds this lock's value
// (a renewal whose answer was lost was written).
func (h *held) ownWrite() (uint64, bool) {
	ctx, cancel := context.WithTimeout(h.rctx, h.l.timeout)
	defer cancel()
	e, err := h.l.kv.Get(ctx, h.k)
	if err != nil || !bytes.Equal(e.Value(), h.val) {
		return 0, false
	}
	return e.Revision(), true
}

// loseLock marks the lock lost, once (not after Unlock): Lost's channel
// closes and the renewals end.
func (h *held) loseLock(err error) {
	h.mu.Lock()
	first := !h.lost && !h.unlocked
	h.lost = true
	h.mu.Unlock()
	if !first {
		return
	}
	h.l.log.Error("vmlock: VM lock lost (it expired, or may expire before a renewal, and another holder may take it)", "key", h.key, "err", err)
	close(h.lostCh)
	h.lose()
}

// Unlock stops renewing and deletes the key if it is still this holder's
// (also after a loss: a renewal may have been written after all). The
// delete of a lost lock is a courtesy: its failure is not reported.
func (h *held) Unlock() error {
	h.mu.Lock()
	h.unlocked = true
	h.expiry.Stop()
	h.mu.Unlock()
	h.stopRenew()
	h.lose()
	h.mu.Lock()
	rev, lost := h.rev, h.lost
	h.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), h.l.timeout)
	defer cancel()
	if err := h.l.kv.Delete(ctx, h.k, jetstream.LastRevision(rev)); err != nil && !lost {
		return fmt.Errorf("vmlock: unlock %s: %w", h.key, err)
	}
	return nil
}
