package vmpool

// The lease API: Pool.Lease (with Avoid), the Lease a caller holds, and
// Lease.End with the caller's verdict on the VM (Healthy, Fault, Unused);
// and how waiting Lease calls are served from the idle VMs.

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
)

// Lease is one VM leased to one caller, from Pool.Lease until End. Its
// methods are safe for concurrent use. After End the lease must not be
// used: the VM is being reset and may already serve someone else.
type Lease struct {
	p        *Pool
	v        *vm
	spec     VMSpec
	guest    *guest.Client
	ep       Endpoint
	at       time.Time     // guarded by p.mu
	released bool          // guarded by p.mu
	lost     chan struct{} // closed when the VM's lock is lost during the lease
	isLost   bool          // guarded by p.mu
}

// Lost is closed when the pool loses the VM's machine lock during the
// lease (a Locker whose locks can be lost, see LossNotifier): another
// pool may drive the VM now, so what the caller does on it from then on,
// and maybe a little before, cannot be trusted. The caller should stop,
// discard the episode and End the lease (any verdict: the pool neither
// resets the VM nor counts a fault; it takes the lock again once it is
// free).
func (l *Lease) Lost() <-chan struct{} { return l.lost }

// loseLocked closes Lost, once.
func (l *Lease) loseLocked() {
	if !l.isLost {
		l.isLost = true
		close(l.lost)
	}
}

// ID is the VM's id; record it with the trajectory.
func (l *Lease) ID() string { return l.spec.ID }

// Spec is the VM's description.
func (l *Lease) Spec() VMSpec { return l.spec }

// Guest is the client of the VM's guest server: screenshots, pyautogui
// actions, task setup, app state.
func (l *Lease) Guest() *guest.Client { return l.guest }

// Endpoint is where the VM's servers answer during this lease.
func (l *Lease) Endpoint() Endpoint { return l.ep }

// LeasedAt is when the lease began.
func (l *Lease) LeasedAt() time.Time {
	l.p.mu.Lock()
	defer l.p.mu.Unlock()
	return l.at
}

// ScreenSize is the VM's screen size, asked of the guest once per start or
// reset endpoint and then remembered.
func (l *Lease) ScreenSize(ctx context.Context) (w, h int, err error) {
	l.p.mu.Lock()
	w, h = l.v.screenW, l.v.screenH
	l.p.mu.Unlock()
	if w > 0 && h > 0 {
		return w, h, nil
	}
	w, h, err = l.guest.ScreenSize(ctx)
	if err != nil {
		return 0, 0, &VMError{VM: l.spec.ID, Op: "screen size", Err: err}
	}
	l.p.mu.Lock()
	if l.v.guest == l.guest {
		l.v.screenW, l.v.screenH = w, h
	}
	l.p.mu.Unlock()
	return w, h, nil
}

// dispatchLocked puts a ready VM in the idle queue and serves the waiting
// Lease calls that can take a VM now.
func (p *Pool) dispatchLocked(v *vm) {
	p.idle = append(p.idle, v)
	p.matchLocked()
}

// matchLocked serves waiting Lease calls from the idle VMs: each waiter, in
// the order they came, gets the longest-idle VM it accepts (see
// acceptsLocked). It runs whenever a VM becomes idle, a waiter arrives, or
// a quarantine changes what a waiter accepts.
func (p *Pool) matchLocked() {
	for wi := 0; wi < len(p.waiters) && len(p.idle) > 0; {
		w := p.waiters[wi]
		vi := slices.IndexFunc(p.idle, func(v *vm) bool { return p.acceptsLocked(w, v) })
		if vi < 0 {
			wi++
			continue
		}
		v := p.idle[vi]
		p.idle = slices.Delete(p.idle, vi, vi+1)
		p.waiters = slices.Delete(p.waiters, wi, wi+1)
		w.ch <- leaseResult{lease: p.leaseLocked(v)}
	}
}

