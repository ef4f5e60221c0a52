package vmpool_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/guestproto"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/lockfile"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/pooltest"
)

func TestPoolLeaseRelease(t *testing.T) {
	b := newTestBackend(2, t.Name()+":")
	p := pooltest.NewPool(t, pooltest.Config(t), b)

	l1, l2 := p.MustLease(t), p.MustLease(t)
	if l1.ID() == l2.ID() {
		t.Fatalf("both leases got %s", l1.ID())
	}
	if l1.Guest() == nil || l1.Guest().BaseURL() != b.url {
		t.Fatalf("lease guest = %v, want a client of %s", l1.Guest(), b.url)
	}

	// Both VMs out: a third lease waits, then gives up with ctx's error and
	// the pool's state in the message.
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	_, err := p.Lease(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "2 leased") {
		t.Fatalf("Lease with both VMs out: %v, want DeadlineExceeded naming 2 leased VMs", err)
	}

	if err := l1.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	l3 := p.MustLease(t)
	if l3.ID() != l1.ID() {
		t.Fatalf("lease after release got %s, want %s", l3.ID(), l1.ID())
	}
	if n := b.count("reset", l1.ID()); n != 1 {
		t.Fatalf("%d resets of %s, want 1", n, l1.ID())
	}
	if err := l2.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	if err := l3.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	p.Events.WaitCount(t, vmpool.EventReady, "", 5) // 2 starts + 3 resets
	st := p.Stats()
	if st.VMs != 2 || st.Leases != 3 || st.Releases != 3 || st.Starts != 2 || st.Resets != 3 || st.Ready != 2 || st.Failures != 0 {
		t.Fatalf("stats = %+v", st)
	}
}

