package bus

import (
	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the bus's Prometheus metrics.
type Metrics struct {
	published     *prometheus.CounterVec
	publishedB    *prometheus.CounterVec
	duplicates    *prometheus.CounterVec
	claimed       *prometheus.CounterVec
	publishErrors prometheus.Counter
	retries       *prometheus.CounterVec
	handled       *prometheus.CounterVec
	dead          *prometheus.CounterVec
	handleSeconds *prometheus.HistogramVec
	missing       *prometheus.GaugeVec
}

// NewMetrics creates the bus metrics and registers them on reg (nil: not
// registered, for tests and tools that do not serve metrics).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metrics.On(reg)
	m := &Metrics{
		published:     f.CounterVec("codapipe_bus_published_total", "Messages stored by JetStream (duplicates excluded).", "stream"),
		publishedB:    f.CounterVec("codapipe_bus_published_bytes_total", "Body bytes published (before claim checks).", "stream"),
		duplicates:    f.CounterVec("codapipe_bus_duplicates_total", "Publishes that JetStream de-duplicated by message id.", "stream"),
		claimed:       f.CounterVec("codapipe_bus_claim_checks_total", "Publishes whose body went to the claim store.", "stream"),
		publishErrors: f.Counter("codapipe_bus_publish_errors_total", "Publishes that failed (after their retries)."),
		retries:       f.CounterVec("codapipe_bus_retries_total", "Requests repeated after a transient error (leader election, timeout, reconnect), by operation: publish, dead_letter, ack, ensure (creating streams, buckets and consumers).", "op"),
		handled:       f.CounterVec("codapipe_bus_handled_total", "Messages handled, by consumer and result (ack, retry, reject).", "consumer", "result"),
		dead:          f.CounterVec("codapipe_bus_dead_letters_total", "Messages moved to the dead-letter subject.", "consumer"),
		missing:       f.GaugeVec("codapipe_bus_stream_missing_messages", "Sequences of a stream that it no longer holds (store damage or removed by hand) and that the consumer never handled, as it found them last.", "stream", "consumer"),
		handleSeconds: f.HistogramVec("codapipe_bus_handle_seconds", "Handler duration.", prometheus.ExponentialBuckets(0.001, 4, 10), "consumer"),
	}
	for _, op := range []string{"publish", "dead_letter", "ack", "ensure"} {
		m.retries.WithLabelValues(op)
	}
	// Every stream's series exist from the start, at zero.
	for _, k := range Kinds {
		for _, v := range []*prometheus.CounterVec{m.published, m.publishedB, m.duplicates, m.claimed} {
			v.WithLabelValues(StreamName(k))
		}
	}
	return m
}

// consumer creates a consumer's series at zero, so they exist before its
// first message.
func (m *Metrics) consumer(durable string) {
	for _, r := range []string{"ack", "retry", "reject"} {
		m.handled.WithLabelValues(durable, r)
	}
	m.dead.WithLabelValues(durable)
	m.handleSeconds.WithLabelValues(durable)
}

func (m *Metrics) observePublish(stream string, n int, dup, claimed bool) {
	if dup {
		m.duplicates.WithLabelValues(stream).Inc()
		return
	}
	m.published.WithLabelValues(stream).Inc()
	m.publishedB.WithLabelValues(stream).Add(float64(n))
	if claimed {
		m.claimed.WithLabelValues(stream).Inc()
	}
}
