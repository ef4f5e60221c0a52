package judge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Metrics are the judge's Prometheus metrics.
type Metrics struct {
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	malformed   *prometheus.CounterVec
	truncatedN  *prometheus.CounterVec
	cacheHits   prometheus.Counter
	inflight    *prometheus.GaugeVec
	votes       prometheus.Histogram
	judged      *prometheus.CounterVec
	seconds     prometheus.Histogram
}

// NewMetrics creates the judge's metrics and registers them on reg (nil:
// not registered; already registered: the registered ones are used).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metrics.On(reg)
	m := &Metrics{
		calls:       f.CounterVec("codapipe_judge_calls_total", "Judge model calls (each after its retries), by endpoint and result (answered, failed).", "endpoint", "result"),
		callSeconds: f.HistogramVec("codapipe_judge_call_seconds", "Duration of one judge model call, retries included, by endpoint.", prometheus.ExponentialBuckets(0.05, 2, 14), "endpoint"),
		malformed:   f.CounterVec("codapipe_judge_malformed_total", "Judge answers from which no verdict could be read (the prompt set's answer format), by endpoint.", "endpoint"),
		truncatedN:  f.CounterVec("codapipe_judge_truncated_total", "Judge answers cut at max_tokens (finish_reason length), by endpoint: asked again once with --truncated-max-tokens, then unusable.", "endpoint"),
		cacheHits:   f.Counter("codapipe_judge_cache_hits_total", "Judge calls answered from the vote cache instead of the model (redeliveries)."),
		inflight:    f.GaugeVec("codapipe_judge_inflight_calls", "Judge model calls in flight, by endpoint.", "endpoint"),
		votes:       f.Histogram("codapipe_judge_votes_per_trajectory", "Votes cast per judged trajectory (early exit makes it fewer than the policy's votes).", prometheus.LinearBuckets(0, 1, 9)),
		judged:      f.CounterVec("codapipe_judge_trajectories_total", "Trajectories judged, by decision (clean_success, success_redundant, failure, undecided, not_judged).", "decision"),
		seconds:     f.Histogram("codapipe_judge_trajectory_seconds", "Time to judge one trajectory (images, votes), without publishing.", prometheus.ExponentialBuckets(0.01, 2, 16)),
	}
	for _, d := range traj.Decisions {
		m.judged.WithLabelValues(string(d))
	}
	return m
}

func (m *Metrics) endpoint(url string) {
	if m == nil {
		return
	}
	m.callSeconds.WithLabelValues(url)
	m.malformed.WithLabelValues(url)
	m.truncatedN.WithLabelValues(url)
	m.inflight.WithLabelValues(url)
	for _, r := range []string{"answered", "failed"} {
		m.calls.WithLabelValues(url, r)
	}
}

func (m *Metrics) call(url string, d time.Duration, err error) {
	if m == nil {
		return
	}
	r := "answered"
	if err != nil {
		r = "failed"
	}
	m.calls.WithLabelValues(url, r).Inc()
	m.callSeconds.WithLabelValues(url).Observe(d.Seconds())
}

func (m *Metrics) flight(url string, delta float64) {
	if m != nil {
		m.inflight.WithLabelValues(url).Add(delta)
	}
}

func (m *Metrics) badAnswer(url string) {
	if m != nil {
		m.malformed.WithLabelValues(url).Inc()
	}
}

func (m *Metrics) truncated(url string) {
	if m != nil {
		m.truncatedN.WithLabelValues(url).Inc()
	}
}

func (m *Metrics) hit() {
	if m != nil {
		m.cacheHits.Inc()
	}
}

func (m *Metrics) done(j *traj.Judgement, d time.Duration) {
	if m == nil {
		return
	}
	m.judged.WithLabelValues(string(j.Decision)).Inc()
	if j.Decision != traj.NotJudged {
		m.votes.Observe(float64(len(j.Votes)))
		m.seconds.Observe(d.Seconds())
	}
}
