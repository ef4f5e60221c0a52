package judge

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Metrics are the judge's Prometheus metrics.
type Metrics struct {
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	malformed   *prometheus.CounterVec
	cacheHits   prometheus.Counter
	inflight    *prometheus.GaugeVec
	votes       prometheus.Histogram
	judged      *prometheus.CounterVec
	seconds     prometheus.Histogram
}

// NewMetrics creates the judge's metrics and registers them on reg (nil:
// not registered; already registered: the registered ones are used).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codapipe_judge_calls_total", Help: "Judge model calls (each after its retries), by endpoint and result (answered, failed).",
		}, []string{"endpoint", "result"}),
		callSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "codapipe_judge_call_seconds", Help: "Duration of one judge model call, retries included, by endpoint.",
			Buckets: prometheus.ExponentialBuckets(0.05, 2, 14),
		}, []string{"endpoint"}),
		malformed: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codapipe_judge_malformed_total", Help: "Judge answers without a usable result dict, by endpoint.",
		}, []string{"endpoint"}),
		cacheHits: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "codapipe_judge_cache_hits_total", Help: "Judge calls answered from the vote cache instead of the model (redeliveries).",
		}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "codapipe_judge_inflight_calls", Help: "Judge model calls in flight, by endpoint.",
		}, []string{"endpoint"}),
		votes: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "codapipe_judge_votes_per_trajectory", Help: "Votes cast per judged trajectory (early exit makes it fewer than --votes).",
			Buckets: prometheus.LinearBuckets(0, 1, 9),
		}),
		judged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "codapipe_judge_trajectories_total", Help: "Trajectories judged, by decision (clean_success, success_redundant, failure, undecided, not_judged).",
		}, []string{"decision"}),
		seconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "codapipe_judge_trajectory_seconds", Help: "Time to judge one trajectory (images, votes), without publishing.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 16),
		}),
	}
	m.calls = service.Register(reg, m.calls)
	m.callSeconds = service.Register(reg, m.callSeconds)
	m.malformed = service.Register(reg, m.malformed)
	m.cacheHits = service.Register(reg, m.cacheHits)
	m.inflight = service.Register(reg, m.inflight)
	m.votes = service.Register(reg, m.votes)
	m.judged = service.Register(reg, m.judged)
	m.seconds = service.Register(reg, m.seconds)
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
