package vmpool

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// Errors of the pool that callers branch on.
var (
	// ErrNoVMs is matched by Lease's error when every VM of the pool is
	// quarantined: no lease can ever be served. The error lists the VMs and
	// why each was quarantined.
	ErrNoVMs = errors.New("vmpool: no usable VM left: every VM of the pool is quarantined")
	// ErrClosed is matched by Lease's error once Close has begun.
	ErrClosed = errors.New("vmpool: pool is closed")
	// ErrReleased is returned by a second End of one lease.
	ErrReleased = errors.New("vmpool: lease already ended")
)

// VMError is a failure of one operation on one VM.
type VMError struct {
	VM  string // VM id
	Op  string // "start", "reset", "health", "stop", ...
	Err error  // what went wrong
}

// Error names the VM and the operation.
func (e *VMError) Error() string { return fmt.Sprintf("vmpool: vm %s: %s: %v", e.VM, e.Op, e.Err) }

// Unwrap is Err.
func (e *VMError) Unwrap() error { return e.Err }

// opTimeoutError is an operation that did not return within the pool's
// deadline for it. It matches context.DeadlineExceeded and ErrStuck.
type opTimeoutError struct {
	op      string
	timeout time.Duration
	err     error
}

func (e *opTimeoutError) Error() string {
	return fmt.Sprintf("did not finish within %v (timeouts.%s): %v", e.timeout, e.op, e.err)
}
func (e *opTimeoutError) Unwrap() error { return e.err }
func (e *opTimeoutError) Is(target error) bool {
	return target == context.DeadlineExceeded || target == ErrStuck
}

// isTimeout reports a failure that quarantines a VM at once: an operation
// or a guest call that ran out of time, or a VM that never became ready.
func isTimeout(err error) bool {
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrStuck) || errors.Is(err, guest.ErrTimeout)
}

// State is where a VM is in its life in the pool.
type State string

// VM states.
const (
	StateLockedElsewhere State = "locked-elsewhere" // another process holds its lock; retried every lock_retry
	StateStarting        State = "starting"         // Backend.Start, then a health check
	StateReady           State = "ready"            // idle, clean, waiting for a lease
	StateLeased          State = "leased"
	StateResetting       State = "resetting" // Backend.Reset, then a health check
	StateChecking        State = "checking"  // health check of a VM that sat idle
	StateQuarantined     State = "quarantined"
)

// Quarantine records why a VM was taken out of rotation.
type Quarantine struct {
	VM       string    // VM id
	Reason   string    // "3 failures in a row", "reset timed out", ...
	Err      error     // the last failure
	Failures int       // consecutive failures at the time
	At       time.Time // when
}

// String says which VM, why, when and its last error.
func (q Quarantine) String() string {
	s := fmt.Sprintf("%s: %s at %s", q.VM, q.Reason, q.At.Format(time.RFC3339))
	if q.Err != nil {
		s += ": " + q.Err.Error()
	}
	return s
}

// EventKind names a pool event.
type EventKind string

// Pool events, in the order a VM typically goes through them.
const (
	EventLockHeld    EventKind = "lock-held"   // another process holds the VM's lock
	EventLocked      EventKind = "locked"      // the pool took the VM's lock
	EventStarting    EventKind = "starting"    // Backend.Start begins
	EventResetting   EventKind = "resetting"   // Backend.Reset begins (right after a release: reset-ahead)
	EventChecking    EventKind = "checking"    // health check of an idle VM begins
	EventReady       EventKind = "ready"       // the VM is clean and waits for a lease (Duration: of the start/reset/check)
	EventLeased      EventKind = "leased"      // handed to a caller (Duration: the caller's wait)
	EventReleased    EventKind = "released"    // ended Healthy or Fault (Duration: how long it was leased; Err: the fault)
	EventReturned    EventKind = "returned"    // ended Unused: ready again without a reset (Duration: how long it was leased)
	EventFailed      EventKind = "failed"      // a start, reset or health check failed (Err)
	EventQuarantined EventKind = "quarantined" // taken out of rotation (Err)
	EventLockLost    EventKind = "lock-lost"   // the VM's lock was lost (LossNotifier): the pool lets the VM go (Err)
	EventStopped     EventKind = "stopped"     // Backend.Stop returned during Close (Err, if it failed)
)

