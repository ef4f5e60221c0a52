package agent

import (
	"time"

	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the agent's Prometheus metrics.
type Metrics struct {
	steps       prometheus.Counter
	stepSeconds prometheus.Histogram
	calls       *prometheus.CounterVec
	callSeconds *prometheus.HistogramVec
	candidates  *prometheus.CounterVec
	// sampled counts the steps with at least two plans, identical those
	// of them whose plans are all the same text.
	sampled, identical prometheus.Counter
}

// NewMetrics creates the agent's metrics and registers them on reg (nil:
// not registered; already registered: the registered ones are used). Every
// label value is created at zero, so each series is there from the start.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	f := metrics.On(reg)
	m := &Metrics{
		steps:       f.Counter("codapipe_agent_steps_total", "Agent steps (observe, plan, ground, execute) recorded."),
		stepSeconds: f.Histogram("codapipe_agent_step_seconds", "Duration of one agent step.", prometheus.ExponentialBuckets(0.05, 2, 14)),
		calls:       f.CounterVec("codapipe_agent_model_calls_total", "Model calls (each after its retries), by model (planner, executor) and result (ok, error).", "model", "result"),
		callSeconds: f.HistogramVec("codapipe_agent_model_seconds", "Duration of one model call, retries included, by model.", prometheus.ExponentialBuckets(0.01, 2, 16), "model"),
		candidates:  f.CounterVec("codapipe_agent_candidates_total", "Candidates by parse result: action, answer (not grounded), syntax, out_of_range.", "result"),
		sampled:     f.Counter("codapipe_agent_sampled_steps_total", "Steps whose planner sampled at least two plans (G >= 1)."),
		identical: f.Counter("codapipe_agent_steps_identical_plans_total",
			"Steps whose G+1 plans were all textually identical (a group without variance; a high share means greedy sampling: top_k 1, temperature 0 or the server's generation defaults)."),
	}
	for _, model := range []string{"planner", "executor"} {
		m.callSeconds.WithLabelValues(model)
		for _, r := range []string{"ok", "error"} {
			m.calls.WithLabelValues(model, r)
		}
	}
	for _, r := range []string{"action", "answer", string(traj.ParseSyntax), string(traj.ParseOutOfRange)} {
		m.candidates.WithLabelValues(r)
	}
	return m
}

func (m *Metrics) call(model string, d time.Duration, err error) {
	r := "ok"
	if err != nil {
		r = "error"
	}
	m.calls.WithLabelValues(model, r).Inc()
	m.callSeconds.WithLabelValues(model).Observe(d.Seconds())
}

func (m *Metrics) step(s *traj.Step, d time.Duration) {
	m.steps.Inc()
	m.stepSeconds.Observe(d.Seconds())
	if len(s.Candidates) >= 2 {
		m.sampled.Inc()
		if IdenticalPlans(s) {
			m.identical.Inc()
		}
	}
	for _, c := range s.Candidates {
		switch {
		case c.ParseErrorKind != "":
			m.candidates.WithLabelValues(string(c.ParseErrorKind)).Inc()
		case c.Action != nil && c.Action.Type == traj.Answer && c.ExecutorOutput == "":
			m.candidates.WithLabelValues("answer").Inc()
		default:
			m.candidates.WithLabelValues("action").Inc()
		}
	}
}

// IdenticalPlans reports whether a step's plans (two or more) are all the
// same text: a step whose group cannot have any variance.
func IdenticalPlans(s *traj.Step) bool {
	if len(s.Candidates) < 2 {
		return false
	}
	for _, c := range s.Candidates[1:] {
		if c.Plan != s.Candidates[0].Plan {
			return false
		}
	}
	return true
}
