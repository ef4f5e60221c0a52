package agent_test

import (
	"context"
	"io"
	"log/slog"
	"sort"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/agent"
	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/model"
	"github.com/codapipe/codapipe/internal/prompt"
	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
)

// Settings of BenchmarkStepLatency (docs/performance.md explains them).
const (
	benchPlannerLatency  = 400 * time.Millisecond // simulated, per request (n plans in one request)
	benchExecutorLatency = 300 * time.Millisecond // simulated, per request
	// benchStepScale is wall time per simulated second. Real time: at 0.3
	// (steps of ~300 ms) the CPU work of the 8 extra executor requests —
	// each carries the ~250 KB screenshot as a data URI that go-openai
	// encodes and the simulator decodes, on the same 2 shared cores — is
	// a third of a step, and the figure measures the CPU.
	benchStepScale   = 1.0
	benchGroup       = 8 // G: 9 plans, 9 concurrent executor calls
	benchTasksPerApp = 1 // tasks with a 10-step limit, per simulated app
)

// BenchmarkStepLatency compares the mean wall time of one agent step with
// G=8 (one planner request for 9 plans, then 9 concurrent executor
// requests) against G=0 (one plan, one executor request), with the
// simulated model endpoints at a fixed latency and no faults. The real
// agent runs against a real simulated world (guest servers, model
// endpoints on loopback) and a real blob store; episodes run one at a
// time, alternating G=0 and G=8 task by task, so both see the same load.
//
// Figures: agent.step_latency_ratio_g8 (G=8 over G=0; target ≤ 1.3),
// agent.step_latency_ms_g0 and _g8 (mean wall ms per step) and their
// difference agent.step_overhead_ms_g8, the mean planner and grounding
// phases of a step (agent.plan_ms_*, agent.ground_ms_*; the 9 executor
// calls run in the latter), agent.model_latency_ms (the simulated model
// latency of a step, planner + executor), the mean screenshot size and
// the number of steps measured.
func BenchmarkStepLatency(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	clock := fault.Clock{Scale: benchStepScale}
	wc := sim.DefaultWorldConfig()
	wc.VMs, wc.Seed, wc.Clock = 2, 11, clock
	wc.Models.Planner.Faults = fault.Faults{Latency: fault.Fixed(benchPlannerLatency)}
	wc.Models.Executor.Faults = fault.Faults{Latency: fault.Fixed(benchExecutorLatency)}
	w, err := sim.StartWorld(ctx, wc)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Models.Wait()
	defer cancel()

	backend, err := simvm.New(simvm.URLs(w.GuestURLs...))
	if err != nil {
		b.Fatal(err)
	}
	pool, err := vmpool.NewPool(ctx, vmpool.Config{ID: "bench-agent", IdleCheck: -1, LockDir: b.TempDir()}, backend, vmpool.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close(context.Background())
	store, err := blob.Open(ctx, b.TempDir(), blob.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	model := func(url, name string) *model.Client {
		m, err := model.New(model.Config{BaseURL: url, Model: name, Attempts: 1}, quiet)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	planner := model(w.Models.PlannerURL, simmodels.DefaultPlannerModel)
	executor := model(w.Models.ExecutorURL, simmodels.DefaultExecutorModel)
	prompts, err := prompt.Load("")
	if err != nil {
		b.Fatal(err)
	}
	newAgent := func(group int) *agent.Agent {
		seed := int64(5)
		// Sleep (setup waits, the wait() action's pause) is near zero:
		// the figure is about the model calls of a step.
		ag, err := agent.New(agent.Config{Planner: planner, Executor: executor, Prompts: prompts, Store: store,
			Group: group, Run: "bench", RequestSeed: &seed, Sleep: fault.Clock{Scale: 1e-3}.Sleep, Log: quiet})
		if err != nil {
			b.Fatal(err)
		}
		return ag
	}
	agents := map[int]*agent.Agent{0: newAgent(0), benchGroup: newAgent(benchGroup)}
	tasks := benchStepTasks(b)

	type acc struct {
		steps             int
		shotBytes         int64
		wall, plan, grnd  time.Duration
		episodes, envErrs int
	}
	stats := map[int]*acc{0: {}, benchGroup: {}}
	run := func(group int, task *scienceboard.Task) {
		l, err := pool.Lease(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tr, err := agents[group].Run(ctx, agent.Episode{Task: task, Samples: 1, VM: l.ID(), Guest: l.Guest()})
		_ = l.End(vmpool.Healthy)
		if tr == nil {
			b.Fatalf("%s: no trajectory: %v", task.ID, err)
		}
		a := stats[group]
		a.episodes++
		if tr.Outcome.Kind == traj.OutcomeEnvError {
			a.envErrs++
			b.Logf("G=%d %s: environment error: %s", group, task.ID, tr.Outcome.Reason)
		}
		if len(tr.Steps) == 0 {
			return
		}
		// Steps run back to back: the first step's start to the end of
		// the episode (before the evaluator) is the steps' wall time.
		a.wall += tr.EndedAt.Sub(tr.Steps[0].StartedAt)
		a.steps += len(tr.Steps)
		for _, s := range tr.Steps {
			a.plan += time.Duration(s.Timings.PlanMS) * time.Millisecond
			a.grnd += time.Duration(s.Timings.GroundMS) * time.Millisecond
			a.shotBytes += s.Screenshot.Size
		}
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, task := range tasks {
			order := []int{0, benchGroup}
			if (i+j)%2 == 1 {
				order = []int{benchGroup, 0}
			}
			for _, g := range order {
				run(g, task)
			}
		}
	}
	b.StopTimer()

	ms := func(d time.Duration, n int) float64 {
		return float64(d) / float64(time.Millisecond) / float64(max(n, 1))
	}
	g0, g8 := stats[0], stats[benchGroup]
	if g0.steps == 0 || g8.steps == 0 {
		b.Fatalf("no steps ran (G=0: %d, G=8: %d)", g0.steps, g8.steps)
	}
	l0, l8 := ms(g0.wall, g0.steps), ms(g8.wall, g8.steps)
	b.ReportMetric(l8/l0, "agent.step_latency_ratio_g8")
	b.ReportMetric(l8-l0, "agent.step_overhead_ms_g8")
	b.ReportMetric(l0, "agent.step_latency_ms_g0")
	b.ReportMetric(l8, "agent.step_latency_ms_g8")
	b.ReportMetric(ms(g0.plan, g0.steps), "agent.plan_ms_g0")
	b.ReportMetric(ms(g8.plan, g8.steps), "agent.plan_ms_g8")
	b.ReportMetric(ms(g0.grnd, g0.steps), "agent.ground_ms_g0")
	b.ReportMetric(ms(g8.grnd, g8.steps), "agent.ground_ms_g8")
	b.ReportMetric(float64(g0.steps+g8.steps)/float64(b.N), "agent.steps_per_run")
	b.ReportMetric(float64(g0.shotBytes+g8.shotBytes)/1024/float64(g0.steps+g8.steps), "agent.screenshot_kb")
	b.ReportMetric(float64(g0.envErrs+g8.envErrs), "agent.env_errors")
	// The simulated latency of a step's model calls, in wall time: what
	// the steps would take with no CPU work at all.
	b.ReportMetric(float64(clock.Real(benchPlannerLatency+benchExecutorLatency))/float64(time.Millisecond), "agent.model_latency_ms")
}

// benchStepTasks picks benchTasksPerApp simulated tasks with a step limit
// of 10 or more from each app, in a fixed order.
func benchStepTasks(b *testing.B) []*scienceboard.Task {
	all, err := simtasks.All()
	if err != nil {
		b.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	per := map[string]int{}
	var out []*scienceboard.Task
	for i := range all {
		t := &all[i].Task
		if t.Steps >= 10 && per[t.App] < benchTasksPerApp {
			per[t.App]++
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		b.Fatal("no simulated task with a step limit of 10 or more")
	}
	return out
}
