package model

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrOutage is wrapped by the error of a run stopped because a model
// endpoint stayed unavailable for longer than the outage budget
// (*OutageError).
var ErrOutage = errors.New("a model endpoint stayed unavailable beyond the outage budget")

// OutageError is the error of such a run: the endpoint, when it stopped
// answering, for how long, and the error its last call gave.
type OutageError struct {
	Endpoint string
	Since    time.Time
	Down     time.Duration
	Budget   time.Duration
	Cause    error
}

func (e *OutageError) Error() string {
	return fmt.Sprintf("model endpoint %s unavailable for %s (outage budget %s): %v", e.Endpoint, e.Down.Round(time.Second), e.Budget, e.Cause)
}

// Unwrap returns ErrOutage.
func (e *OutageError) Unwrap() error { return ErrOutage }

// DefaultOutageBudget is how long a run waits for an unavailable endpoint
// before it stops (OutageConfig.Budget).
const DefaultOutageBudget = 30 * time.Minute

// OutageConfig configures Outages.
type OutageConfig struct {
	// Probes tell, for each endpoint (by the name its calls' errors give,
	// UnavailableError.Endpoint, which is Client.Endpoint), whether it
	// answers now (Client.Ping). A failure of an endpoint without a probe
	// is never an outage.
	Probes map[string]func(context.Context) error
	// Budget is how long one outage may last before the run stops
	// (default DefaultOutageBudget).
	Budget time.Duration
	// ProbeEvery is the first wait between probes of an endpoint that is
	// down; it doubles up to MaxProbeEvery (default 1 s and 30 s).
	ProbeEvery, MaxProbeEvery time.Duration
	Log                       *slog.Logger
	// Registerer takes the breaker's metrics (nil: unregistered).
	Registerer prometheus.Registerer
}

// Outages is the circuit breaker of a process's model endpoints (rollout:
// the planner and the executor; judge: its judge endpoints). A call that
// failed as an endpoint failure (ErrUnavailable) is reported; when the
// endpoint's probe fails too, the endpoint is down for every worker: the
// breaker opens, the work that hit it is done again later (it is not an
// outcome of its own: no environment error, no unusable vote), and
// workers wait (Wait) instead of starting work that would fail the same
// way. The breaker probes the
// endpoint with backoff and closes when it answers; an outage longer than
// the budget ends the wait with an *OutageError, and the run stops with
// its episodes unpublished, so running the same run again does them.
type Outages struct {
	cfg OutageConfig
	log *slog.Logger

	ctx    context.Context // ends the probes (Close)
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu      sync.Mutex
	down    map[string]*outage
	err     error         // an outage outlasted the budget
	changed chan struct{} // closed (and replaced) when down or err change
	nOut    int           // outages so far
	nQueued int           // episodes they interrupted

	open     *prometheus.GaugeVec
	total    *prometheus.CounterVec
	requeues *prometheus.CounterVec
}

// outage is one endpoint that is down.
type outage struct {
	since time.Time
	cause error
}

// NewOutages returns a breaker for cfg's endpoints; Close stops its
// probes.
func NewOutages(cfg OutageConfig) *Outages {
	if cfg.Budget <= 0 {
		cfg.Budget = DefaultOutageBudget
	}
	if cfg.ProbeEvery <= 0 {
		cfg.ProbeEvery = time.Second
	}
	if cfg.MaxProbeEvery < cfg.ProbeEvery {
		cfg.MaxProbeEvery = max(30*time.Second, cfg.ProbeEvery)
	}
	log := cfg.Log
	if log == nil {
		log = slog.Default()
	}
	f := metrics.On(cfg.Registerer)
	o := &Outages{cfg: cfg, log: log, down: map[string]*outage{}, changed: make(chan struct{}),
		open:     f.GaugeVec("codapipe_endpoint_outage", "1 while a model endpoint is down for every VM (the breaker is open and the run waits), else 0.", "endpoint"),
		total:    f.CounterVec("codapipe_endpoint_outages_total", "Outages of a model endpoint: its calls failed and its probe failed too.", "endpoint"),
		requeues: f.CounterVec("codapipe_endpoint_outage_requeues_total", "Episodes that an endpoint outage interrupted and that run again once it answers (not environment errors).", "endpoint"),
	}
	for ep := range cfg.Probes {
		o.open.WithLabelValues(ep).Set(0)
		o.total.WithLabelValues(ep)
		o.requeues.WithLabelValues(ep)
	}
	o.ctx, o.cancel = context.WithCancel(context.Background())
	return o
}

// Close stops the probes and waits for them.
func (o *Outages) Close() {
	if o == nil {
		return
	}
	o.cancel()
	o.wg.Wait()
}

