package sched

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// Settings of the workload with task latents (BenchmarkSchedulerHistory;
// docs/performance.md states the marginals).
const (
	// benchTaskFullConc is the concentration a+b of the Beta each task's
	// probability of running to its step limit is drawn from (mean
	// benchFullProb): 1 is U-shaped — most tasks are solved early nearly
	// always, or nearly never.
	benchTaskFullConc = 1.0
	// benchTaskSigma is the sigma of a task's lognormal latency factor
	// (median 1: screen size, output length), benchEpisodeSigma the one
	// of each step's latency around it: sqrt(0.6² + 0.8²) = 1 =
	// benchStepSigma, so the marginal step latency is today's.
	benchTaskSigma    = 0.6
	benchEpisodeSigma = 0.8
	// benchDrift multiplies every step latency of the drifted night (the
	// planner checkpoint changed within its family).
	benchDrift  = 1.2
	benchFamily = "bench-planner-step1200"
)

// benchTaskLatent is what an episode of a task owes to the task itself.
type benchTaskLatent struct {
	full   float64 // probability of running to the step limit
	solve  int     // the step an early end comes at, ±1
	factor float64 // step latency factor
}

// betaJohnk draws Beta(a, b) by Jöhnk's method (good for a, b ≤ 1).
func betaJohnk(r *rand.Rand, a, b float64) float64 {
	for {
		x, y := math.Pow(r.Float64(), 1/a), math.Pow(r.Float64(), 1/b)
		if x+y <= 1 && x+y > 0 {
			return x / (x + y)
		}
	}
}

// newBenchHistoryWork draws one night of the workload with task latents:
// the tasks, their step limits (the mix of newBenchSchedWorkWith) and
// latents come from taskSeed, every episode's noise and VM deaths from
// noiseSeed; drift multiplies every step latency. Two nights with the
// same taskSeed run the same tasks with the same latents.
func newBenchHistoryWork(taskSeed, noiseSeed uint64, drift float64) *benchSchedWork {
	tr := rand.New(rand.NewPCG(taskSeed, 3))
	w := &benchSchedWork{steps: map[benchKey][]time.Duration{}, dies: map[benchKey][]int{}}
	w.tasks = make([]scienceboard.Task, benchSchedTasks)
	latents := make([]benchTaskLatent, benchSchedTasks)
	for i := range w.tasks {
		w.tasks[i] = benchTask(i, tr)
		limit := w.tasks[i].Steps
		latents[i] = benchTaskLatent{
			full:   betaJohnk(tr, benchFullProb*benchTaskFullConc, (1-benchFullProb)*benchTaskFullConc),
			solve:  1 + tr.IntN(limit),
			factor: math.Exp(benchTaskSigma * tr.NormFloat64()),
		}
	}
	nr := rand.New(rand.NewPCG(noiseSeed, 1))
	for i := range w.tasks {
		t, lt := &w.tasks[i], latents[i]
		lat := fault.LogNormal(time.Duration(float64(benchStepMedian)*lt.factor*drift), benchEpisodeSigma, benchStepMax)
		for k := range benchSchedSamples {
			n := t.Steps
			if nr.Float64() >= lt.full {
				n = min(max(lt.solve+nr.IntN(3)-1, 1), t.Steps)
			}
			w.addEpisode(t, k, n, lat, nr)
		}
	}
	w.drawDeaths(noiseSeed)
	return w
}

// length is an episode's drawn VM time (simulated, without the calls).
func (w *benchSchedWork) length(j Job) time.Duration {
	var d time.Duration
	for _, s := range w.steps[benchKey{j.Task.ID, j.Sample}] {
		d += s
	}
	return d
}

// vmBoundRatio is a run's makespan over its VM-time bound (see
// BenchmarkScheduler).
func (r benchSchedRun) vmBoundRatio() float64 {
	wallRevert := time.Duration(float64(benchRevert) * benchSchedScale)
	vmBound := max((r.work+time.Duration(r.attempts-benchSchedVMs)*wallRevert)/benchSchedVMs, r.longest)
	return r.makespan.Seconds() / vmBound.Seconds()
}