// TestPoolResetAhead: Release starts the reset at once, and the next Lease
// does not wait for it.
func TestPoolResetAhead(t *testing.T) {
	b := newTestBackend(2, t.Name()+":")
	gate := make(chan struct{})
	resetting := make(chan string, 10)
	b.onReset = func(ctx context.Context, id string) error {
		resetting <- id
		select {
		case <-gate:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	p.Events.WaitCount(t, vmpool.EventReady, "", 2)

	a := p.MustLease(t)
	other := map[string]string{"vm-0": "vm-1", "vm-1": "vm-0"}[a.ID()]
	if err := a.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	// The reset began during Release, before any further Lease call.
	select {
	case id := <-resetting:
		if id != a.ID() {
			t.Fatalf("reset of %s, want %s", id, a.ID())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Release did not start a reset")
	}
	// a's reset is blocked; the next Lease gets the other VM without
	// waiting for it.
	bl := p.MustLease(t)
	if bl.ID() != other {
		t.Fatalf("lease during %s's reset got %s, want %s", a.ID(), bl.ID(), other)
	}
	if i, j := p.Events.Index(vmpool.EventResetting, a.ID(), 1), p.Events.Index(vmpool.EventLeased, other, 1); i < 0 || j < i {
		t.Fatalf("events out of order (resetting %d, leased %d):\n%s", i, j, p.Events)
	}
	if p.Events.Count(vmpool.EventReady, a.ID()) != 1 {
		t.Fatal("a's reset finished while its gate was closed")
	}

	// Let a's reset finish while b is in use; then the lease after b's
	// release finds a ready and makes no backend call.
	close(gate)
	p.Events.WaitCount(t, vmpool.EventReady, a.ID(), 2)
	if err := bl.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	<-resetting
	resets, healths := b.count("reset", a.ID()), b.count("health", a.ID())
	l := p.MustLease(t)
	if l.ID() != a.ID() {
		t.Fatalf("got %s, want the VM reset ahead, %s", l.ID(), a.ID())
	}
	if b.count("reset", a.ID()) != resets || b.count("health", a.ID()) != healths {
		t.Fatal("Lease of a VM reset ahead called the backend")
	}
	if p.Stats().LeaseWait > time.Second {
		t.Fatalf("lease wait %v", p.Stats().LeaseWait)
	}
}

func TestPoolLeaseFIFO(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	first := p.MustLease(t)

	const n = 5
	got := make(chan int, n)
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			l, err := p.Lease(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			got <- i
			_ = l.End(vmpool.Healthy)
		}()
		poll.Until(t, "waiter queued", 10*time.Second, func() bool { return p.Stats().Waiting == i+1 })
	}
	_ = first.End(vmpool.Healthy)
	wg.Wait()
	close(got)
	want := 0
	for i := range got {
		if i != want {
			t.Fatalf("waiter %d served as number %d", i, want)
		}
		want++
	}
}

func TestPoolQuarantineAfterUnhealthyReleases(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	p := pooltest.NewPool(t, pooltest.Config(t), b)

	// A healthy release in between resets the count.
	for _, v := range []vmpool.Verdict{vmpool.Fault(nil), vmpool.Fault(nil), vmpool.Healthy, vmpool.Fault(nil), vmpool.Fault(nil)} {
		if err := p.MustLease(t).End(v); err != nil {
			t.Fatal(err)
		}
	}
	if q := p.Quarantined(); len(q) != 0 {
		t.Fatalf("quarantined after non-consecutive failures: %v", q)
	}
	l := p.MustLease(t)
	if err := l.End(vmpool.Fault(errors.New("app crashed at launch"))); err != nil {
		t.Fatal(err)
	}
	q := p.Quarantined()
	if len(q) != 1 || q[0].VM != "vm-0" || q[0].Reason != "3 failures in a row" || q[0].Failures != 3 ||
		!strings.Contains(q[0].Err.Error(), "app crashed at launch") || q[0].At.IsZero() {
		t.Fatalf("quarantine = %+v", q)
	}
	st := p.Stats()
	if st.Quarantined != 1 || st.UnhealthyReleases != 5 || len(st.QuarantinedVMs) != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if logs := p.Log.String(); !strings.Contains(logs, "VM quarantined") || !strings.Contains(logs, "vm=vm-0") {
		t.Fatalf("no quarantine log line:\n%s", logs)
	}
	_, err := p.Lease(context.Background())
	if !errors.Is(err, vmpool.ErrNoVMs) || !strings.Contains(err.Error(), "app crashed at launch") {
		t.Fatalf("Lease with every VM quarantined: %v, want ErrNoVMs with the reason", err)
	}
	if vs := p.VMs(); vs[0].State != vmpool.StateQuarantined || vs[0].Quarantine == nil {
		t.Fatalf("VMs() = %+v", vs)
	}
}

func TestPoolQuarantineAfterFailedResets(t *testing.T) {
	b := newTestBackend(2, t.Name()+":")
	var broken atomic.Value
	broken.Store("")
	b.onReset = func(ctx context.Context, id string) error {
		if id == broken.Load() {
			return fmt.Errorf("revert: snapshot missing")
		}
		return nil
	}
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	a, other := p.MustLease(t), p.MustLease(t)
	broken.Store(a.ID())
	_ = a.End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventQuarantined, a.ID(), 1)
	if n := b.count("reset", a.ID()); n != 3 {
		t.Fatalf("%d resets before quarantine, want 3 (quarantine_after)", n)
	}
	q := p.Quarantined()
	if len(q) != 1 || q[0].Reason != "3 failures in a row" || !strings.Contains(q[0].Err.Error(), "snapshot missing") ||
		!strings.Contains(q[0].Err.Error(), "vm "+a.ID()+": reset") {
		t.Fatalf("quarantine = %+v", q)
	}
	// The pool carries on with the other VM.
	_ = other.End(vmpool.Healthy)
	if l := p.MustLease(t); l.ID() != other.ID() {
		t.Fatalf("got %s", l.ID())
	}
	if st := p.Stats(); st.ResetFailures != 3 || st.Quarantined != 1 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPoolQuarantineOnTimeouts(t *testing.T) {
	for _, tc := range []struct {
		name   string
		setup  func(b *testBackend)
		reason string
	}{
		{"reset hangs", func(b *testBackend) {
			b.onReset = func(ctx context.Context, id string) error { return hang(ctx) }
		}, "reset timed out"},
		{"reset ignores its deadline", func(b *testBackend) {
			b.onReset = func(ctx context.Context, id string) error {
				<-ctx.Done()
				return errors.New("vmrun: signal: killed") // does not say why
			}
		}, "reset timed out"},
		{"health hangs after reset", func(b *testBackend) {
			var resets atomic.Int32
			b.onReset = func(ctx context.Context, id string) error { resets.Add(1); return nil }
			b.onHealth = func(ctx context.Context, id string, g *guest.Client) error {
				if resets.Load() > 0 {
					return hang(ctx)
				}
				return nil
			}
		}, "health after reset timed out"},
		{"not ready (ErrStuck)", func(b *testBackend) {
			b.onReset = func(ctx context.Context, id string) error {
				return fmt.Errorf("%w: no IP within 5m", vmpool.ErrStuck)
			}
		}, "reset timed out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBackend(1, t.Name()+":")
			tc.setup(b)
			cfg := pooltest.Config(t)
			cfg.Timeouts.Reset, cfg.Timeouts.Health = 100*time.Millisecond, 100*time.Millisecond
			p := pooltest.NewPool(t, cfg, b)
			l := p.MustLease(t)
			_ = l.End(vmpool.Healthy)
			p.Events.WaitCount(t, vmpool.EventQuarantined, "vm-0", 1)
			q := p.Quarantined()
			if len(q) != 1 || q[0].Reason != tc.reason || q[0].Failures != 1 {
				t.Fatalf("quarantine = %+v, want %q after one failure", q, tc.reason)
			}
			if !errors.Is(q[0].Err, context.DeadlineExceeded) && !errors.Is(q[0].Err, vmpool.ErrStuck) {
				t.Fatalf("quarantine error %v matches neither DeadlineExceeded nor ErrStuck", q[0].Err)
			}
			if n := b.count("reset", "vm-0"); n != 1 {
				t.Fatalf("%d resets, want 1: a timeout quarantines at once", n)
			}
		})
	}
}

func TestPoolStartStuck(t *testing.T) {
	b := newTestBackend(2, t.Name()+":")
	b.onStart = func(ctx context.Context, id string) error {
		if id == "vm-1" {
			return hang(ctx)
		}
		return nil
	}
	cfg := pooltest.Config(t)
	cfg.Timeouts.Start = 100 * time.Millisecond
	p := pooltest.NewPool(t, cfg, b)
	p.Events.WaitCount(t, vmpool.EventQuarantined, "vm-1", 1)
	if q := p.Quarantined(); len(q) != 1 || q[0].Reason != "start timed out" {
		t.Fatalf("quarantine = %+v", q)
	}
	if l := p.MustLease(t); l.ID() != "vm-0" {
		t.Fatalf("got %s", l.ID())
	}
}

func TestPoolStartRetried(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	var n atomic.Int32
	b.onStart = func(ctx context.Context, id string) error {
		if n.Add(1) <= 2 {
			return errors.New("connection refused")
		}
		return nil
	}
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	l := p.MustLease(t)
	if st := p.Stats(); st.Starts != 3 || st.StartFailures != 2 || st.Quarantined != 0 {
		t.Fatalf("stats = %+v", st)
	}
	_ = l.End(vmpool.Healthy)
}

// TestPoolErrNoVMsWakesWaiters: a Lease blocked when the last VM is
// quarantined returns ErrNoVMs instead of waiting forever.
func TestPoolErrNoVMsWakesWaiters(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	cfg := pooltest.Config(t)
	cfg.QuarantineAfter = 1
	p := pooltest.NewPool(t, cfg, b)
	l := p.MustLease(t)
	errc := make(chan error, 1)
	go func() {
		_, err := p.Lease(context.Background()) // no deadline
		errc <- err
	}()
	poll.Until(t, "waiter", 10*time.Second, func() bool { return p.Stats().Waiting == 1 })
	_ = l.End(vmpool.Fault(nil))
	select {
	case err := <-errc:
		if !errors.Is(err, vmpool.ErrNoVMs) {
			t.Fatalf("waiter got %v, want ErrNoVMs", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waiter still blocked with every VM quarantined")
	}
}

// TestPoolNoDoubleLease hammers the pool from many goroutines, with some
// leases abandoned by their deadline, and checks that no VM is ever held
// twice and no VM is lost.
func TestPoolNoDoubleLease(t *testing.T) {
	const vms, workers, rounds = 4, 24, 40
	b := newTestBackend(vms, t.Name()+":")
	b.onReset = func(ctx context.Context, id string) error {
		time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond)
		return nil
	}
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	var inUse [vms]atomic.Int32
	var leases, abandoned atomic.Int64
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := 0; r < rounds; r++ {
				timeout := 10 * time.Second
				if rand.IntN(4) == 0 {
					timeout = time.Duration(rand.IntN(200)) * time.Microsecond
				}
				ctx, cancel := context.WithTimeout(context.Background(), timeout)
				l, err := p.Lease(ctx)
				cancel()
				if err != nil {
					if !errors.Is(err, context.DeadlineExceeded) {
						t.Errorf("Lease: %v", err)
						return
					}
					abandoned.Add(1)
					continue
				}
				var i int
				fmt.Sscanf(l.ID(), "vm-%d", &i)
				if !inUse[i].CompareAndSwap(0, 1) {
					t.Errorf("%s leased twice at once", l.ID())
				}
				leases.Add(1)
				time.Sleep(time.Duration(rand.IntN(200)) * time.Microsecond)
				inUse[i].Store(0)
				if err := l.End(vmpool.Healthy); err != nil {
					t.Errorf("Release: %v", err)
				}
			}
		}()
	}
	wg.Wait()
	poll.Until(t, "every VM ready again", 10*time.Second, func() bool { return p.Stats().Ready == vms })
	st := p.Stats()
	if st.Leases != leases.Load() || st.Releases != leases.Load() || st.Quarantined != 0 {
		t.Fatalf("stats %+v; %d leases seen", st, leases.Load())
	}
	t.Logf("%d leases, %d abandoned by their deadline", leases.Load(), abandoned.Load())
}