// Event is one thing that happened to a VM, for metrics and tests.
type Event struct {
	Time     time.Time     // when it happened
	VM       string        // VM id
	Kind     EventKind     // what happened
	Healthy  bool          // EventReleased: the caller's verdict
	Duration time.Duration // what it measures depends on Kind (see the EventKind values)
	Err      error         // the failure or fault, for the kinds that have one
}

// Stats is a snapshot of the pool's counters.
type Stats struct {
	VMs int // VMs in the pool, quarantined ones included

	// VMs by state now.
	Ready, Leased, Starting, Resetting, Checking, Quarantined, LockedElsewhere int
	// Waiting is the number of Lease calls blocked now.
	Waiting int

	Leases            int64 // leases handed out
	Releases          int64 // leases ended Healthy or Fault
	UnhealthyReleases int64 // leases ended Fault
	Returns           int64 // leases ended Unused
	Starts            int64 // Backend.Start calls
	StartFailures     int64 // Backend.Start calls that failed (or their health check did)
	Resets            int64 // Backend.Reset calls
	ResetFailures     int64 // Backend.Reset calls that failed (or their health check did)
	HealthChecks      int64 // health checks after starts and resets and of idle VMs
	HealthFailures    int64 // health checks of idle VMs that failed
	LocksLost         int64 // VM locks lost while held (LossNotifier)
	// Failures is UnhealthyReleases + StartFailures + ResetFailures +
	// HealthFailures.
	Failures int64

	// LeaseWait is the time Lease callers spent waiting, summed.
	LeaseWait time.Duration
	// Busy is the time VMs spent leased, summed (leases still out count up
	// to now; leases ended Unused do not count).
	Busy time.Duration
	// Wall is the time since the pool was created.
	Wall time.Duration
	// Utilisation is Busy / (VMs × Wall), in [0, 1].
	Utilisation float64

	// QuarantinedVMs says which VMs were quarantined, why and when.
	QuarantinedVMs []Quarantine
}

// VMStatus is one VM as the pool sees it now.
type VMStatus struct {
	Spec       VMSpec      // the VM as its backend describes it
	State      State       // where it is in its life in the pool
	GuestURL   string      // "" until started
	Failures   int         // consecutive failures
	Leases     int64       // leases of this VM so far
	Resets     int64       // Backend.Reset calls for this VM so far
	LastError  string      // the last failure, if the VM has not been ready since
	Quarantine *Quarantine // why the VM was quarantined, or nil
}

// Option adjusts NewPool.
type Option func(*options)

type options struct {
	log       *slog.Logger
	guestOpts guest.Options
	onEvent   func(Event)
	locker    Locker
}

// WithLogger sets the pool's logger (default slog.Default()). The pool logs
// with key/value pairs: pool, backend, vm, op, err.
func WithLogger(l *slog.Logger) Option { return func(o *options) { o.log = l } }

// WithGuestOptions sets the options of the guest clients the pool creates
// for its VMs (Lease.Guest). StateURL is set per VM from its Endpoint.
// Without an HTTPClient the pool uses one of its own and closes its idle
// connections on Close.
func WithGuestOptions(g guest.Options) Option { return func(o *options) { o.guestOpts = g } }

// WithEvents calls fn for every pool event. fn is called in the order the
// events happen, with the pool's lock held: it must be quick and must not
// call the Pool (count, record, or hand the event to a channel with room).
// Several WithEvents options add up: each fn is called, in the order the
// options were given.
func WithEvents(fn func(Event)) Option {
	return func(o *options) {
		if prev := o.onEvent; prev != nil {
			o.onEvent = func(ev Event) { prev(ev); fn(ev) }
			return
		}
		o.onEvent = fn
	}
}

// Pool leases the VMs of one backend to rollout workers. It is safe for
// concurrent use. A VM is leased to one caller at a time, and — through a
// machine lock per VM (a lock file by default, see Locker) — to one pool
// at a time.
//
// Life of a VM: locked → starting → ready ⇄ leased → resetting → ready ...
// Ending a lease starts the VM's reset at once in the background (reset-ahead),
// so the next Lease finds a clean VM without waiting for a revert. A VM
// that fails QuarantineAfter times in a row (unhealthy releases, failed
// starts, resets or health checks), or whose start, reset or health check
// runs out of time, is quarantined: out of rotation for the rest of the
// pool's life, reported by Stats, Quarantined and a log line.
type Pool struct {
	cfg         Config
	afterRevert string // the command run after each start and reset; "" none
	backend     Backend
	log         *slog.Logger
	onEvent     func(Event)
	guestOpts   guest.Options
	ownClient   *http.Client // the guests' HTTP client when the pool made it: ours to close, or nil

	ctx     context.Context // ends at Close: every background operation derives from it
	cancel  context.CancelFunc
	wg      sync.WaitGroup // background goroutines
	created time.Time

	mu          sync.Mutex
	vms         []*vm
	idle        []*vm     // ready VMs, longest-ready first
	waiters     []*waiter // blocked Lease calls, first come first served
	closed      bool
	quarantined int
	st          Stats // counters only; states are counted on demand
	locks       *machineLocks
	byKey       map[string]*vm // by VMSpec.Key
	closeOnce   sync.Once
	closeErr    error
}

