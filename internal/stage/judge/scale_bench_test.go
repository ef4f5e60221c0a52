package judge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// Scale benchmark settings: each judge worker judges scalePerWorker
// trajectories at once (and as many calls in flight to the endpoint), and
// a judge call takes scaleLatency; the simulated endpoint has no limit of
// its own, so it has the capacity for every worker.
const (
	scalePerWorker = 4
	scaleLatency   = 2 * time.Second
	scaleRounds    = 1 // the simulated run's trajectories, under new ids, this many times per worker
	scaleMaxFrames = 2
)

// BenchmarkJudgeScale measures how judging scales with workers on a
// 3-node JetStream cluster (separate nats-server processes, streams with 3
// replicas): the same number of trajectories per worker (the simulated
// run's) is drained by 1 worker, then 4 times as many by 4 workers sharing one durable consumer (each its own NATS connection,
// judge and Serve, as separate processes would have), against a simulated
// judge whose calls take a fixed 2 s (a large VLM's call with 2 frames, so that the work
// of the judge and the simulated endpoint weighs little next to the calls). It reports
// judge.scale_4_vs_1, the trajectories judged per second with 4 workers ÷
// with 1 (4 is the ideal; the goal is ≥ 3.2), and the two rates. A rate is
// the steady one: the trajectories from 10 % to 90 % of the judged stream
// over the time between (the workers' start and the last wave, smaller
// than their capacity, are left out). It needs
// the nats-server binary (make tools) and is skipped without it.
func BenchmarkJudgeScale(b *testing.B) {
	c := benchCorpus(b)
	store := c.store(b)
	_, ep := startSimJudge(b, 1, func(cfg *simmodels.Config) {
		cfg.Clock = fault.Clock{Scale: 1}
		cfg.Judge.Faults.Latency = fault.Fixed(scaleLatency)
	})
	mem, archive := memStore(b)
	cl := natstest.StartCluster(b, 3, natstest.StoreIn(mem))
	ctx := context.Background()
	open := func() *bus.Bus {
		bb, err := bus.Open(ctx, bus.Config{URL: cl.URL(), Logger: quietLog()})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { bb.Close() })
		return bb
	}
	admin := open()
	topo := bus.DefaultTopology()
	topo.Replicas = 3
	if err := admin.EnsureTopology(ctx, topo); err != nil {
		b.Fatal(err)
	}
	pol := CODAPolicy()
	pol.MaxFrames = scaleMaxFrames
	// rate drains scaleRounds×n copies of the run with n workers and returns
	// trajectories per second.
	phase := 0
	rate := func(n int) float64 {
		phase++
		// Each phase judges its own messages: the earlier phase's are purged.
		if err := bus.RetryTransient(ctx, 0, func(ctx context.Context) error {
			s, err := admin.JetStream().Stream(ctx, bus.StreamName(bus.Raw))
			if err != nil {
				return err
			}
			return s.Purge(ctx)
		}, nil); err != nil {
			b.Fatal(err)
		}
		total := 0
		for range scaleRounds * n { // the same load per worker: n copies of the run
			total += len(republish(b, admin, c.trajs, fmt.Sprintf("scale-%d", phase), len(c.trajs)))
		}
		durable := fmt.Sprintf("judge_scale_%d", phase)
		type worker struct {
			j  *Judge
			bb *bus.Bus
		}
		ws := make([]worker, n)
		for i := range ws {
			j, err := New(Config{Endpoints: []EndpointSpec{ep}, Policy: pol, Store: store, Log: quietLog(), Limits: Limits{Concurrency: scalePerWorker}})
			if err != nil {
				b.Fatal(err)
			}
			ws[i] = worker{j: j, bb: open()}
		}
		var wg sync.WaitGroup
		judged := make([]int, n)
		errs := make([]error, n)
		var base uint64
		if err := bus.RetryTransient(ctx, 0, func(ctx context.Context) error {
			var err error
			base, err = judgedCount(ctx, admin)
			return err
		}, nil); err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		// The steady rate: the time from 10 % to 90 % of the trajectories
		// judged, so that neither the workers' start (consumers, first
		// fetches) nor the last few (a wave smaller than the workers'
		// capacity) weigh.
		type window struct{ lo, hi time.Duration }
		win := make(chan window, 1)
		stop := make(chan struct{})
		go func() { // owned by rate: ends with stop, waited for through win
			defer close(win)
			var w window
			for {
				select {
				case <-stop:
					return
				case <-time.After(20 * time.Millisecond):
				}
				c, err := judgedCount(ctx, admin)
				if err != nil { // a failed poll: the next one
					continue
				}
				if w.lo == 0 && c-base >= uint64(total/10) {
					w.lo = time.Since(start)
				}
				if c-base >= uint64(total*9/10) {
					w.hi = time.Since(start)
					win <- w
					return
				}
			}
		}()
		for i, w := range ws {
			wg.Add(1)
			go func() { // owned by rate: waited for below
				defer wg.Done()
				st, err := Serve(ctx, ServiceConfig{Judge: w.j, Bus: w.bb, Archive: archive, Durable: durable, Workers: scalePerWorker,
					Drain: true, Log: quietLog()})
				judged[i], errs[i] = st.Trajectories(), err
			}()
		}
		wg.Wait()
		wall := time.Since(start)
		close(stop)
		w, ok := <-win
		if !ok || w.hi <= w.lo { // the window went by between two polls
			b.Fatalf("%d workers: no 10 %%–90 %% window seen (the polls of the judged stream failed)", n)
		}
		steady := w.hi - w.lo
		sum := 0
		for i := range judged {
			if errs[i] != nil {
				b.Fatalf("worker %d of %d: %v", i, n, errs[i])
			}
			sum += judged[i]
		}
		if sum != total {
			b.Fatalf("%d workers judged %d trajectories, want %d", n, sum, total)
		}
		b.Logf("%d workers: judged %v in %v, 10 %% to 90 %% in %v", n, judged, wall, steady)
		return float64(total*9/10-total/10) / steady.Seconds()
	}
	for b.Loop() {
		one := rate(1)
		four := rate(4)
		b.ReportMetric(four/one, "judge.scale_4_vs_1")
		b.ReportMetric(one, "judge.scale_1_trajectories_per_s")
		b.ReportMetric(four, "judge.scale_4_trajectories_per_s")
	}
}

// judgedCount is the number of messages in the judged stream.
func judgedCount(ctx context.Context, bb *bus.Bus) (uint64, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	s, err := bb.JetStream().Stream(ctx, bus.StreamName(bus.Judged))
	if err != nil {
		return 0, err
	}
	return s.CachedInfo().State.Msgs, nil
}

// memStore returns a folder in a memory file system (/dev/shm) when there
// is one, else a test folder, and a blob store in it: the scale
// benchmark's archive and cluster stores, whose fsyncs would otherwise
// measure this machine's disk, not the workers.
func memStore(b *testing.B) (string, *blob.Store) {
	b.Helper()
	dir := b.TempDir()
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		d, err := os.MkdirTemp("/dev/shm", "codapipe-bench-")
		if err == nil {
			dir = d
			b.Cleanup(func() { os.RemoveAll(d) })
		}
	}
	s, err := blob.Open(context.Background(), filepath.Join(dir, "archive"), blob.Config{})
	if err != nil {
		b.Fatal(err)
	}
	return dir, s
}