// TestPoolReturnUnused: a lease handed back unused is ready again without
// a reset, and says nothing about the VM's health: failures in a row that
// came before it still count toward quarantine.
func TestPoolEndUnused(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	p := pooltest.NewPool(t, pooltest.Config(t), b)

	for range 2 {
		if err := p.MustLease(t).End(vmpool.Fault(errors.New("guest stopped answering"))); err != nil {
			t.Fatal(err)
		}
	}
	l := p.MustLease(t)
	resets := b.count("reset", "vm-0")
	if err := l.End(vmpool.Unused); err != nil {
		t.Fatal(err)
	}
	if err := l.End(vmpool.Unused); !errors.Is(err, vmpool.ErrReleased) {
		t.Fatalf("second End(Unused): %v, want ErrReleased", err)
	}
	if err := l.End(vmpool.Healthy); !errors.Is(err, vmpool.ErrReleased) {
		t.Fatalf("End(Healthy) after End(Unused): %v, want ErrReleased", err)
	}
	if vs := p.VMs(); vs[0].State != vmpool.StateReady || vs[0].Failures != 2 {
		t.Fatalf("after Return: state %s, %d failures in a row; want ready with the 2 failures kept", vs[0].State, vs[0].Failures)
	}
	l = p.MustLease(t) // at once: no reset in between
	if n := b.count("reset", "vm-0"); n != resets {
		t.Fatalf("%d resets after Return, want %d (none)", n, resets)
	}
	if p.Events.Count(vmpool.EventReturned, "vm-0") != 1 {
		t.Fatalf("no %s event:\n%s", vmpool.EventReturned, p.Events)
	}
	// The third failure in a row quarantines it: the Return did not count
	// as a healthy episode.
	if err := l.End(vmpool.Fault(errors.New("guest stopped answering"))); err != nil {
		t.Fatal(err)
	}
	if q := p.Quarantined(); len(q) != 1 || q[0].Failures != 3 {
		t.Fatalf("quarantine = %+v, want vm-0 after 3 failures in a row", q)
	}
	if st := p.Stats(); st.Returns != 1 || st.Releases != 3 || st.UnhealthyReleases != 3 {
		t.Fatalf("stats = %+v", st)
	}
}

