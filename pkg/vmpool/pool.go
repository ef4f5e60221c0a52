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
	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/lockfile"
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
func WithEvents(fn func(Event)) Option { return func(o *options) { o.onEvent = fn } }

// Pool leases the VMs of one backend to rollout workers. It is safe for
// concurrent use. A VM is leased to one caller at a time, and — through a
// lock file per VM — to one process on the host at a time.
//
// Life of a VM: locked → starting → ready ⇄ leased → resetting → ready ...
// Ending a lease starts the VM's reset at once in the background (reset-ahead),
// so the next Lease finds a clean VM without waiting for a revert. A VM
// that fails QuarantineAfter times in a row (unhealthy releases, failed
// starts, resets or health checks), or whose start, reset or health check
// runs out of time, is quarantined: out of rotation for the rest of the
// pool's life, reported by Stats, Quarantined and a log line.
type Pool struct {
	cfg       Config
	backend   Backend
	log       *slog.Logger
	onEvent   func(Event)
	guestOpts guest.Options
	ownClient *http.Client // the guests' HTTP client when the pool made it: ours to close, or nil

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
	closeOnce   sync.Once
	closeErr    error
}

// vm is the pool's record of one VM; guarded by Pool.mu except where noted.
type vm struct {
	spec       VMSpec
	lock       *lockfile.Lock
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
		cfg:       cfg,
		backend:   backend,
		log:       log,
		onEvent:   o.onEvent,
		guestOpts: o.guestOpts,
		created:   time.Now(),
	}
	if p.guestOpts.HTTPClient == nil {
		p.ownClient = guest.NewHTTPClient()
		p.guestOpts.HTTPClient = p.ownClient
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for i := range specs {
		if specs[i].Key == "" {
			specs[i].Key = backend.Name() + ":" + specs[i].ID
		}
		p.vms = append(p.vms, &vm{spec: specs[i], state: StateLockedElsewhere})
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
	if lockErr == nil && elsewhere > 0 {
		p.goLocked(p.lockLoop)
	}
	if lockErr == nil && cfg.IdleCheck > 0 {
		p.goLocked(p.checkLoop)
	}
	p.mu.Unlock()
	if lockErr != nil {
		_ = p.Close(ctx)
		return nil, lockErr
	}
	log.Info("vmpool: pool created", "vms", len(p.vms), "locked_elsewhere", elsewhere, "lock_dir", cfg.LockDir)
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

// tryLockLocked tries to take v's lock file; on success v starts.
func (p *Pool) tryLockLocked(v *vm) (bool, error) {
	l, holder, err := lockfile.TryLock(p.cfg.LockDir, v.spec.Key, "pool="+p.cfg.ID+" vm="+v.spec.ID)
	if err != nil {
		return false, &VMError{VM: v.spec.ID, Op: "lock", Err: err}
	}
	if l == nil {
		if v.lastErr == nil { // log once per VM, not every retry
			v.lastErr = fmt.Errorf("locked by another process (%s)", holder)
			p.log.Warn("vmpool: VM is in use by another process; will retry", "vm", v.spec.ID, "key", v.spec.Key,
				"holder", holder, "retry", p.cfg.LockRetry)
			p.emitLocked(Event{VM: v.spec.ID, Kind: EventLockHeld, Err: v.lastErr})
		}
		return false, nil
	}
	v.lock = l
	v.lastErr = nil
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventLocked})
	v.state = StateStarting
	p.emitLocked(Event{VM: v.spec.ID, Kind: EventStarting})
	p.goLocked(func() { p.bringUp(v, "start") })
	return true, nil
}

// goLocked runs f in a goroutine the pool owns. Called with p.mu held and
// p.closed false, so it never races with Close's Wait.
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

// lockLoop retries the locks of VMs that other processes hold.
func (p *Pool) lockLoop() {
	t := time.NewTicker(p.cfg.LockRetry)
	defer t.Stop()
	for p.tickLocked(t) {
		left := 0
		for _, v := range p.vms {
			if v.state != StateLockedElsewhere {
				continue
			}
			locked, err := p.tryLockLocked(v)
			if err != nil {
				p.log.Warn("vmpool: lock failed", "vm", v.spec.ID, "err", err)
			}
			if !locked {
				left++
			}
		}
		p.mu.Unlock()
		if left == 0 {
			return
		}
	}
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
	g := v.guest
	p.mu.Unlock()
	ctx, cancel := context.WithTimeout(p.ctx, p.cfg.Timeouts.Health)
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
		p.mu.Unlock()
		t := time.NewTimer(p.cfg.RetryWait)
		select {
		case <-p.ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
}

// bringUpOnce is one Backend.Start or Backend.Reset, then one health check.
func (p *Pool) bringUpOnce(v *vm, op string) error {
	timeout := p.cfg.Timeouts.Reset
	p.mu.Lock()
	if op == "start" {
		timeout = p.cfg.Timeouts.Start
		p.st.Starts++
		v.started = true
	} else {
		p.st.Resets++
		v.resets++
	}
	p.mu.Unlock()

	ctx, cancel := context.WithTimeout(p.ctx, timeout)
	var ep Endpoint
	var err error
	if op == "start" {
		ep, err = p.backend.Start(ctx, v.spec)
	} else {
		ep, err = p.backend.Reset(ctx, v.spec)
	}
	timedOut := ctx.Err() == context.DeadlineExceeded
	cancel()
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
	p.mu.Unlock()
	return p.health(v, "health after "+op)
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
	l := &Lease{p: p, v: v, spec: v.spec, guest: v.guest, ep: v.ep, at: time.Now()}
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
		v.state = StateReady // nobody holds it, closed pool or not
		if !p.closed {
			p.dispatchLocked(v)
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
		vm.state = StateReady // nobody holds it, closed pool or not
		if !p.closed {
			p.dispatchLocked(vm)
		}
		return nil
	}
	p.st.Busy += held
	p.st.Releases++
	p.emitLocked(Event{VM: vm.spec.ID, Kind: EventReleased, Healthy: v.fault == nil, Duration: held, Err: v.fault})
	if p.closed {
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
		if v.started {
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

	p.mu.Lock()
	for _, v := range p.vms {
		if v.lock != nil {
			if err := v.lock.Unlock(); err != nil {
				errs = append(errs, &VMError{VM: v.spec.ID, Op: "unlock", Err: err})
			}
			v.lock = nil
		}
	}
	st := p.statsLocked()
	p.mu.Unlock()
	if p.ownClient != nil {
		p.ownClient.CloseIdleConnections()
	}
	p.log.Info("vmpool: pool closed", "leases", st.Leases, "resets", st.Resets, "failures", st.Failures,
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

// Lease is one VM leased to one caller, from Pool.Lease until End. Its
// methods are safe for concurrent use. After End the lease must not be
// used: the VM is being reset and may already serve someone else.
type Lease struct {
	p        *Pool
	v        *vm
	spec     VMSpec
	guest    *guest.Client
	ep       Endpoint
	at       time.Time // guarded by p.mu
	released bool      // guarded by p.mu
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
