// Package metrics makes the Prometheus metrics of codapipe's packages: a
// Factory creates each metric and registers it in one call, reusing an
// equal collector already registered (a second run in one process goes on
// counting where the first stopped).
package metrics

import (
	"errors"
	"os"
	"strconv"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// Register registers c on reg and returns it; when reg already holds an
// equal collector, it returns that one. A nil reg registers nothing. Any
// other registration error is a programming error and panics, as
// prometheus.MustRegister does.
func Register[T prometheus.Collector](reg prometheus.Registerer, c T) T {
	if reg == nil {
		return c
	}
	if err := reg.Register(c); err != nil {
		var are prometheus.AlreadyRegisteredError
		if errors.As(err, &are) {
			if existing, ok := are.ExistingCollector.(T); ok {
				return existing
			}
		}
		panic(err)
	}
	return c
}

// Factory creates metrics registered on one registry (nil: unregistered,
// for tests and tools that serve no metrics).
type Factory struct{ reg prometheus.Registerer }

// On returns a Factory registering on reg.
func On(reg prometheus.Registerer) Factory { return Factory{reg: reg} }

// Counter returns a registered counter.
func (f Factory) Counter(name, help string) prometheus.Counter {
	return Register(f.reg, prometheus.NewCounter(prometheus.CounterOpts{Name: name, Help: help}))
}

// CounterVec returns a registered counter with labels.
func (f Factory) CounterVec(name, help string, labels ...string) *prometheus.CounterVec {
	return Register(f.reg, prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels))
}

// Gauge returns a registered gauge.
func (f Factory) Gauge(name, help string) prometheus.Gauge {
	return Register(f.reg, prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: help}))
}

// GaugeVec returns a registered gauge with labels.
func (f Factory) GaugeVec(name, help string, labels ...string) *prometheus.GaugeVec {
	return Register(f.reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, labels))
}

// Histogram returns a registered histogram with the given buckets.
func (f Factory) Histogram(name, help string, buckets []float64) prometheus.Histogram {
	return Register(f.reg, prometheus.NewHistogram(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}))
}

// HistogramVec returns a registered histogram with labels.
func (f Factory) HistogramVec(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
	return Register(f.reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels))
}

// PeakRSS returns the process's peak resident set size in bytes (VmHWM of
// /proc/self/status), or -1 where that is not available.
func PeakRSS() int64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return -1
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return -1
			}
			return kb << 10
		}
	}
	return -1
}