// BenchmarkSchedulerHistory runs the scheduler (as BenchmarkScheduler:
// the real Scheduler over a real pool of 32 simulated guests, simulated
// time) on the workload with task latents (newBenchHistoryWork) after a
// previous night of the same tasks, with fresh episode noise, recorded
// into the real length history (CODA_LENGTHS on an embedded NATS server)
// and read back: once without history (step limit order), once with it,
// and once with it on a night whose checkpoint drifted (every latency
// ×benchDrift).
//
// Figures: sched.makespan_vs_vm_time_bound_history (_drift,
// _latent_plain: no history, same night), sched.history_mean_rel_error
// (|predicted − drawn| / drawn over the night's episodes; _drift) and
// the oracle replay of the history run's attempts.
func BenchmarkSchedulerHistory(b *testing.B) {
	ctx := context.Background()
	srv := natstest.Start(b)
	bs, err := bus.Open(ctx, bus.Config{URL: srv.URL()})
	if err != nil {
		b.Fatal(err)
	}
	defer bs.Close()
	h, err := OpenHistory(ctx, bs, bus.DefaultTopology(), 0)
	if err != nil {
		b.Fatal(err)
	}
	prev := newBenchHistoryWork(benchSchedSeed, benchSchedSeed+1, 1)
	for _, j := range prev.jobs {
		n := len(prev.steps[benchKey{j.Task.ID, j.Sample}])
		if err := h.Record(ctx, j.Task.App, Family(benchFamily), j.Task.ID, prev.length(j), n, n == j.Task.Steps); err != nil {
			b.Fatal(err)
		}
	}
	night := newBenchHistoryWork(benchSchedSeed, benchSchedSeed+2, 1)
	drifted := newBenchHistoryWork(benchSchedSeed, benchSchedSeed+2, benchDrift)
	lengths, err := h.Load(ctx, "Bench", Family("bench-planner-step1300"), night.tasks)
	if err != nil {
		b.Fatal(err)
	}
	if lengths.Known() != benchSchedTasks {
		b.Fatalf("history knows %d tasks, want %d", lengths.Known(), benchSchedTasks)
	}
	var plain, hist, drift benchSchedRun
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		plain = night.run(b, Dynamic, nil)
		hist = night.run(b, Dynamic, lengths)
		drift = drifted.run(b, Dynamic, lengths)
	}
	b.StopTimer()
	relErr := func(w *benchSchedWork) float64 {
		var sum float64
		for _, j := range w.jobs {
			p, _ := lengths.Predict(j.Task)
			d := w.length(j)
			sum += math.Abs(p.Seconds()-d.Seconds()) / d.Seconds()
		}
		return sum / float64(len(w.jobs))
	}
	bound := max(hist.work/benchSchedVMs, hist.longest)
	b.ReportMetric(hist.vmBoundRatio(), "sched.makespan_vs_vm_time_bound_history")
	b.ReportMetric(drift.vmBoundRatio(), "sched.makespan_vs_vm_time_bound_history_drift")
	b.ReportMetric(plain.vmBoundRatio(), "sched.makespan_vs_vm_time_bound_latent_plain")
	b.ReportMetric(relErr(night), "sched.history_mean_rel_error")
	b.ReportMetric(relErr(drifted), "sched.history_mean_rel_error_drift")
	b.ReportMetric(benchReplay(night.jobs, hist.perJob, benchSchedVMs, benchOrderOracle, 0).Seconds()/bound.Seconds(), "sched.history_lpt_oracle_replay_vs_bound")
	b.ReportMetric(hist.makespan.Seconds()/bound.Seconds(), "sched.history_makespan_vs_bound")
	// The same attempts through the ideal list scheduler in the history's
	// order: what the order costs, without the pool's overheads.
	index := make(map[benchKey]int, len(night.jobs))
	for i, j := range night.jobs {
		index[benchKey{j.Task.ID, j.Sample}] = i
	}
	var order []int
	for _, j := range Order(night.jobs, lengths) {
		order = append(order, index[benchKey{j.Task.ID, j.Sample}])
	}
	b.ReportMetric(benchReplayOrder(hist.perJob, benchSchedVMs, order, 0).Seconds()/bound.Seconds(), "sched.history_lpt_replay_vs_bound")
	// The marginals of the two workloads (as drawn, simulated seconds).
	for _, m := range []struct {
		name string
		w    *benchSchedWork
	}{{"plain", newBenchSchedWork(benchSchedSeed)}, {"latent", night}} {
		full, steps, mean, cv := m.w.marginals()
		b.ReportMetric(full, "sched.workload_"+m.name+"_share_to_limit")
		b.ReportMetric(steps, "sched.workload_"+m.name+"_mean_steps")
		b.ReportMetric(mean, "sched.workload_"+m.name+"_mean_episode_s")
		b.ReportMetric(cv, "sched.workload_"+m.name+"_episode_cv")
	}
}

// marginals returns the share of w's episodes that run to their step
// limit, their mean step count, mean length (simulated s) and its
// coefficient of variation.
func (w *benchSchedWork) marginals() (full, steps, mean, cv float64) {
	var sum, sq float64
	for _, j := range w.jobs {
		n := len(w.steps[benchKey{j.Task.ID, j.Sample}])
		if n == j.Task.Steps {
			full++
		}
		steps += float64(n)
		d := w.length(j).Seconds()
		sum += d
		sq += d * d
	}
	n := float64(len(w.jobs))
	mean = sum / n
	return full / n, steps / n, mean, math.Sqrt(sq/n-mean*mean) / mean
}