// signal wakes the waiters; o.mu is held.
func (o *Outages) signal() {
	close(o.changed)
	o.changed = make(chan struct{})
}

// Down reports err to the breaker when it is a call's failure to reach
// an endpoint (an *UnavailableError in its chain, Report) and returns the
// endpoint and whether it is down; any other error is not an outage.
func (o *Outages) Down(ctx context.Context, err error) (string, bool) {
	var ue *UnavailableError
	if o == nil || !errors.As(err, &ue) {
		return "", false
	}
	return ue.Endpoint, o.Report(ctx, ue.Endpoint, err)
}

// Report tells the breaker that a call to endpoint failed with cause (an
// error wrapping ErrUnavailable) and returns true when the endpoint
// is down: already known to be, or its probe fails now. The episode that
// made the call then runs again once the endpoint answers; false (the
// endpoint answers, the failure was the request's own, or it has no
// probe) leaves it an environment error.
func (o *Outages) Report(ctx context.Context, endpoint string, cause error) bool {
	if o == nil {
		return false
	}
	probe, ok := o.cfg.Probes[endpoint]
	if !ok {
		return false
	}
	o.mu.Lock()
	_, isDown := o.down[endpoint]
	stopping := o.err != nil
	o.mu.Unlock()
	if isDown || stopping {
		o.requeued(endpoint)
		return true
	}
	if err := probe(ctx); err == nil || ctx.Err() != nil {
		return false
	}
	o.requeued(endpoint)
	o.mu.Lock()
	defer o.mu.Unlock()
	if _, isDown := o.down[endpoint]; isDown || o.err != nil {
		return true // another worker saw it first
	}
	o.nOut++
	out := &outage{since: time.Now(), cause: cause}
	o.down[endpoint] = out
	o.signal()
	o.open.WithLabelValues(endpoint).Set(1)
	o.total.WithLabelValues(endpoint).Inc()
	o.log.Warn("model endpoint unavailable for every VM: the run pauses and resumes when it answers; the episodes it interrupted run again",
		"endpoint", endpoint, "err", cause, "outage_budget", o.cfg.Budget)
	o.wg.Add(1)
	go o.watch(endpoint, probe, out) // owned by o: Close waits for it
	return true
}

// requeued counts an episode an outage of endpoint interrupted.
func (o *Outages) requeued(endpoint string) {
	o.requeues.WithLabelValues(endpoint).Inc()
	o.mu.Lock()
	o.nQueued++
	o.mu.Unlock()
}

// Stats returns how many outages there were so far and how many episodes
// they interrupted (to run again).
func (o *Outages) Stats() (outages, interrupted int) {
	if o == nil {
		return 0, 0
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.nOut, o.nQueued
}

// watch probes a down endpoint with backoff until it answers (the
// breaker closes) or the outage outlasts the budget (the breaker fails).
func (o *Outages) watch(endpoint string, probe func(context.Context) error, out *outage) {
	defer o.wg.Done()
	wait := o.cfg.ProbeEvery
	for {
		left := o.cfg.Budget - time.Since(out.since)
		timer := time.NewTimer(max(min(wait, left), 0))
		select {
		case <-o.ctx.Done():
			timer.Stop()
			return
		case <-timer.C:
		}
		err := probe(o.ctx)
		if o.ctx.Err() != nil {
			return
		}
		o.mu.Lock()
		switch down := time.Since(out.since); {
		case err == nil:
			delete(o.down, endpoint)
			o.signal()
			o.mu.Unlock()
			o.open.WithLabelValues(endpoint).Set(0)
			o.log.Info("model endpoint answers again: the run resumes", "endpoint", endpoint, "down_for", down.Round(time.Millisecond))
			return
		case down >= o.cfg.Budget:
			o.err = &OutageError{Endpoint: endpoint, Since: out.since, Down: down, Budget: o.cfg.Budget, Cause: out.cause}
			o.signal()
			o.mu.Unlock()
			o.log.Error("model endpoint still unavailable after the outage budget: the run stops; its unpublished episodes run when the same run is started again",
				"endpoint", endpoint, "down_for", down.Round(time.Second), "err", err)
			return
		}
		o.mu.Unlock()
		wait = min(2*wait, o.cfg.MaxProbeEvery)
	}
}

// Wait returns at once while every endpoint answers; while one is down it
// waits until none is, and returns nil, or the *OutageError of an outage
// that outlasted the budget, or ctx's error.
func (o *Outages) Wait(ctx context.Context) error {
	if o == nil {
		return nil
	}
	for {
		o.mu.Lock()
		err, n, ch := o.err, len(o.down), o.changed
		o.mu.Unlock()
		switch {
		case err != nil:
			return err
		case n == 0:
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}