// acceptsLocked reports whether waiter w takes VM v: v is not one w
// avoids, or every VM w does not avoid is out of this pool's hands
// (quarantined, or held by another process), so that waiting could last
// for ever.
func (p *Pool) acceptsLocked(w *waiter, v *vm) bool {
	if !w.avoid[v.spec.ID] {
		return true
	}
	for _, o := range p.vms {
		if !w.avoid[o.spec.ID] && o.state != StateQuarantined && o.state != StateLockedElsewhere {
			return false
		}
	}
	return true
}

func (p *Pool) leaseLocked(v *vm) *Lease {
	v.state = StateLeased
	l := &Lease{p: p, v: v, spec: v.spec, guest: v.guest, ep: v.ep, at: time.Now(), lost: make(chan struct{})}
	v.lease = l
	return l
}

// LeaseOption adjusts one Lease call.
type LeaseOption func(*waiter)

// Avoid asks Lease for a VM other than the given ones (the VMs an episode
// failed on). Lease then waits for another VM, unless no other VM is in the
// pool's hands (every other one is quarantined or held by another process):
// then an avoided VM is better than none.
func Avoid(ids ...string) LeaseOption {
	return func(w *waiter) {
		for _, id := range ids {
			if w.avoid == nil {
				w.avoid = map[string]bool{}
			}
			w.avoid[id] = true
		}
	}
}

// Lease returns a clean, ready VM for one episode. It blocks until a VM is
// ready or ctx ends; callers are served first come, first served, each with
// the longest-idle VM it accepts (see Avoid). The caller must end the lease
// with Lease.End.
//
// Errors: ctx's error (wrapped, with the pool's state) when ctx ends first;
// ErrNoVMs when every VM is quarantined (at once, or as soon as the last
// one is while waiting); ErrClosed after Close.
func (p *Pool) Lease(ctx context.Context, opts ...LeaseOption) (*Lease, error) {
	start := time.Now()
	w := &waiter{ch: make(chan leaseResult, 1)}
	for _, o := range opts {
		o(w)
	}
	p.mu.Lock()
	switch {
	case p.closed:
		p.mu.Unlock()
		return nil, ErrClosed
	case p.quarantined == len(p.vms):
		err := p.noVMsErrLocked()
		p.mu.Unlock()
		return nil, err
	case ctx.Err() != nil:
		p.mu.Unlock()
		return nil, fmt.Errorf("vmpool: lease: %w", ctx.Err())
	}
	p.waiters = append(p.waiters, w)
	p.matchLocked()
	p.mu.Unlock()

	select {
	case r := <-w.ch:
		return p.finishLease(r, start)
	case <-ctx.Done():
	}
	p.mu.Lock()
	if i := slices.Index(p.waiters, w); i >= 0 {
		p.waiters = slices.Delete(p.waiters, i, i+1)
		msg := p.summaryLocked()
		p.mu.Unlock()
		return nil, fmt.Errorf("vmpool: lease: no VM became ready after %v (%s): %w",
			errtext.Duration(time.Since(start)), msg, ctx.Err())
	}
	p.mu.Unlock()
	// A result was sent as ctx ended: a VM goes back, unused and clean.
	r := <-w.ch
	if r.lease != nil {
		p.mu.Lock()
		v := r.lease.v
		v.lease = nil
		switch {
		case v.lockLost && !p.closed:
			p.relockLocked(v)
		default:
			v.state = StateReady // nobody holds it, closed pool or not
			if !p.closed {
				p.dispatchLocked(v)
			}
		}
		p.mu.Unlock()
	}
	if r.err != nil {
		return nil, r.err
	}
	return nil, fmt.Errorf("vmpool: lease: %w", ctx.Err())
}

func (p *Pool) finishLease(r leaseResult, start time.Time) (*Lease, error) {
	if r.err != nil {
		return nil, r.err
	}
	p.mu.Lock()
	p.leasedLocked(r.lease, start)
	p.mu.Unlock()
	return r.lease, nil
}

func (p *Pool) leasedLocked(l *Lease, start time.Time) {
	wait := time.Since(start)
	l.at = time.Now()
	l.v.leases++
	p.st.Leases++
	p.st.LeaseWait += wait
	p.emitLocked(Event{VM: l.spec.ID, Kind: EventLeased, Duration: wait})
}