// vm is the pool's record of one VM; guarded by Pool.mu except where noted.
type vm struct {
	spec     VMSpec
	lockLost bool // lock lost while leased, starting, resetting or checking: its owner lets it go
	// ctx lives as long as the pool holds the VM's lock: its starts,
	// resets and health checks run under it, and losing the lock cancels it.
	ctx        context.Context
	cancel     context.CancelFunc
	state      State
	started    bool // Backend.Start was called: Stop it on Close
	ep         Endpoint
	guest      *guest.Client
	failures   int // consecutive
	lastErr    error
	readySince time.Time
	lease      *Lease
	quarantine *Quarantine
	leases     int64
	resets     int64
	screenW    int // cached ScreenSize of the current endpoint
	screenH    int
}

type leaseResult struct {
	lease *Lease
	err   error
}

type waiter struct {
	ch    chan leaseResult // buffered: the pool never blocks on a waiter
	avoid map[string]bool  // VMs the caller would rather not get (Avoid)
}

// NewPool creates a pool of backend's VMs under the policy cfg and starts
// bringing the VMs up in the background; it does not wait for them (Lease
// does). The pool owns backend from now on: it closes it at Close, or
// before NewPool returns an error. ctx bounds only NewPool's own work
// (listing the VMs, the backend's setup); the pool lives until Close. A VM
// whose lock another process holds is left to that process and retried
// every cfg.LockRetry. Package poolfile builds the backend and the pool
// that a pool file describes.
func NewPool(ctx context.Context, cfg Config, backend Backend, opts ...Option) (*Pool, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if o.log == nil {
		o.log = slog.Default()
	}
	cfg = cfg.withDefaults()
	closeBackend := func() {
		cctx, cancel := context.WithTimeout(context.Background(), cfg.Timeouts.Stop)
		_ = backend.Close(cctx)
		cancel()
	}
	if err := cfg.Validate(); err != nil {
		closeBackend()
		return nil, err
	}
	log := o.log.With("pool", cfg.ID, "backend", backend.Name())
	lctx, cancel := context.WithTimeout(ctx, cfg.Timeouts.Start)
	specs, err := backend.VMs(lctx)
	cancel()
	if err == nil {
		err = checkSpecs(backend.Name(), specs)
	}
	if err != nil {
		closeBackend()
		return nil, fmt.Errorf("vmpool: pool %s: listing the %s VMs: %w", cfg.ID, backend.Name(), err)
	}

	p := &Pool{
		cfg:         cfg,
		afterRevert: cfg.AfterRevert,
		backend:     backend,
		log:         log,
		onEvent:     o.onEvent,
		guestOpts:   o.guestOpts,
		created:     time.Now(),
		byKey:       map[string]*vm{},
	}
	locker := o.locker
	if locker == nil {
		locker = fileLocker{dir: cfg.LockDir}
	}
	switch p.afterRevert {
	case "":
		if ar, ok := backend.(AfterReverter); ok {
			p.afterRevert = ar.DefaultAfterRevert()
		}
	case AfterRevertOff:
		p.afterRevert = ""
	}
	if p.guestOpts.HTTPClient == nil {
		p.ownClient = guest.NewHTTPClient()
		p.guestOpts.HTTPClient = p.ownClient
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	p.locks = newMachineLocks(p.ctx, locker, cfg.LockRetry, log, p.goLocked, p.lockEvents())
	for i := range specs {
		if specs[i].Key == "" {
			specs[i].Key = backend.Name() + ":" + specs[i].ID
		}
		v := &vm{spec: specs[i], state: StateLockedElsewhere}
		p.vms = append(p.vms, v)
		p.byKey[v.spec.Key] = v
	}

	p.mu.Lock()
	elsewhere := 0
	var lockErr error
	for _, v := range p.vms {
		locked, err := p.tryLockLocked(v)
		if err != nil {
			lockErr = err
			break
		}
		if !locked {
			elsewhere++
		}
	}
	if lockErr == nil && cfg.IdleCheck > 0 {
		p.goLocked(p.checkLoop)
	}
	p.mu.Unlock()
	if lockErr != nil {
		_ = p.Close(ctx)
		return nil, lockErr
	}
	log.Debug("vmpool: pool created", "vms", len(p.vms), "locked_elsewhere", elsewhere, "lock_dir", cfg.LockDir)
	return p, nil
}

func checkSpecs(backend string, specs []VMSpec) error {
	if len(specs) == 0 {
		return errors.New("the backend has no VMs")
	}
	ids := map[string]bool{}
	keys := map[string]string{}
	for _, s := range specs {
		if !ValidID(s.ID) {
			return fmt.Errorf("VM id %q: want letters, digits, '.', '_' and '-', starting with a letter or digit", s.ID)
		}
		if ids[s.ID] {
			return fmt.Errorf("VM id %q appears twice; give each VM its own id", s.ID)
		}
		ids[s.ID] = true
		key := cmp.Or(s.Key, backend+":"+s.ID)
		if other, ok := keys[key]; ok {
			return fmt.Errorf("VMs %q and %q are the same machine (%s)", other, s.ID, key)
		}
		keys[key] = s.ID
	}
	return nil
}

// tryLockLocked tries to take v's machine lock; on success v starts.
func (p *Pool) tryLockLocked(v *vm) (bool, error) {
	l, holder, err := p.locks.try(v.spec.Key, p.lockNote(v))
	if err != nil {
		return false, &VMError{VM: v.spec.ID, Op: "lock", Err: err}
	}
	if l == nil {
		p.lockBusyLocked(v, holder)
		return false, nil
	}
	p.startLocked(v)
	return true, nil
}

// lockNote says who asks for v's lock.
func (p *Pool) lockNote(v *vm) string { return "pool=" + p.cfg.ID + " vm=" + v.spec.ID }

// lockEvents is how the pool's machine locks reach the pool.
func (p *Pool) lockEvents() lockEvents {
	return lockEvents{
		taken: func(key string, l Lock) {
			p.mu.Lock()
			defer p.mu.Unlock()
			v := p.byKey[key]
			switch {
			case p.closed || !p.locks.holds(key, l):
				// Close releases it, or it was lost before this ran.
			case v.state != StateLockedElsewhere:
				p.locks.release(key) // not wanted by the VM's state: never happens
			default:
				p.startLocked(v)
			}
		},
		busy: func(key, holder string) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if v := p.byKey[key]; !p.closed && v.state == StateLockedElsewhere {
				p.lockBusyLocked(v, holder)
			}
		},
		lost: func(key string, l Lock) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.loseLockLocked(p.byKey[key], l)
		},
		fail: func(key string, err error) {
			p.mu.Lock()
			defer p.mu.Unlock()
			if v := p.byKey[key]; !p.closed {
				p.log.Warn("vmpool: lock failed", "vm", v.spec.ID, "err", &VMError{VM: v.spec.ID, Op: "lock", Err: err})
			}
		},
	}
}

