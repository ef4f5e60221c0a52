package rollout

import (
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/prometheus/client_golang/prometheus"
)

// The VM pool's metrics, read from vmpool.Stats at each scrape.
var (
	descPoolVMs = prometheus.NewDesc("codapipe_vmpool_vms",
		"VMs of the pool by state (ready, leased, starting, resetting, checking, quarantined, locked-elsewhere).", []string{"state"}, nil)
	descPoolLeases = prometheus.NewDesc("codapipe_vmpool_leases_total",
		"Leases handed out.", nil, nil)
	descPoolLeaseWait = prometheus.NewDesc("codapipe_vmpool_lease_wait_seconds_total",
		"Time Lease callers spent waiting for a VM, summed.", nil, nil)
	descPoolBusy = prometheus.NewDesc("codapipe_vmpool_busy_seconds_total",
		"Time VMs spent leased, summed.", nil, nil)
	descPoolResets = prometheus.NewDesc("codapipe_vmpool_resets_total",
		"VM resets (revert to the snapshot, new container, simulator reset).", nil, nil)
	descPoolFailures = prometheus.NewDesc("codapipe_vmpool_failures_total",
		"VM failures by operation: episode (a lease ended with a fault), start, reset, health.", []string{"op"}, nil)
	descPoolLocksLost = prometheus.NewDesc("codapipe_vmpool_locks_lost_total",
		"VM locks lost while held (--vm-locks nats: renewals failed for a TTL); the pool let those VMs go.", nil, nil)
	descPoolUtilisation = prometheus.NewDesc("codapipe_vmpool_utilisation",
		"Busy time / (VMs × time since the pool was created).", nil, nil)
)

// poolCollector exports a pool's Stats as metrics.
type poolCollector struct{ p *vmpool.Pool }

// Describe sends the descriptors of the pool's metrics.
func (c poolCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descPoolVMs, descPoolLeases, descPoolLeaseWait, descPoolBusy, descPoolResets, descPoolFailures, descPoolLocksLost, descPoolUtilisation} {
		ch <- d
	}
}

// Collect reads the pool's Stats once and sends every metric.
func (c poolCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.p.Stats()
	for state, n := range map[vmpool.State]int{
		vmpool.StateReady: st.Ready, vmpool.StateLeased: st.Leased, vmpool.StateStarting: st.Starting,
		vmpool.StateResetting: st.Resetting, vmpool.StateChecking: st.Checking, vmpool.StateQuarantined: st.Quarantined,
		vmpool.StateLockedElsewhere: st.LockedElsewhere,
	} {
		ch <- prometheus.MustNewConstMetric(descPoolVMs, prometheus.GaugeValue, float64(n), string(state))
	}
	ch <- prometheus.MustNewConstMetric(descPoolLeases, prometheus.CounterValue, float64(st.Leases))
	ch <- prometheus.MustNewConstMetric(descPoolLeaseWait, prometheus.CounterValue, st.LeaseWait.Seconds())
	ch <- prometheus.MustNewConstMetric(descPoolBusy, prometheus.CounterValue, st.Busy.Seconds())
	ch <- prometheus.MustNewConstMetric(descPoolResets, prometheus.CounterValue, float64(st.Resets))
	for op, n := range map[string]int64{"episode": st.UnhealthyReleases, "start": st.StartFailures, "reset": st.ResetFailures, "health": st.HealthFailures} {
		ch <- prometheus.MustNewConstMetric(descPoolFailures, prometheus.CounterValue, float64(n), op)
	}
	ch <- prometheus.MustNewConstMetric(descPoolLocksLost, prometheus.CounterValue, float64(st.LocksLost))
	ch <- prometheus.MustNewConstMetric(descPoolUtilisation, prometheus.GaugeValue, st.Utilisation)
}