func TestPoolEndMisuse(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	l := p.MustLease(t)
	if err := l.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	if err := l.End(vmpool.Healthy); !errors.Is(err, vmpool.ErrReleased) {
		t.Fatalf("second End: %v, want ErrReleased", err)
	}
	var none *vmpool.Lease
	if err := none.End(vmpool.Healthy); err == nil {
		t.Fatal("End of a nil lease succeeded")
	}
}

func TestPoolIdleCheck(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	var sick atomic.Bool
	b.onHealth = func(ctx context.Context, id string, g *guest.Client) error {
		if sick.Load() {
			return errors.New("screenshot: connection refused")
		}
		return nil
	}
	cfg := pooltest.Config(t)
	cfg.IdleCheck = 20 * time.Millisecond
	p := pooltest.NewPool(t, cfg, b)
	p.Events.WaitCount(t, vmpool.EventChecking, "vm-0", 2) // healthy idle VMs are checked again and again
	sick.Store(true)
	p.Events.WaitCount(t, vmpool.EventQuarantined, "vm-0", 1)
	if b.count("reset", "vm-0") == 0 {
		t.Fatal("a failed idle check did not reset the VM")
	}
	if q := p.Quarantined(); len(q) != 1 || !strings.Contains(q[0].Err.Error(), "connection refused") {
		t.Fatalf("quarantine = %+v", q)
	}
}

// TestPoolUtilisation: busy time grows while a VM is leased and stops
// when the lease ends; utilisation is busy / (VMs × wall), at most 1/2 with
// one of two VMs leased.
func TestPoolUtilisation(t *testing.T) {
	b := newTestBackend(2, t.Name()+":")
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	l := p.MustLease(t)
	poll.Until(t, "busy time to grow", 10*time.Second, func() bool { return p.Stats().Busy > 0 })
	st := p.Stats()
	want := float64(st.Busy) / (2 * float64(st.Wall))
	if st.Leased != 1 || st.Utilisation != want || st.Utilisation <= 0 || st.Utilisation > 0.5 {
		t.Fatalf("with 1 of 2 VMs leased: busy %v, wall %v, utilisation %v (want %v, in (0, 0.5])", st.Busy, st.Wall, st.Utilisation, want)
	}
	if err := l.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	a := p.Stats()
	poll.Until(t, "wall time to pass", 10*time.Second, func() bool { return p.Stats().Wall > a.Wall })
	if z := p.Stats(); a.Leased != 0 || a.Busy < st.Busy || z.Busy != a.Busy {
		t.Fatalf("after the lease ended: busy %v then %v (leased %d); want it kept and no longer growing from >= %v", a.Busy, z.Busy, a.Leased, st.Busy)
	}
}

func TestLeaseScreenSize(t *testing.T) {
	g := pooltest.NewFakeGuest(t)
	b := newTestBackend(1, t.Name()+":")
	b.url = g.URL()
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	l := p.MustLease(t)
	for i := 0; i < 3; i++ {
		w, h, err := l.ScreenSize(context.Background())
		if err != nil || w != 1280 || h != 800 {
			t.Fatalf("ScreenSize = %d, %d, %v", w, h, err)
		}
	}
	if n := g.Calls().Sizes; n != 1 {
		t.Fatalf("%d /screen_size calls, want 1 (cached)", n)
	}
}

// TestPoolClose: Close wakes waiters, cancels resets in flight, stops every
// started VM, closes the backend, releases the locks and leaves no
// goroutine behind.
func TestPoolClose(t *testing.T) {
	g := pooltest.NewFakeGuest(t)
	check := pooltest.GoroutineBaseline(t)
	b := newTestBackend(3, t.Name()+":")
	b.url = g.URL()
	var hangReset atomic.Bool
	b.onReset = func(ctx context.Context, id string) error {
		if hangReset.Load() {
			return hang(ctx)
		}
		return nil
	}
	b.onHealth = func(ctx context.Context, id string, g *guest.Client) error {
		_, err := g.Screenshot(ctx) // real HTTP, so its goroutines count too
		return err
	}
	cfg := pooltest.Config(t)
	cfg.IdleCheck = 10 * time.Millisecond
	p, err := vmpool.NewPool(context.Background(), cfg, b, vmpool.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	l1, _ := p.Lease(ctx)
	l2, _ := p.Lease(ctx)
	l3, err := p.Lease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := l3.ScreenSize(ctx); err != nil {
		t.Fatal(err)
	}
	hangReset.Store(true)
	_ = l1.End(vmpool.Healthy) // its reset hangs until Close cancels it
	poll.Until(t, "hung reset", 10*time.Second, func() bool { return b.count("reset", l1.ID()) == 1 })
	errc := make(chan error, 1)
	go func() {
		_, err := p.Lease(context.Background())
		errc <- err
	}()
	poll.Until(t, "waiter", 10*time.Second, func() bool { return p.Stats().Waiting == 1 })

	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	if err := p.Close(cctx); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-errc; !errors.Is(err, vmpool.ErrClosed) {
		t.Fatalf("waiter got %v, want ErrClosed", err)
	}
	if _, err := p.Lease(ctx); !errors.Is(err, vmpool.ErrClosed) {
		t.Fatalf("Lease after Close: %v", err)
	}
	if err := l2.End(vmpool.Healthy); err != nil {
		t.Fatalf("Release after Close: %v", err)
	}
	for _, s := range b.specs {
		if b.count("stop", s.ID) != 1 {
			t.Fatalf("%s stopped %d times", s.ID, b.count("stop", s.ID))
		}
		l, _, err := lockfile.TryLock(cfg.LockDir, s.Key, "")
		if err != nil || l == nil {
			t.Fatalf("lock of %s still held after Close (%v)", s.ID, err)
		}
		_ = l.Unlock()
	}
	if b.count("close", "") != 1 {
		t.Fatal("backend not closed")
	}
	if err := p.Close(ctx); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	check()
	_ = l3
}

// TestPoolCrossProcess: a VM whose lock another process holds is never
// driven; the pool takes it once that process lets go.
func TestPoolCrossProcess(t *testing.T) {
	cfg := pooltest.Config(t)
	b := newTestBackend(2, t.Name()+":")
	held := b.specs[0]

	child := exec.Command(os.Args[0], "-test.run=^$")
	child.Env = append(os.Environ(), "VMPOOL_TEST_HOLD_LOCK_DIR="+cfg.LockDir, "VMPOOL_TEST_HOLD_LOCK_KEY="+held.Key)
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { stdin.Close(); _ = child.Wait() })
	if line := readLine(t, stdout); line != "locked" {
		t.Fatalf("child: %q", line)
	}

	p := pooltest.NewPool(t, cfg, b)
	l := p.MustLease(t)
	if l.ID() == held.ID {
		t.Fatalf("leased %s while another process holds its lock", held.ID)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err = p.Lease(ctx)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "held by another process") {
		t.Fatalf("Lease: %v", err)
	}
	if st := p.Stats(); st.LockedElsewhere != 1 {
		t.Fatalf("stats = %+v", st)
	}
	if b.count("start", held.ID) != 0 {
		t.Fatal("the pool started a VM another process holds")
	}
	if !strings.Contains(p.Log.String(), "in use by another process") {
		t.Fatalf("no log line about the held VM:\n%s", p.Log)
	}

	stdin.Close() // the child lets go and exits
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	l2 := p.MustLease(t)
	if l2.ID() != held.ID {
		t.Fatalf("got %s, want %s", l2.ID(), held.ID)
	}
}