// lockBusyLocked records that another process holds v's lock; it is
// logged once per VM, not every retry.
func (p *Pool) lockBusyLocked(v *vm, holder string) {
	if v.lastErr != nil {
		return
	}
	v.lastErr = fmt.Errorf("locked by another process (%s)", holder)
	p.log.Warn("vmpool: VM is in use by another process; will retry", "vm", v.spec.ID, "key", v.spec.Key,
		"holder", holder, "retry", p.cfg.LockRetry)
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventLockHeld, Err: v.lastErr})
}

// startLocked starts v, whose lock the pool has just taken.
func (p *Pool) startLocked(v *vm) {
	v.lastErr = nil
	v.ctx, v.cancel = context.WithCancel(p.ctx)
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventLocked})
	v.state = StateStarting
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventStarting})
	p.goLocked(func() { p.bringUp(v, "start") })
}

// loseLockLocked lets v go after its lock l was lost: another pool may
// drive it now. Its start, reset or health check under way is cancelled,
// and it is not stopped at Close. A ready VM leaves the idle queue; a
// leased one waits for its lease's End (Lease.Lost tells the caller), a
// starting, resetting or checking one for the goroutine that owns it; then
// relockLocked. A quarantined VM stays quarantined. A lock lost before the
// pool started the VM on it is wanted again.
func (p *Pool) loseLockLocked(v *vm, l Lock) {
	if p.closed || !p.locks.holds(v.spec.Key, l) || v.lockLost {
		return
	}
	p.st.LocksLost++
	p.log.Error("vmpool: VM lock lost; the pool lets the VM go and will take it again once it is free",
		"vm", v.spec.ID, "key", v.spec.Key, "state", v.state)
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventLockLost, Err: errLockLost})
	if v.state == StateLockedElsewhere { // taken by the retries, lost before it started
		p.relockLocked(v)
		return
	}
	v.started = false // not ours to stop any more
	v.cancel()
	switch v.state {
	case StateReady:
		p.idle = slices.DeleteFunc(p.idle, func(o *vm) bool { return o == v })
		p.relockLocked(v)
	case StateQuarantined:
		p.locks.release(v.spec.Key)
	case StateLeased:
		v.lockLost = true
		if v.lease != nil {
			v.lease.loseLocked()
		}
	default: // starting, resetting, checking
		v.lockLost = true
	}
}

