package vmlock

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/poolfile"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const testTTL = 2 * time.Second

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// openLocker opens a Locker with the TTL testTTL on its own connection to
// srv (a host of its own, as far as NATS can tell).
func openLocker(t *testing.T, srv *natstest.Server, name string) (*Locker, *bus.Bus) {
	t.Helper()
	return openLockerTTL(t, srv, name, testTTL)
}

// openLockerTTL is openLocker with the TTL ttl.
func openLockerTTL(t *testing.T, srv *natstest.Server, name string, ttl time.Duration) (*Locker, *bus.Bus) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, bus.Config{URL: srv.URL(), Name: name, Logger: quiet(), Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	l, err := Open(ctx, b, bus.DefaultTopology(), ttl, quiet())
	if err != nil {
		t.Fatal(err)
	}
	return l, b
}

// Two holders over the same key: never both hold it, while the holder
// lives (renewing past the TTL); when its connection dies without an
// Unlock (a killed host), the other takes the lock within the TTL.
func TestLockExcludesAndExpires(t *testing.T) {
	srv := natstest.Start(t)
	l1, b1 := openLocker(t, srv, "host-1")
	l2, _ := openLocker(t, srv, "host-2")
	const key = "sim:http://127.0.0.1:5000"
	h1, holder, err := l1.TryLock(key, "pool=a vm=x")
	if err != nil || h1 == nil {
		t.Fatalf("first lock: %v, holder %q", err, holder)
	}
	// Two TTLs: the holder's renewals keep it (without them the lock
	// would expire within the first).
	deadline := time.Now().Add(2 * testTTL)
	for time.Now().Before(deadline) {
		h2, holder, err := l2.TryLock(key, "pool=b vm=x")
		if err != nil {
			t.Fatal(err)
		}
		if h2 != nil {
			t.Fatal("both hosts hold the lock")
		}
		if !strings.Contains(holder, "pool=a vm=x") {
			t.Errorf("holder %q does not name the holder", holder)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// An orderly Unlock frees it at once.
	if err := h1.Unlock(); err != nil {
		t.Fatal(err)
	}
	h2, holder, err := l2.TryLock(key, "pool=b vm=x")
	if err != nil || h2 == nil {
		t.Fatalf("after Unlock: %v, holder %q", err, holder)
	}
	if err := h2.Unlock(); err != nil {
		t.Fatal(err)
	}

	// The holder dies: no Unlock, no renewal.
	if h1, _, err = l1.TryLock(key, "pool=a vm=x"); err != nil || h1 == nil {
		t.Fatalf("lock again: %v", err)
	}
	b1.Close()
	died := time.Now()
	var taken vmpool.Lock
	poll.Until(t, "the other host takes the dead holder's lock", 3*testTTL, func() bool {
		taken, _, err = l2.TryLock(key, "pool=b vm=x")
		return err == nil && taken != nil
	})
	t.Logf("taken over %v after the holder died (TTL %v)", time.Since(died).Round(10*time.Millisecond), testTTL)
	_ = h1.Unlock() // lost: nothing to release
	if err := taken.Unlock(); err != nil {
		t.Fatal(err)
	}
}

// Two VM pools over the same simulated VMs, each with its own Locker
// connection: the second gets no VM while the first lives; when the
// first's host is cut off (its connection closes, no Unlock), the first
// lets its VMs go (the leased one's Lost closes) and the second takes
// them within the TTL.
func TestPoolsShareVMsThroughNATS(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wc := sim.DefaultWorldConfig()
	wc.VMs, wc.Seed, wc.Clock = 2, 1, fault.Clock{Scale: 0.001}
	world := servertest.Serve(t, "the simulated world", func(ctx context.Context) (*sim.World, error) { return sim.StartWorld(ctx, wc) })
	sc := simvm.URLs(world.GuestURLs...)
	newPool := func(name string, l *Locker) *vmpool.Pool {
		cfg := poolfile.Config{Backend: simvm.Name, Sim: &sc, Pool: vmpool.Config{ID: name, IdleCheck: -1, LockRetry: 100 * time.Millisecond, LockDir: t.TempDir()}}
		p, err := poolfile.NewPool(ctx, cfg, quiet(), vmpool.WithLocker(l))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { p.Close(context.Background()) })
		return p
	}
	l1, b1 := openLocker(t, srv, "host-1")
	l2, _ := openLocker(t, srv, "host-2")
	a := newPool("a", l1)
	poll.Until(t, "pool a has both VMs ready", 30*time.Second, func() bool { return a.Stats().Ready == 2 })
	lctx, lcancel := context.WithTimeout(ctx, 10*time.Second)
	defer lcancel()
	held, err := a.Lease(lctx) // an episode under way on a
	if err != nil {
		t.Fatalf("pool a leases: %v", err)
	}
	b := newPool("b", l2)
	for range 2 * testTTL / (100 * time.Millisecond) { // two TTLs: a's renewals keep the locks
		if st := b.Stats(); st.LockedElsewhere != 2 {
			t.Fatalf("pool b: %+v; want both VMs locked elsewhere while a lives", st)
		}
		time.Sleep(100 * time.Millisecond)
	}
	b1.Close() // a's host is cut off: its locks are no longer renewed
	// a learns it: it lets both VMs go, and tells the episode under way.
	poll.Until(t, "pool a lets its VMs go", 3*testTTL+5*time.Second, func() bool { return a.Stats().LocksLost == 2 })
	select {
	case <-held.Lost():
	default:
		t.Fatal("pool a lost the leased VM's lock but the lease's Lost is open")
	}
	if err := held.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	if st := a.Stats(); st.LockedElsewhere != 2 || st.Ready+st.Leased+st.Resetting != 0 {
		t.Fatalf("pool a: %+v; want both VMs let go", st)
	}
	poll.Until(t, "pool b takes the VMs", 3*testTTL+5*time.Second, func() bool { return b.Stats().Ready == 2 })
	l, err := b.Lease(lctx)
	if err != nil {
		t.Fatalf("pool b leases: %v", err)
	}
	_ = l.End(vmpool.Healthy)
}

// A holder cut off from NATS cannot renew: it takes its lock for lost
// before the key can expire on the server (a TTL after its last renewal),
// rather than learn it from a refused renewal once it is back.
func TestLockLostWhenCutOff(t *testing.T) {
	srv := natstest.Start(t)
	l, _ := openLocker(t, srv, "host-1")
	h, holder, err := l.TryLock("sim:http://127.0.0.1:5001", "pool=a vm=x")
	if err != nil || h == nil {
		t.Fatalf("lock: %v, holder %q", err, holder)
	}
	lost := h.(vmpool.LossNotifier).Lost()
	for range testTTL / (100 * time.Millisecond) { // a TTL: renewals keep it
		select {
		case <-lost:
			t.Fatal("lock lost while NATS answers")
		default:
		}
		time.Sleep(100 * time.Millisecond)
	}
	srv.Shutdown()
	cut := time.Now()
	poll.Until(t, "the cut-off holder takes its lock for lost", 5*testTTL, func() bool {
		select {
		case <-lost:
			return true
		default:
			return false
		}
	})
	t.Logf("lost %v after NATS went away (TTL %v, renewals every %v)", time.Since(cut).Round(10*time.Millisecond), testTTL, testTTL/3)
	if err := h.Unlock(); err != nil {
		t.Fatalf("Unlock of a lost lock: %v", err)
	}
}

// flakyKV is the lock bucket with an outage: after the first successful
// Update once armed, every Update fails with a timeout for d, as during a
// leader election or a short network cut. With written, the first of
// them is written all the same: only its answer is lost.
type flakyKV struct {
	jetstream.KeyValue
	d       time.Duration
	written bool

	mu        sync.Mutex
	armed     bool
	failUntil time.Time
	failed    int
}

func (f *flakyKV) Update(ctx context.Context, key string, value []byte, rev uint64) (uint64, error) {
	f.mu.Lock()
	if time.Now().Before(f.failUntil) {
		f.failed++
		write := f.written && f.failed == 1
		f.mu.Unlock()
		if write {
			if _, err := f.KeyValue.Update(ctx, key, value, rev); err != nil {
				return 0, err
			}
		}
		return 0, nats.ErrTimeout
	}
	f.mu.Unlock()
	r, err := f.KeyValue.Update(ctx, key, value, rev)
	f.mu.Lock()
	if err == nil && f.armed {
		f.armed = false
		f.failUntil = time.Now().Add(f.d)
	}
	f.mu.Unlock()
	return r, err
}

// A short outage (renewals failing for a little over a third of the TTL,
// from just after a renewal) does not cost the lock: the failed renewal
// is retried every tenth of the TTL and goes through once the bucket
// answers, well before the key could expire. A try that was written
// although its answer was lost (the retry over the old revision is then
// refused) is found and taken as the renewal.
func TestLockSurvivesFailedRenewals(t *testing.T) {
	const ttl = 4 * time.Second
	srv := natstest.Start(t)
	for _, written := range []bool{false, true} {
		t.Run(fmt.Sprintf("written=%v", written), func(t *testing.T) {
			l, _ := openLockerTTL(t, srv, "host-1", ttl)
			kv := &flakyKV{KeyValue: l.kv, d: ttl/3 + ttl/8, armed: true, written: written}
			l.kv = kv
			key := "sim:http://127.0.0.1:5002/" + t.Name()
			h, holder, err := l.TryLock(key, "pool=a vm=x")
			if err != nil || h == nil {
				t.Fatalf("lock: %v, holder %q", err, holder)
			}
			lost := h.(vmpool.LossNotifier).Lost()
			for range (ttl + ttl/2) / (100 * time.Millisecond) {
				select {
				case <-lost:
					t.Fatal("lock lost over a short outage")
				default:
				}
				time.Sleep(100 * time.Millisecond)
			}
			kv.mu.Lock()
			failed := kv.failed
			kv.mu.Unlock()
			if failed == 0 {
				t.Fatal("no renewal failed: the outage was not felt")
			}
			t.Logf("%d renewals failed during the outage; the lock was kept", failed)
			if err := h.Unlock(); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			// Unlock deleted the key: another takes it at once.
			l2, _ := openLockerTTL(t, srv, "host-2", ttl)
			h2, holder, err := l2.TryLock(key, "pool=b vm=x")
			if err != nil || h2 == nil {
				t.Fatalf("after Unlock: %v, holder %q", err, holder)
			}
			_ = h2.Unlock()
		})
	}
}