// TestPoolTwoPoolsOneProcess: two pools over the same machines in one
// process exclude each other too (flock is per open file).
func TestPoolTwoPoolsOneProcess(t *testing.T) {
	cfg := pooltest.Config(t)
	key := t.Name() + ":"
	p1 := pooltest.NewPool(t, cfg, newTestBackend(2, key))
	p1.Events.WaitCount(t, vmpool.EventReady, "", 2)
	b2 := newTestBackend(2, key)
	p2 := pooltest.NewPool(t, cfg, b2)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	_, err := p2.Lease(ctx)
	cancel()
	if err == nil {
		t.Fatal("second pool leased a VM the first holds")
	}
	_ = p1.Close(context.Background())
	l := p2.MustLease(t)
	if b2.count("start", l.ID()) != 1 {
		t.Fatal("second pool leased a VM it did not start")
	}
}

func TestNewPoolErrors(t *testing.T) {
	dup := newTestBackend(2, "x:")
	dup.specs[1].ID = dup.specs[0].ID
	sameKey := newTestBackend(2, "x:")
	sameKey.specs[1].Key = sameKey.specs[0].Key
	badID := newTestBackend(1, "x:")
	badID.specs[0].ID = "a b"
	lockFile := filepath.Join(t.TempDir(), "file")
	_ = os.WriteFile(lockFile, nil, 0o644)
	for _, tc := range []struct {
		name string
		b    vmpool.Backend
		cfg  func(*vmpool.Config)
		want string
	}{
		{"no VMs", newTestBackend(0, "x:"), nil, "no VMs"},
		{"duplicate id", dup, nil, "appears twice"},
		{"same machine twice", sameKey, nil, "same machine"},
		{"bad id", badID, nil, `"a b"`},
		{"lock dir is a file", newTestBackend(1, "x:"), func(c *vmpool.Config) { c.LockDir = lockFile }, "lock_dir"},
		{"negative timeout", newTestBackend(1, "x:"), func(c *vmpool.Config) { c.Timeouts.Reset = -time.Second }, "timeouts.reset"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := pooltest.Config(t)
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			p, err := vmpool.NewPool(context.Background(), cfg, tc.b, vmpool.WithLogger(slog.New(slog.DiscardHandler)))
			if err == nil {
				_ = p.Close(context.Background())
				t.Fatal("NewPool succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not mention %q", err, tc.want)
			}
		})
	}
}