// relockLocked hands v, whose lock was lost and which nobody drives now,
// to the lock retries, like a VM another process holds.
func (p *Pool) relockLocked(v *vm) {
	v.lockLost = false
	v.started = false
	p.locks.release(v.spec.Key)
	v.state = StateLockedElsewhere
	v.lastErr = nil // the next try logs who holds it
	p.locks.want(v.spec.Key, p.lockNote(v))
	p.matchLocked() // a waiter that avoided the idle VMs may now take one
}

// goLocked runs f in a goroutine the pool owns. Called with p.mu held and
// p.closed false, or from a goroutine the pool owns, so it never races
// with Close's Wait.
func (p *Pool) goLocked(f func()) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		f()
	}()
}

func (p *Pool) emitLocked(ev Event) {
	if p.onEvent == nil {
		return
	}
	if ev.Time.IsZero() {
		ev.Time = time.Now()
	}
	p.onEvent(ev)
}

// tickLocked waits for t's next tick and then takes p.mu; it returns false
// (without the lock) when the pool stops first.
func (p *Pool) tickLocked(t *time.Ticker) bool {
	select {
	case <-p.ctx.Done():
		return false
	case <-t.C:
	}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return false
	}
	return true
}

// checkLoop health-checks VMs that have sat idle for IdleCheck, so a VM
// that died while nobody used it is not handed out.
func (p *Pool) checkLoop() {
	period := max(p.cfg.IdleCheck/4, 10*time.Millisecond)
	t := time.NewTicker(period)
	defer t.Stop()
	for p.tickLocked(t) {
		now := time.Now()
		kept := p.idle[:0]
		for _, v := range p.idle {
			if now.Sub(v.readySince) < p.cfg.IdleCheck {
				kept = append(kept, v)
				continue
			}
			v.state = StateChecking
			p.emitLocked(Event{VM: v.spec.ID, Kind: EventChecking})
			p.goLocked(func() { p.idleCheck(v) })
		}
		clear(p.idle[len(kept):])
		p.idle = kept
		p.mu.Unlock()
	}
}

// idleCheck runs one health check of an idle VM.
func (p *Pool) idleCheck(v *vm) {
	start := time.Now()
	err := p.health(v, "health")
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if v.lockLost {
		p.relockLocked(v)
		return
	}
	if err == nil {
		v.failures = 0 // an idle VM that answers has recovered from any earlier trouble
		p.readyLocked(v, time.Since(start))
		return
	}
	p.st.HealthFailures++
	if p.failLocked(v, "health", err) {
		return
	}
	v.state = StateResetting
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventResetting})
	p.goLocked(func() { p.bringUp(v, "reset") })
}

// health runs Backend.Health under the health deadline. The caller owns v
// (its state is starting, resetting or checking), so v.guest is stable.
func (p *Pool) health(v *vm, op string) error {
	p.mu.Lock()
	p.st.HealthChecks++
	g, vctx := v.guest, v.ctx
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(vctx, p.cfg.Timeouts.Health)
	defer cancel()
	err := p.backend.Health(ctx, v.spec, g)
	if err != nil && ctx.Err() == context.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
		err = &opTimeoutError{op: "health", timeout: p.cfg.Timeouts.Health, err: err}
	}
	if err != nil {
		return &VMError{VM: v.spec.ID, Op: op, Err: err}
	}
	return nil
}

