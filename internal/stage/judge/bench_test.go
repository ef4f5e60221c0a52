package judge

import (
	"context"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// benchCorpus is the benchmarks' simulated run: about 20 % true success
// (planner skill 0.3), 14 tasks × 6 samples.
func benchCorpus(b *testing.B) *corpus { return skillCorpus(b, 0.3, 6) }

// BenchmarkJudgePolicy judges one simulated run (about 20 % true success)
// through the whole judge (blob store, prompts, HTTP, the simulated
// judge endpoint's two calibrated models) under the default policy and
// CODA's voting@4, and reports, once per run, against the simulator's
// truth on the same trajectories ("judged successful": clean or with
// redundancy):
//
//   - judge.e2e_calls_per_traj, judge.e2e_precision_policy,
//     judge.e2e_recall_policy: the default policy's (DefaultPolicy(2));
//   - judge.e2e_votes_per_traj: verdicts per trajectory under it (votes[]
//     entries, every choice of a multi-choice call counted);
//   - judge.e2e_calls_per_traj_sequential: the same policy with every
//     vote a call of its own (BatchVotes off);
//   - judge.e2e_precision_vote4, judge.e2e_recall_vote4,
//     judge.e2e_calls_vote4: CODA's voting@4;
//   - judge.true_success_rate: the run's.
//
// A run of 84 trajectories gives figures a few points apart from the
// model's; BenchmarkJudgeCalibration gives them to a few tenths at the
// calibration's success rate.
func BenchmarkJudgePolicy(b *testing.B) {
	c := benchCorpus(b)
	store := c.store(b)
	truth := make([]bool, len(c.trajs))
	for i, tr := range c.trajs {
		truth[i] = simTruth(b, store, tr, DefaultMaxFrames)
	}
	m, ep := startSimJudge(b, 1, nil)
	second := ep
	second.Model = m.Config().Judge.Second.Model
	ctx := context.Background()
	run := func(pol Policy, eps ...EndpointSpec) rates {
		j, err := New(Config{Endpoints: eps, Policy: pol, Store: store, Log: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		var r rates
		for i, tr := range c.trajs {
			jd, err := j.Judge(ctx, tr, false)
			if err != nil {
				b.Fatal(err)
			}
			r.add(truth[i], jd)
		}
		return r
	}
	for b.Loop() {
		def := DefaultPolicy(2)
		seq := def
		seq.BatchVotes = false
		st, sq, vote4 := run(def, ep, second), run(seq, ep, second), run(CODAPolicy(), ep)
		n := float64(st.pos + st.neg)
		b.ReportMetric(float64(st.callsPos+st.callsNeg)/n, "judge.e2e_calls_per_traj")
		b.ReportMetric(st.precision(), "judge.e2e_precision_policy")
		b.ReportMetric(float64(st.tp)/float64(st.pos), "judge.e2e_recall_policy")
		b.ReportMetric(float64(st.votes)/n, "judge.e2e_votes_per_traj")
		b.ReportMetric(float64(sq.callsPos+sq.callsNeg)/n, "judge.e2e_calls_per_traj_sequential")
		b.ReportMetric(vote4.precision(), "judge.e2e_precision_vote4")
		b.ReportMetric(float64(vote4.tp)/float64(vote4.pos), "judge.e2e_recall_vote4")
		b.ReportMetric(float64(vote4.callsPos+vote4.callsNeg)/n, "judge.e2e_calls_vote4")
		b.ReportMetric(float64(st.pos)/n, "judge.true_success_rate")
	}
}

// BenchmarkJudgeThroughput drains a simulated run, three times over (its
// trajectories under new ids, so that start and end weigh little), through
// Serve (NATS, blob store, vote cache) with C = 8 trajectories at once
// against a
// simulated judge that takes 200 ms a call, and reports
// judge.throughput_vs_ideal: trajectories/s over C ÷ (calls per
// trajectory × 200 ms), the rate if nothing but the calls took time.
func BenchmarkJudgeThroughput(b *testing.B) {
	const (
		workers = 8
		latency = 200 * time.Millisecond
	)
	c := benchCorpus(b)
	store := c.store(b)
	_, ep := startSimJudge(b, 1, func(cfg *simmodels.Config) {
		cfg.Clock = fault.Clock{Scale: 1}
		cfg.Judge.Faults.Latency = fault.Fixed(latency)
	})
	ctx := context.Background()
	for b.Loop() {
		b.StopTimer()
		srv := natstest.Start(b)
		bb, err := bus.Open(ctx, bus.Config{URL: srv.URL(), Logger: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		if err := bb.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
			b.Fatal(err)
		}
		n := 0
		for range 3 {
			n += len(republish(b, bb, c.trajs, "", len(c.trajs)))
		}
		cache, err := OpenCache(ctx, bb, bus.DefaultTopology(), 0)
		if err != nil {
			b.Fatal(err)
		}
		j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: CODAPolicy(), Store: store, Cache: cache, Log: quietLog(),
			Limits: Limits{Concurrency: workers}})
		if err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		start := time.Now()
		st, err := Serve(ctx, ServiceConfig{Judge: j, Bus: bb, Archive: store, Workers: workers, Drain: true, Log: quietLog()})
		wall := time.Since(start)
		b.StopTimer()
		if err != nil || st.Trajectories() != n {
			b.Fatalf("%d of %d judged: %v", st.Trajectories(), n, err)
		}
		cpt := float64(st.Calls) / float64(st.Trajectories())
		measured := float64(st.Trajectories()) / wall.Seconds()
		ideal := workers / (cpt * latency.Seconds())
		b.ReportMetric(measured/ideal, "judge.throughput_vs_ideal")
		b.ReportMetric(measured, "judge.trajectories_per_s")
		bb.Close()
		srv.Shutdown()
		b.StartTimer()
	}
}

// BenchmarkResize: one simulated 1280×800 screenshot scaled to fit 640×400
// (Catmull-Rom), as the low-resolution pass does for each frame.
func BenchmarkResize(b *testing.B) {
	shot := chimeraxScreenshot(b)
	b.SetBytes(int64(len(shot)))
	for b.Loop() {
		if _, _, err := Resize(shot, Size{640, 400}); err != nil {
			b.Fatal(err)
		}
	}
}