// TestPoolLeaseAvoid: a Lease that avoids a VM gets another one when the
// pool has one, waits for it while the avoided VM sits idle (and that VM
// goes to a caller that does not avoid it), and takes the avoided VM only
// when no other VM is left in the pool's hands.
func TestPoolLeaseAvoid(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	b := newTestBackend(2, t.Name()+":")
	p := pooltest.NewPool(t, pooltest.Config(t), b)
	p.Events.WaitCount(t, vmpool.EventReady, "", 2)

	// Both idle, vm-0 longest: avoiding it gives vm-1.
	l, err := p.Lease(ctx, vmpool.Avoid("vm-0"))
	if err != nil || l.ID() != "vm-1" {
		t.Fatalf("Lease(Avoid(vm-0)) = %v, %v; want vm-1", l, err)
	}
	// vm-1 is out; a second caller avoiding vm-0 waits although vm-0 is idle.
	got := make(chan *vmpool.Lease, 1)
	go func() { // owned: its result is read below before the test ends
		l, err := p.Lease(ctx, vmpool.Avoid("vm-0"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	poll.Until(t, "the avoiding caller to wait", 10*time.Second, func() bool { return p.Stats().Waiting == 1 })
	// A caller that avoids nothing is served at once with vm-0, before the
	// waiting one, which does not want it.
	free, err := p.Lease(ctx)
	if err != nil || free.ID() != "vm-0" {
		t.Fatalf("plain Lease while one waits = %v, %v; want vm-0", free, err)
	}
	select {
	case l := <-got:
		t.Fatalf("the avoiding caller got %s while only vm-0 could be free", l.ID())
	default:
	}
	if err := l.End(vmpool.Healthy); err != nil { // vm-1 resets, then goes to the waiting caller
		t.Fatal(err)
	}
	if w := <-got; w.ID() != "vm-1" {
		t.Fatalf("the avoiding caller got %s, want vm-1", w.ID())
	} else if err := w.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	if err := free.End(vmpool.Unused); err != nil {
		t.Fatal(err)
	}

	// vm-1 fails three times in a row (quarantined) while a caller waits
	// avoiding vm-0: with no other VM left, it gets vm-0.
	p.Events.WaitCount(t, vmpool.EventReady, "vm-1", 2)
	l1, err := p.Lease(ctx, vmpool.Avoid("vm-0"))
	if err != nil || l1.ID() != "vm-1" {
		t.Fatalf("Lease(Avoid(vm-0)) = %v, %v; want vm-1", l1, err)
	}
	v0, err := p.Lease(ctx) // hold vm-0 so the next caller must wait
	if err != nil || v0.ID() != "vm-0" {
		t.Fatalf("Lease = %v, %v; want vm-0", v0, err)
	}
	go func() { // owned: read below
		l, err := p.Lease(ctx, vmpool.Avoid("vm-0"))
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	poll.Until(t, "the avoiding caller to wait", 10*time.Second, func() bool { return p.Stats().Waiting == 1 })
	if err := v0.End(vmpool.Unused); err != nil { // vm-0 idle again; vm-1 still out
		t.Fatal(err)
	}
	select {
	case l := <-got:
		t.Fatalf("the avoiding caller got %s while vm-1 was still in rotation", l.ID())
	default:
	}
	b.onReset = func(context.Context, string) error { return errors.New("revert failed") }
	if err := l1.End(vmpool.Fault(errors.New("guest stopped answering"))); err != nil {
		t.Fatal(err)
	}
	w := <-got // vm-1's resets fail until it is quarantined; then vm-0 is the only VM left
	if w.ID() != "vm-0" {
		t.Fatalf("after vm-1's quarantine the avoiding caller got %s, want vm-0", w.ID())
	}
	if q := p.Quarantined(); len(q) != 1 || q[0].VM != "vm-1" {
		t.Fatalf("quarantine = %+v, want vm-1", q)
	}
	// Once it is the only VM, an avoided VM is served at once.
	if err := w.End(vmpool.Unused); err != nil {
		t.Fatal(err)
	}
	if l, err := p.Lease(ctx, vmpool.Avoid("vm-0")); err != nil || l.ID() != "vm-0" {
		t.Fatalf("Lease(Avoid(vm-0)) with vm-0 the only VM = %v, %v", l, err)
	} else {
		_ = l.End(vmpool.Unused)
	}
}

// afterReverter is a test backend whose VMs want a command after a
// revert by default.
type afterReverter struct {
	*testBackend
	cmd string
}

func (b afterReverter) DefaultAfterRevert() string { return b.cmd }

// TestPoolAfterRevert: the pool runs after_revert in the guest (POST
// /setup/execute through the shell) after every start and reset, before
// the VM is handed out; "" takes the backend's default, "off" none; a
// guest that cannot run it fails the start.
func TestPoolAfterRevert(t *testing.T) {
	for _, c := range []struct {
		name, cfg, backendDefault string
		want                      string // the command run; "" none
	}{
		{"configured", "echo configured", "", "echo configured"},
		{"the backend's default", "", guestproto.ResetCommand, guestproto.ResetCommand},
		{"configured over the default", "true", guestproto.ResetCommand, "true"},
		{"off", vmpool.AfterRevertOff, guestproto.ResetCommand, ""},
		{"no default", "", "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			g := pooltest.NewFakeGuest(t)
			tb := newTestBackend(1, t.Name()+":")
			tb.url = g.URL()
			var b vmpool.Backend = tb
			if c.backendDefault != "" {
				b = afterReverter{tb, c.backendDefault}
			}
			cfg := pooltest.Config(t)
			cfg.AfterRevert = c.cfg
			p := pooltest.NewPool(t, cfg, b)
			l := p.MustLease(t)
			var want []string
			if c.want != "" {
				want = []string{c.want}
			}
			if got := g.Calls().Execs; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the start the guest ran %q, want %q", got, want)
			}
			_ = l.End(vmpool.Healthy)
			p.Events.WaitCount(t, vmpool.EventReady, l.ID(), 2)
			if c.want != "" {
				want = append(want, c.want)
			}
			if got := g.Calls().Execs; fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("after the reset the guest ran %q, want %q", got, want)
			}
		})
	}

	t.Run("a guest that cannot run it", func(t *testing.T) {
		g := pooltest.NewFakeGuest(t)
		g.Set(func(g *pooltest.FakeGuest) { g.ExecFail = true })
		tb := newTestBackend(1, t.Name()+":")
		tb.url = g.URL()
		cfg := pooltest.Config(t)
		cfg.AfterRevert = guestproto.ResetCommand
		cfg.QuarantineAfter = 2
		p := pooltest.NewPool(t, cfg, tb)
		q := p.WantQuarantine(t, "vm-0", "2 failures in a row", "after_revert after start", "nmcli: command not found")
		if tb.count("health", "vm-0") != 0 {
			t.Errorf("the health check ran after the after-revert command failed (%v)", q)
		}
	})
}

// TestPoolWithEventsAddUp gives two WithEvents options: both see every
// event, in the same order.
func TestPoolWithEventsAddUp(t *testing.T) {
	var first, second pooltest.EventLog
	p, err := vmpool.NewPool(context.Background(), pooltest.Config(t), newTestBackend(1, t.Name()+":"),
		vmpool.WithEvents(first.Add), vmpool.WithEvents(second.Add), vmpool.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if err := l.End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if first.Count(vmpool.EventLeased, "") != 1 || first.String() != second.String() {
		t.Errorf("first log:\n%s\nsecond log:\n%s", &first, &second)
	}
}

// A VM whose lock is lost is let go whatever it is doing: it leaves the
// idle queue, its lease's Lost closes and its End neither resets it nor
// counts a fault, its reset under way is cancelled, a quarantined VM stays
// quarantined; it is not stopped at Close (another pool drives it), and
// the pool takes it again once it is free.
func TestPoolLockLost(t *testing.T) {
	resetStarted := make(chan struct{}, 1)
	cases := []struct {
		name string
		// prepare brings vm-0 to the state in which its lock is lost; it
		// returns the lease out on it, if any.
		prepare func(t *testing.T, p *pooltest.Pool, b *testBackend) *vmpool.Lease
		// after checks the pool right after the loss.
		after func(t *testing.T, p *pooltest.Pool, b *testBackend, l *vmpool.Lease)
		// quarantined: the VM stays quarantined (not retaken).
		quarantined bool
	}{
		{
			name: "ready",
			prepare: func(t *testing.T, p *pooltest.Pool, b *testBackend) *vmpool.Lease {
				p.Events.WaitCount(t, vmpool.EventReady, "vm-0", 1)
				return nil
			},
		},
		{
			name: "leased",
			prepare: func(t *testing.T, p *pooltest.Pool, b *testBackend) *vmpool.Lease {
				return p.MustLease(t)
			},
			after: func(t *testing.T, p *pooltest.Pool, b *testBackend, l *vmpool.Lease) {
				select {
				case <-l.Lost():
				case <-time.After(10 * time.Second):
					t.Fatal("the lease's Lost did not close")
				}
				if st := p.Stats(); st.Leased != 1 {
					t.Fatalf("stats %+v: want the VM leased until End", st)
				}
				if err := l.End(vmpool.Fault(errors.New("the caller saw the VM misbehave"))); err != nil {
					t.Fatal(err)
				}
				if n := b.count("reset", "vm-0"); n != 0 {
					t.Errorf("%d resets after End of the lost lease; want none: the VM is not ours", n)
				}
				if st := p.Stats(); st.UnhealthyReleases != 0 || st.Failures != 0 {
					t.Errorf("stats %+v: want no fault counted for a VM the pool let go", st)
				}
			},
		},
		{
			name: "resetting",
			prepare: func(t *testing.T, p *pooltest.Pool, b *testBackend) *vmpool.Lease {
				b.onReset = func(ctx context.Context, id string) error {
					resetStarted <- struct{}{}
					return hang(ctx) // only the loss ends it
				}
				l := p.MustLease(t)
				if err := l.End(vmpool.Healthy); err != nil {
					t.Fatal(err)
				}
				<-resetStarted
				return nil
			},
			after: func(t *testing.T, p *pooltest.Pool, b *testBackend, l *vmpool.Lease) {
				if n := p.Events.Count(vmpool.EventFailed, "vm-0"); n != 0 {
					t.Errorf("%d failed events: the cancelled reset is not the VM's failure", n)
				}
			},
		},
		{
			name: "quarantined",
			prepare: func(t *testing.T, p *pooltest.Pool, b *testBackend) *vmpool.Lease {
				if err := p.MustLease(t).End(vmpool.Fault(errors.New("broken"))); err != nil {
					t.Fatal(err)
				}
				p.WantQuarantine(t, "vm-0", "")
				return nil
			},
			quarantined: true,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := newTestBackend(1, t.Name()+":")
			key := b.specs[0].Key
			locks := newLosableLocker()
			cfg := pooltest.Config(t)
			cfg.QuarantineAfter = 1
			cfg.Timeouts.Reset = time.Minute // the hung reset ends by the loss alone
			p := pooltest.NewPool(t, cfg, b, vmpool.WithLocker(locks))
			l := tc.prepare(t, p, b)

			locks.lose(key)
			p.Events.WaitCount(t, vmpool.EventLockLost, "vm-0", 1)
			if tc.after != nil {
				tc.after(t, p, b, l)
			}
			// The reset's goroutine lets the VM go once its cancelled
			// reset returns.
			poll.Until(t, "the VM let go", 10*time.Second, func() bool {
				st := p.Stats()
				return st.Quarantined+st.LockedElsewhere == 1
			})
			st := p.Stats()
			switch {
			case st.LocksLost != 1:
				t.Fatalf("stats %+v: want 1 lock lost", st)
			case tc.quarantined && st.Quarantined != 1:
				t.Fatalf("stats %+v: want the VM still quarantined", st)
			case !tc.quarantined && st.LockedElsewhere != 1:
				t.Fatalf("stats %+v: want the VM locked elsewhere", st)
			}
			if !tc.quarantined {
				ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
				_, err := p.Lease(ctx)
				cancel()
				if err == nil {
					t.Fatal("leased a VM whose lock another holder has")
				}
			}
			resets := b.count("reset", "vm-0")

			if !tc.quarantined {
				// The other holder lets go: the pool takes the VM again,
				// starts it and leases it.
				b.onReset = nil
				locks.free(key)
				p.Events.WaitCount(t, vmpool.EventLocked, "vm-0", 2)
				l := p.MustLease(t)
				if n := b.count("start", "vm-0"); n != 2 {
					t.Errorf("%d starts; want 2: the first and the one after the lock was taken again", n)
				}
				if err := l.End(vmpool.Unused); err != nil {
					t.Fatal(err)
				}
				if err := p.Close(context.Background()); err != nil {
					t.Fatal(err)
				}
				if n := b.count("stop", "vm-0"); n != 1 {
					t.Errorf("%d stops of the VM taken again; want 1", n)
				}
				return
			}
			if err := p.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			if n := b.count("stop", "vm-0"); n != 0 {
				t.Errorf("Close stopped a VM whose lock was lost (%d stops); another pool may drive it", n)
			}
			if n := b.count("reset", "vm-0"); n != resets {
				t.Errorf("resets %d → %d after the lock was lost", resets, n)
			}
			if n := locks.taken(key); n != 1 {
				t.Errorf("lock taken %d times; want 1: a quarantined VM is not taken again", n)
			}
		})
	}
}

// A VM lost while another pool holds its lock is not stopped at Close.
func TestPoolLockLostNotStopped(t *testing.T) {
	b := newTestBackend(2, t.Name()+":")
	locks := newLosableLocker()
	p := pooltest.NewPool(t, pooltest.Config(t), b, vmpool.WithLocker(locks))
	p.Events.WaitCount(t, vmpool.EventReady, "", 2)
	l := p.MustLease(t)
	locks.lose(b.specs[0].Key)
	locks.lose(b.specs[1].Key)
	p.Events.WaitCount(t, vmpool.EventLockLost, "", 2)
	select {
	case <-l.Lost():
	default:
		t.Fatal("Lost not closed after the lock-lost event")
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := l.End(vmpool.Healthy); err != nil {
		t.Fatalf("End after Close: %v", err)
	}
	for _, s := range b.specs {
		if n := b.count("stop", s.ID); n != 0 {
			t.Errorf("%s stopped %d times; want 0", s.ID, n)
		}
	}
}

// A lock lost while the pool's lock retries ask the Locker about another
// VM is retried too, although that other VM's lock is then taken.
func TestPoolLockLostWhileRetryingOthers(t *testing.T) {
	b := newTestBackend(2, t.Name()+":")
	k0, k1 := b.specs[0].Key, b.specs[1].Key
	locks := newLosableLocker()
	locks.other[k1] = true // vm-1 is held elsewhere: the retries run
	asking := make(chan struct{})
	answer := make(chan struct{})
	var once sync.Once
	var asked atomic.Int32
	locks.gate = func(key string) {
		if key != k1 || asked.Add(1) == 1 { // NewPool's own try goes through
			return
		}
		once.Do(func() { // the first retry of vm-1 waits for the test
			close(asking)
			<-answer
		})
	}
	p := pooltest.NewPool(t, pooltest.Config(t), b, vmpool.WithLocker(locks))
	p.Events.WaitCount(t, vmpool.EventReady, "vm-0", 1)
	<-asking
	locks.lose(k0) // while the Locker is asked about vm-1
	p.Events.WaitCount(t, vmpool.EventLockLost, "vm-0", 1)
	locks.free(k0)
	locks.free(k1)
	close(answer) // vm-1's lock is taken now
	p.Events.WaitCount(t, vmpool.EventLocked, "vm-1", 1)
	p.Events.WaitCount(t, vmpool.EventLocked, "vm-0", 2)
	p.Events.WaitCount(t, vmpool.EventReady, "", 3)
}

// A lock lost while Close waits for a reset to end: the VM is not stopped.
func TestPoolLockLostDuringClose(t *testing.T) {
	b := newTestBackend(1, t.Name()+":")
	locks := newLosableLocker()
	p := pooltest.NewPool(t, pooltest.Config(t), b, vmpool.WithLocker(locks))
	resetting, release := make(chan struct{}), make(chan struct{})
	b.onReset = func(ctx context.Context, id string) error {
		close(resetting)
		<-release // a reset that does not heed its context at once
		return ctx.Err()
	}
	if err := p.MustLease(t).End(vmpool.Healthy); err != nil {
		t.Fatal(err)
	}
	<-resetting
	closed := make(chan error, 1)
	go func() { closed <- p.Close(context.Background()) }()
	poll.Until(t, "Close begins", 10*time.Second, func() bool {
		_, err := p.Lease(context.Background())
		return errors.Is(err, vmpool.ErrClosed)
	})
	locks.lose(b.specs[0].Key)
	close(release)
	if err := <-closed; err != nil {
		t.Fatal(err)
	}
	if n := b.count("stop", "vm-0"); n != 0 {
		t.Errorf("Close stopped the VM whose lock was lost while it waited (%d stops)", n)
	}
}