// bringUp starts (op "start") or resets (op "reset") v, then checks its
// health, retrying after failures until it is ready or quarantined. The
// caller has set v's state and owns v until bringUp hands it back.
func (p *Pool) bringUp(v *vm, op string) {
	for {
		begin := time.Now()
		err := p.bringUpOnce(v, op)
		p.mu.Lock()
		if p.closed || p.ctx.Err() != nil {
			p.mu.Unlock()
			return // Close cancelled the operation: not the VM's fault
		}
		if v.lockLost {
			p.relockLocked(v)
			p.mu.Unlock()
			return
		}
		if err == nil {
			p.readyLocked(v, time.Since(begin))
			p.mu.Unlock()
			return
		}
		if op == "start" {
			p.st.StartFailures++
		} else {
			p.st.ResetFailures++
		}
		if p.failLocked(v, op, err) {
			p.mu.Unlock()
			return
		}
		vctx := v.ctx
		p.mu.Unlock()
		t := time.NewTimer(p.cfg.RetryWait)
		select {
		case <-vctx.Done(): // Close, or the lock was lost
		case <-t.C:
		}
		t.Stop()
		p.mu.Lock()
		if p.closed || p.ctx.Err() != nil {
			p.mu.Unlock()
			return
		}
		if v.lockLost {
			p.relockLocked(v)
			p.mu.Unlock()
			return
		}
		p.mu.Unlock()
	}
}

// bringUpOnce is one Backend.Start or Backend.Reset, then one health check.
func (p *Pool) bringUpOnce(v *vm, op string) error {
	timeout := p.cfg.Timeouts.Reset
	p.mu.Lock()
	if v.lockLost {
		p.mu.Unlock()
		return &VMError{VM: v.spec.ID, Op: op, Err: errors.New("the VM's lock was lost")}
	}
	if op == "start" {
		timeout = p.cfg.Timeouts.Start
		p.st.Starts++
		v.started = true
	} else {
		p.st.Resets++
		v.resets++
	}
	vctx := v.ctx
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(vctx, timeout)
	defer cancel()
	var ep Endpoint
	var err error
	if op == "start" {
		ep, err = p.backend.Start(ctx, v.spec)
	} else {
		ep, err = p.backend.Reset(ctx, v.spec)
	}
	timedOut := ctx.Err() == context.DeadlineExceeded
	switch {
	case err != nil && timedOut && !errors.Is(err, context.DeadlineExceeded):
		err = &opTimeoutError{op: op, timeout: timeout, err: err}
	case err == nil && timedOut:
		err = &opTimeoutError{op: op, timeout: timeout, err: errors.New("the backend returned after its deadline")}
	}
	if err != nil {
		return &VMError{VM: v.spec.ID, Op: op, Err: err}
	}

	p.mu.Lock()
	if v.guest == nil || ep != v.ep {
		gopts := p.guestOpts
		gopts.StateURL = ep.StateURL
		g, gerr := guest.New(ep.GuestURL, gopts)
		if gerr != nil {
			p.mu.Unlock()
			return &VMError{VM: v.spec.ID, Op: op, Err: fmt.Errorf("the backend gave a bad guest URL: %w", gerr)}
		}
		v.ep, v.guest = ep, g
		v.screenW, v.screenH = 0, 0
	}
	g := v.guest
	p.mu.Unlock()
	if p.afterRevert != "" {
		if err := p.runAfterRevert(ctx, v, g); err != nil {
			if ctx.Err() == context.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
				err = &opTimeoutError{op: op, timeout: timeout, err: err}
			}
			return &VMError{VM: v.spec.ID, Op: "after_revert after " + op, Err: err}
		}
	}
	return p.health(v, "health after "+op)
}

// runAfterRevert runs Config.AfterRevert in v's guest through the shell
// (POST /setup/execute). An answer is success whatever the exit code, as
// in ScienceBoard's harness; a non-zero one is logged.
func (p *Pool) runAfterRevert(ctx context.Context, v *vm, g *guest.Client) error {
	res, err := g.SetupExecute(ctx, guest.ShellCommand(p.afterRevert))
	var ee *guest.ExecError
	if errors.As(err, &ee) && ee.Err == nil { // it ran and exited non-zero
		p.log.Warn("vmpool: the after-revert command exited non-zero; going on", "vm", v.spec.ID,
			"command", p.afterRevert, "returncode", res.ReturnCode, "err", err)
		return nil
	}
	return err
}

