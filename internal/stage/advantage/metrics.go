package advantage

import (
	"time"

	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the advantage service's Prometheus metrics.
type Metrics struct {
	trajectories  *prometheus.CounterVec
	rows          prometheus.Counter
	groups        *prometheus.CounterVec
	commits       prometheus.Counter
	shards        prometheus.Counter
	shardBytes    prometheus.Counter
	commitSeconds prometheus.Histogram
}

// NewMetrics creates the advantage service's metrics and registers them on
// reg (nil: not registered; already registered: the registered ones are
// used).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metrics.On(reg)
	m := &Metrics{
		trajectories:  f.CounterVec("codapipe_advantage_trajectories_total", "Judged trajectories taken in, by result (committed: their rows are in a committed shard; skipped: committed before; outside_selection: not of the set's runs, checkpoints or time, acknowledged unwritten; other_judge_version: judged by another judge version than the set's, acknowledged unwritten; dead_lettered).", "result"),
		rows:          f.Counter("codapipe_advantage_rows_total", "Rows in committed shards."),
		groups:        f.CounterVec("codapipe_advantage_groups_total", "Groups committed, by result (kept, zero_variance: kept with advantages 0, dropped).", "result"),
		commits:       f.Counter("codapipe_advantage_commits_total", "Group commits (a shard, when it has rows, and its commit record)."),
		shards:        f.Counter("codapipe_advantage_shards_total", "Shard files committed."),
		shardBytes:    f.Counter("codapipe_advantage_shard_bytes_total", "Bytes of the shard files committed."),
		commitSeconds: f.Histogram("codapipe_advantage_commit_seconds", "Duration of one commit: the shard finished and stored, then its record.", prometheus.ExponentialBuckets(0.005, 2, 16)),
	}
	for _, r := range []string{"committed", "skipped", "outside_selection", "other_judge_version", "dead_lettered"} {
		m.trajectories.WithLabelValues(r)
	}
	for _, r := range []string{"kept", "zero_variance", "dropped"} {
		m.groups.WithLabelValues(r)
	}
	return m
}

// committed records one commit that took d.
func (m *Metrics) committed(c Commit, d time.Duration) {
	if m == nil {
		return
	}
	m.commits.Inc()
	m.commitSeconds.Observe(d.Seconds())
	m.trajectories.WithLabelValues("committed").Add(float64(c.Counts.Trajectories))
	m.rows.Add(float64(c.Counts.Rows))
	m.groups.WithLabelValues("kept").Add(float64(c.Counts.KeptGroups))
	m.groups.WithLabelValues("zero_variance").Add(float64(c.Counts.ZeroVariance))
	m.groups.WithLabelValues("dropped").Add(float64(c.Counts.Dropped))
	if c.File != nil {
		m.shards.Inc()
		m.shardBytes.Add(float64(c.File.Bytes))
	}
}

// trajectory counts one trajectory that was skipped or dead-lettered.
func (m *Metrics) trajectory(result string) {
	if m != nil {
		m.trajectories.WithLabelValues(result).Inc()
	}
}
