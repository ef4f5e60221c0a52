package judge

import (
	"context"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/natstest"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
)

// benchCorpus is the benchmarks' simulated run: about 20 % true success
// (planner skill 0.3), 14 tasks × 6 samples.
func benchCorpus(b *testing.B) *corpus { return skillCorpus(b, 0.3, 6) }

// BenchmarkJudgePolicy judges one simulated run (about 20 % true success)
// with the simulator's default judge (recall 0.8, false-positive rate 0.2,
// independent votes) under four policies and reports, once per run:
//
//   - judge.calls_per_traj: model calls per trajectory of unanimous@4
//     with a 640x400 low-resolution first vote, early exit and the votes
//     after the first asked in one call with n = 3 (--lowres 640x400
//     --batch-votes; CODA's scheme without early exit costs 4);
//   - judge.precision_policy, judge.recall_policy: that policy's;
//   - judge.votes_per_traj: verdicts per trajectory under it (votes[]
//     entries, every choice of a multi-choice call counted);
//   - judge.calls_per_traj_sequential: the same policy with every vote a
//     call of its own (--lowres 640x400);
//   - judge.precision_single, judge.recall_single: one full-resolution
//     vote;
//   - judge.precision_vote4, judge.recall_vote4: unanimous@4 at full
//     resolution;
//
// precision and recall of "judged successful" (clean or with redundancy)
// against the simulator's truth on the same trajectories.
func BenchmarkJudgePolicy(b *testing.B) {
	c := benchCorpus(b)
	store := c.store(b)
	truth := make([]bool, len(c.trajs))
	for i, tr := range c.trajs {
		truth[i] = simTruth(b, store, tr, DefaultMaxFrames)
	}
	_, ep := startSimJudge(b, 1, nil)
	ctx := context.Background()
	run := func(pol Policy) rates {
		j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: pol, Store: store, Log: quietLog()})
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
		low := DefaultPolicy()
		low.LowRes = Size{640, 400}
		batch := low
		batch.BatchVotes = true
		one := DefaultPolicy()
		one.Votes = 1
		bt, lr, single, vote4 := run(batch), run(low), run(one), run(DefaultPolicy())
		n := float64(bt.pos + bt.neg)
		b.ReportMetric(float64(bt.callsPos+bt.callsNeg)/n, "judge.calls_per_traj")
		b.ReportMetric(bt.precision(), "judge.precision_policy")
		b.ReportMetric(float64(bt.tp)/float64(bt.pos), "judge.recall_policy")
		b.ReportMetric(float64(bt.votes)/n, "judge.votes_per_traj")
		b.ReportMetric(float64(lr.callsPos+lr.callsNeg)/n, "judge.calls_per_traj_sequential")
		b.ReportMetric(single.precision(), "judge.precision_single")
		b.ReportMetric(vote4.precision(), "judge.precision_vote4")
		b.ReportMetric(float64(single.tp)/float64(single.pos), "judge.recall_single")
		b.ReportMetric(float64(vote4.tp)/float64(vote4.pos), "judge.recall_vote4")
		b.ReportMetric(float64(bt.pos)/n, "judge.true_success_rate")
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
		j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: DefaultPolicy(), Store: store, Cache: cache, Log: quietLog(),
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
