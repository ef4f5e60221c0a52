package rewardserver

import (
	"time"

	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the reward service's Prometheus metrics.
type Metrics struct {
	requests    *prometheus.CounterVec
	plans       *prometheus.CounterVec
	planSeconds prometheus.Histogram
	execSeconds *prometheus.HistogramVec
	inFlight    prometheus.Gauge
	groups      prometheus.Gauge
}

// NewMetrics creates the reward service's metrics and registers them on
// reg (nil: not registered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metrics.On(reg)
	m := &Metrics{
		requests:    f.CounterVec("codapipe_reward_requests_total", "HTTP requests by route and status code.", "route", "code"),
		plans:       f.CounterVec("codapipe_reward_plans_total", "Plans by result (scored; bad_request: bad label or unknown group; executor_error: the executor failed; busy: no grounding slot or the request's deadline passed; error: the server's data or store failed).", "result"),
		planSeconds: f.Histogram("codapipe_reward_plan_seconds", "Time to score one plan: waiting for a slot, loading the step, grounding, scoring.", prometheus.ExponentialBuckets(0.001, 2, 16)),
		execSeconds: f.HistogramVec("codapipe_reward_executor_seconds", "Executor calls by result (ok, error) and their latency.", prometheus.ExponentialBuckets(0.001, 2, 16), "result"),
		inFlight:    f.Gauge("codapipe_reward_plans_in_flight", "Plans being scored."),
		groups:      f.Gauge("codapipe_reward_groups", "Groups of the shard set served."),
	}
	for _, r := range []string{resultScored, resultBadRequest, resultExecutor, resultBusy, resultError} {
		m.plans.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) plan(result string, d time.Duration) {
	m.plans.WithLabelValues(result).Inc()
	m.planSeconds.Observe(d.Seconds())
}

func (m *Metrics) executorCall(d time.Duration, err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	m.execSeconds.WithLabelValues(r).Observe(d.Seconds())
}
