package sched

import (
	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the scheduler's Prometheus metrics.
type Metrics struct {
	episodes        *prometheus.CounterVec
	retries         prometheus.Counter
	leaseFailures   prometheus.Counter
	locksLost       prometheus.Counter
	publishFailures prometheus.Counter
	running         prometheus.Gauge
	pending         prometheus.Gauge
	attemptSeconds  prometheus.Histogram
}

// NewMetrics creates the scheduler's metrics and registers them on reg
// (nil: not registered; already registered: the registered ones are used).
// Every label value is created at zero.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metrics.On(reg)
	m := &Metrics{
		episodes:        f.CounterVec("codapipe_rollout_episodes_total", "Episodes ended, by outcome (finished, answered, failed, step_limit, env_error; none: no trajectory).", "outcome"),
		retries:         f.Counter("codapipe_rollout_env_retries_total", "Episodes run again after an environment error."),
		leaseFailures:   f.Counter("codapipe_rollout_lease_failures_total", "Episodes that got no VM (every VM quarantined, or the pool closed)."),
		locksLost:       f.Counter("codapipe_rollout_vm_lock_losses_total", "Episode attempts abandoned because the VM's lock was lost during them (--vm-locks nats); their trajectories are discarded."),
		publishFailures: f.Counter("codapipe_rollout_publish_failures_total", "Episodes whose trajectory could not be published."),
		running:         f.Gauge("codapipe_rollout_episodes_running", "Episodes running on a VM now."),
		pending:         f.Gauge("codapipe_rollout_episodes_pending", "Episodes waiting for a worker (retries included)."),
		attemptSeconds:  f.Histogram("codapipe_rollout_attempt_seconds", "VM time of one attempt of an episode.", prometheus.ExponentialBuckets(1, 2, 14)),
	}
	for _, k := range traj.OutcomeKinds {
		m.episodes.WithLabelValues(string(k))
	}
	m.episodes.WithLabelValues("none")
	return m
}

// ended counts a job's final result.
func (m *Metrics) ended(r Result) {
	switch {
	case r.Trajectory != nil:
		m.episodes.WithLabelValues(string(r.Trajectory.Outcome.Kind)).Inc()
	case r.Err != nil:
		m.episodes.WithLabelValues("none").Inc()
	}
}