// summaryLocked describes the VMs' states for a message.
func (p *Pool) summaryLocked() string {
	counts := map[State]int{}
	for _, v := range p.vms {
		counts[v.state]++
	}
	var parts []string
	for _, s := range []State{StateReady, StateLeased, StateStarting, StateResetting, StateChecking, StateLockedElsewhere, StateQuarantined} {
		if n := counts[s]; n > 0 {
			label := string(s)
			if s == StateLockedElsewhere {
				label = "held by another process"
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, label))
		}
	}
	return fmt.Sprintf("%d VMs: %s", len(p.vms), strings.Join(parts, ", "))
}

// Verdict is what the caller says about a VM when it ends a lease: Healthy,
// Unused, or Fault(err).
type Verdict struct {
	unused bool
	fault  error
}

var (
	// Healthy: the VM was used and behaved. The episode's outcome does not
	// matter: a failed task on a working VM is healthy.
	Healthy = Verdict{}
	// Unused: the caller made no guest call. The VM is ready again at once,
	// without a reset, and the pool learns nothing about its health.
	Unused = Verdict{unused: true}
)

// Fault is the verdict on a VM that failed the caller (a guest that
// stopped answering, an app that could not start); err is what a
// quarantine reports (nil: "the VM failed").
func Fault(err error) Verdict {
	if err == nil {
		err = errors.New("the VM failed")
	}
	return Verdict{fault: err}
}

// End hands the lease back with the caller's verdict on the VM. After a
// Healthy or Fault verdict the VM's reset starts at once in the background
// (End does not wait for it); a Fault counts toward quarantine, a Healthy
// verdict clears the VM's failures in a row. After Unused the VM is ready
// again at once and its failures in a row are kept, so a failing VM that
// is leased and handed back unused still reaches quarantine.
//
// End returns ErrReleased for a lease ended before, and nil after Close
// (the VM is stopped with the others).
func (l *Lease) End(v Verdict) error {
	if l == nil {
		return errors.New("vmpool: end: nil lease")
	}
	p := l.p
	p.mu.Lock()
	defer p.mu.Unlock()
	vm, held, err := p.endLeaseLocked(l)
	if err != nil {
		return err
	}
	if v.unused {
		// held is not Busy: the VM did no work.
		p.st.Returns++
		p.emitLocked(Event{VM: vm.spec.ID, Kind: EventReturned, Duration: held})
	} else {
		p.st.Busy += held
		p.st.Releases++
		p.emitLocked(Event{VM: vm.spec.ID, Kind: EventReleased, Healthy: v.fault == nil, Duration: held, Err: v.fault})
	}
	switch {
	case vm.lockLost:
		// Not ours any more: no reset, no verdict; the lock is retried.
		if !p.closed {
			p.relockLocked(vm)
		}
		return nil
	case v.unused:
		vm.state = StateReady // nobody holds it, closed pool or not
		if !p.closed {
			p.dispatchLocked(vm)
		}
		return nil
	case p.closed:
		return nil
	}
	if v.fault == nil {
		vm.failures = 0
	} else {
		p.st.UnhealthyReleases++
		if p.failLocked(vm, "episode", &VMError{VM: vm.spec.ID, Op: "episode", Err: v.fault}) {
			return nil
		}
	}
	vm.state = StateResetting
	p.emitLocked(Event{VM: vm.spec.ID, Kind: EventResetting})
	p.goLocked(func() { p.bringUp(vm, "reset") })
	return nil
}

// endLeaseLocked ends l: it returns l's VM, now held by nobody, and how
// long l was held; ErrReleased when l ended before.
func (p *Pool) endLeaseLocked(l *Lease) (*vm, time.Duration, error) {
	if l.released {
		return nil, 0, fmt.Errorf("%w (vm %s)", ErrReleased, l.spec.ID)
	}
	l.released = true
	l.v.lease = nil
	return l.v, time.Since(l.at), nil
}