// failLocked records a failure of v. It quarantines v and returns true
// when the failures in a row reached the threshold, or when a start, reset
// or health check (not an episode: the reset may well cure what went wrong
// in it) ran out of time.
func (p *Pool) failLocked(v *vm, op string, err error) bool {
	episode := op == "episode"
	v.failures++
	v.lastErr = err
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventFailed, Err: err})
	var ve *VMError
	if errors.As(err, &ve) {
		op = ve.Op // "health after reset" says more than "reset"
	}
	switch {
	case !episode && p.ctx.Err() == nil && isTimeout(err):
		p.quarantineLocked(v, op+" timed out", err)
		return true
	case v.failures >= p.cfg.QuarantineAfter:
		p.quarantineLocked(v, fmt.Sprintf("%d failures in a row", v.failures), err)
		return true
	}
	p.log.Warn("vmpool: VM failed; resetting it", "vm", v.spec.ID, "op", op, "failures", v.failures,
		"quarantine_after", p.cfg.QuarantineAfter, "err", err)
	return false
}

// quarantineLocked takes v out of rotation for good.
func (p *Pool) quarantineLocked(v *vm, reason string, err error) {
	q := &Quarantine{VM: v.spec.ID, Reason: reason, Err: err, Failures: v.failures, At: time.Now()}
	v.state = StateQuarantined
	v.quarantine = q
	p.quarantined++
	p.log.Error("vmpool: VM quarantined: out of rotation for the rest of this run", "vm", v.spec.ID,
		"reason", reason, "failures", v.failures, "err", err,
		"left", len(p.vms)-p.quarantined)
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventQuarantined, Err: err})
	if p.quarantined == len(p.vms) {
		err := p.noVMsErrLocked()
		for _, w := range p.waiters {
			w.ch <- leaseResult{err: err}
		}
		p.waiters = nil
		return
	}
	p.matchLocked() // a waiter that avoided the idle VMs may now take one
}

func (p *Pool) noVMsErrLocked() error {
	var b strings.Builder
	for _, v := range p.vms {
		if v.quarantine != nil {
			fmt.Fprintf(&b, "; %s", v.quarantine)
		}
	}
	return fmt.Errorf("%w (pool %s, %d VMs)%s", ErrNoVMs, p.cfg.ID, len(p.vms), b.String())
}

// readyLocked hands a clean VM to the first waiter, or queues it.
func (p *Pool) readyLocked(v *vm, took time.Duration) {
	v.state = StateReady
	v.readySince = time.Now()
	v.lastErr = nil
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventReady, Duration: took})
	p.dispatchLocked(v)
}

// Close stops the pool: blocked Lease calls return ErrClosed, background
// starts, resets and checks are cancelled and waited for, every VM the pool
// started is stopped (Backend.Stop, under timeouts.stop), the backend is
// closed and the lock files are released. Leases still out are not waited
// for: their VMs are stopped too, and their End returns nil. ctx bounds
// the whole of Close; Close is idempotent.
func (p *Pool) Close(ctx context.Context) error {
	p.closeOnce.Do(func() { p.closeErr = p.close(ctx) })
	return p.closeErr
}

func (p *Pool) close(ctx context.Context) error {
	p.mu.Lock()
	p.closed = true
	for _, w := range p.waiters {
		w.ch <- leaseResult{err: ErrClosed}
	}
	p.waiters = nil
	p.idle = nil
	p.mu.Unlock()
	p.cancel()

	var errs []error
	done := make(chan struct{})
	go func() {
		p.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-ctx.Done():
		errs = append(errs, fmt.Errorf("vmpool: close: background operations still running: %w", ctx.Err()))
	}

	// Stop what we started, in parallel, each under timeouts.stop.
	p.mu.Lock()
	var started []*vm
	for _, v := range p.vms {
		if v.started && !p.locks.lost(v.spec.Key) {
			started = append(started, v)
		}
	}
	p.mu.Unlock()
	stopErrs := make([]error, len(started))
	var swg sync.WaitGroup
	for i, v := range started {
		swg.Go(func() {
			sctx, cancel := context.WithTimeout(ctx, p.cfg.Timeouts.Stop)
			defer cancel()
			err := p.backend.Stop(sctx, v.spec)
			if err != nil {
				err = &VMError{VM: v.spec.ID, Op: "stop", Err: err}
				p.log.Warn("vmpool: stop failed", "vm", v.spec.ID, "err", err)
				stopErrs[i] = err
			}
			p.mu.Lock()
			p.emitLocked(Event{VM: v.spec.ID, Kind: EventStopped, Err: err})
			p.mu.Unlock()
		})
	}
	swg.Wait()
	errs = append(errs, stopErrs...)
	if err := p.backend.Close(ctx); err != nil {
		errs = append(errs, fmt.Errorf("vmpool: close %s backend: %w", p.backend.Name(), err))
	}

	unlockErrs := p.locks.close()
	for _, v := range p.vms { // in the pool's order
		if err := unlockErrs[v.spec.Key]; err != nil {
			errs = append(errs, &VMError{VM: v.spec.ID, Op: "unlock", Err: err})
		}
	}
	p.mu.Lock()
	st := p.statsLocked()
	p.mu.Unlock()
	if p.ownClient != nil {
		p.ownClient.CloseIdleConnections()
	}
	p.log.Debug("vmpool: pool closed", "leases", st.Leases, "resets", st.Resets, "failures", st.Failures,
		"quarantined", st.Quarantined, "utilisation", fmt.Sprintf("%.3f", st.Utilisation))
	return errors.Join(errs...)
}

// Stats returns the pool's counters now.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.statsLocked()
}

func (p *Pool) statsLocked() Stats {
	s := p.st
	s.VMs = len(p.vms)
	s.Waiting = len(p.waiters)
	now := time.Now()
	for _, v := range p.vms {
		switch v.state {
		case StateReady:
			s.Ready++
		case StateLeased:
			s.Leased++
			if v.lease != nil {
				s.Busy += now.Sub(v.lease.at)
			}
		case StateStarting:
			s.Starting++
		case StateResetting:
			s.Resetting++
		case StateChecking:
			s.Checking++
		case StateQuarantined:
			s.Quarantined++
			s.QuarantinedVMs = append(s.QuarantinedVMs, *v.quarantine)
		case StateLockedElsewhere:
			s.LockedElsewhere++
		}
	}
	s.Failures = s.UnhealthyReleases + s.StartFailures + s.ResetFailures + s.HealthFailures
	s.Wall = now.Sub(p.created)
	if s.Wall > 0 && s.VMs > 0 {
		s.Utilisation = min(1, float64(s.Busy)/(float64(s.VMs)*float64(s.Wall)))
	}
	sort.Slice(s.QuarantinedVMs, func(i, j int) bool { return s.QuarantinedVMs[i].At.Before(s.QuarantinedVMs[j].At) })
	return s
}

// Quarantined lists the quarantined VMs, oldest first.
func (p *Pool) Quarantined() []Quarantine { return p.Stats().QuarantinedVMs }

// VMs describes every VM of the pool now.
func (p *Pool) VMs() []VMStatus {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]VMStatus, 0, len(p.vms))
	for _, v := range p.vms {
		s := VMStatus{Spec: v.spec, State: v.state, GuestURL: v.ep.GuestURL, Failures: v.failures,
			Leases: v.leases, Resets: v.resets, Quarantine: v.quarantine}
		if v.lastErr != nil {
			s.LastError = v.lastErr.Error()
		}
		if v.quarantine != nil {
			q := *v.quarantine
			s.Quarantine = &q
		}
		out = append(out, s)
	}
	return out
}

// Usable lists the ids of the VMs in rotation — ready, leased, starting,
// resetting or being checked — in pool order; quarantined VMs and VMs
// another process holds are left out.
func (p *Pool) Usable() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]string, 0, len(p.vms))
	for _, v := range p.vms {
		if v.state != StateQuarantined && v.state != StateLockedElsewhere {
			out = append(out, v.spec.ID)
		}
	}
	return out
}

// Size is the number of VMs in the pool, quarantined ones included.
func (p *Pool) Size() int { return len(p.vms) }

// ID is the pool's id (Config.ID).
func (p *Pool) ID() string { return p.cfg.ID }

// Config is the pool's configuration with defaults filled in.
func (p *Pool) Config() Config { return p.cfg }
