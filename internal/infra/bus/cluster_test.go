package bus_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/prometheus/client_golang/prometheus"
)

// connect opens another connection (as another process would) to url.
func connect(t testing.TB, url string, reg prometheus.Registerer) *bus.Bus {
	t.Helper()
	b, err := bus.Open(context.Background(), bus.Config{URL: url, Timeout: 2 * time.Second, Metrics: bus.NewMetrics(reg), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// TestDrainEndsForEveryProcessOnOneConsumer: two connections (two
// processes) drain one durable consumer while a third keeps pulling on it
// without --drain (its idle pull requests are waiting on the server); both
// drains end, and every message was handled exactly once.
func TestDrainEndsForEveryProcessOnOneConsumer(t *testing.T) {
	a := open(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	const n = 200
	for i := range n {
		if _, err := a.Publish(ctx, bus.Subject(bus.Raw, "Celestia"), fmt.Sprint("m", i), []byte(fmt.Sprint(i)), nil); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	seen := map[string]int{}
	handler := func(_ context.Context, m *bus.Msg) bus.Result {
		mu.Lock()
		seen[m.ID]++
		mu.Unlock()
		return bus.Ack()
	}
	// The worker that never drains: started first, so its pulls wait on
	// the server when the others look for the end.
	idleCtx, stopIdle := context.WithCancel(ctx)
	idleDone := make(chan error, 1)
	idle := connect(t, a.URL(), nil)
	s := spec("shared")
	s.Workers = 4
	go func() { // owned by the test: stopped by stopIdle, waited for below
		_, err := idle.Consume(idleCtx, s, handler)
		idleDone <- err
	}()
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for p, b := range []*bus.Bus{a, connect(t, a.URL(), nil)} {
		wg.Add(1)
		go func() { // owned by the test: waited for below
			defer wg.Done()
			ds := spec("shared")
			ds.Drain, ds.Workers = true, 2
			_, errs[p] = b.Consume(ctx, ds, handler)
		}()
	}
	wg.Wait()
	stopIdle()
	if err := <-idleDone; err != nil {
		t.Fatal(err)
	}
	for p, err := range errs {
		if err != nil {
			t.Fatalf("drain of process %d: %v", p, err)
		}
	}
	if ctx.Err() != nil {
		t.Fatal("the drains did not end")
	}
	if len(seen) != n {
		t.Fatalf("handled %d distinct messages, want %d", len(seen), n)
	}
	for id, c := range seen {
		if c != 1 {
			t.Errorf("%s handled %d times", id, c)
		}
	}
}

// TestClusterPublishThroughLeaderKill: on a 3-node cluster of separate
// processes, a publisher publishes without pause while the node leading
// the raw stream is killed (SIGKILL) and later restarted. No publish
// returns an error (transient failures are retried), every id is stored
// exactly once, and a consumer on another connection keeps consuming
// through it and receives every id.
func TestClusterPublishThroughLeaderKill(t *testing.T) {
	cl := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	reg := prometheus.NewRegistry()
	pub := connect(t, cl.URL(), reg)
	three := bus.DefaultTopology()
	three.Replicas = 3
	if err := pub.EnsureTopology(ctx, three); err != nil {
		t.Fatal(err)
	}
	stream := bus.StreamName(bus.Raw)

	var published atomic.Int64
	stopPub := make(chan struct{})
	pubDone := make(chan error, 1)
	go func() { // owned by the test: stopped by stopPub, waited for below
		for i := 0; ; i++ {
			select {
			case <-stopPub:
				pubDone <- nil
				return
			default:
			}
			if _, err := pub.Publish(ctx, bus.Subject(bus.Raw, "ChimeraX"), fmt.Sprint("p", i), []byte(fmt.Sprint(i)), nil); err != nil {
				pubDone <- fmt.Errorf("publish %d: %w", i, err)
				return
			}
			published.Add(1)
		}
	}()

	var mu sync.Mutex
	got := map[string]int{}
	consCtx, stopCons := context.WithCancel(ctx)
	consDone := make(chan error, 1)
	cons := connect(t, cl.URL(), nil)
	go func() { // owned by the test: stopped by stopCons, waited for below
		s := spec("through-kill")
		s.Workers, s.AckWait = 4, 5*time.Second
		_, err := cons.Consume(consCtx, s, func(_ context.Context, m *bus.Msg) bus.Result {
			mu.Lock()
			got[m.ID]++
			mu.Unlock()
			return bus.Ack()
		})
		consDone <- err
	}()
	received := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(got)
	}
	// alive fails the test at once when the publisher or the consumer
	// has stopped: neither may end before the test stops it.
	alive := func() {
		t.Helper()
		select {
		case err := <-pubDone:
			t.Fatalf("publisher stopped: %v", err)
		case err := <-consDone:
			t.Fatalf("consumer stopped: %v", err)
		default:
		}
	}
	waitMore := func(what string, more int64) {
		t.Helper()
		target := published.Load() + more
		poll.Until(t, what, 40*time.Second, func() bool {
			alive()
			return published.Load() >= target
		})
	}

	waitMore("publishes before the kill", 100)
	leader, err := cl.StreamLeader(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("killing node %s, leader of %s, after %d publishes", cl.Name(leader), stream, published.Load())
	cl.Kill(leader)
	waitMore("publishes after the kill", 100)
	if l, err := cl.StreamLeader(ctx, stream); err != nil || l == leader {
		t.Fatalf("stream leader after the kill: %d (%v); killed %d", l, err, leader)
	}
	before := received()
	poll.Until(t, "the consumer to receive after the kill", 40*time.Second, func() bool { alive(); return received() > before+50 })
	cl.Restart(leader)
	if err := cl.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	waitMore("publishes after the restart", 100)
	close(stopPub)
	if err := <-pubDone; err != nil {
		t.Fatal(err)
	}
	total := int(published.Load())
	poll.Until(t, "the consumer to receive every id", 40*time.Second, func() bool { return received() == total })
	stopCons()
	if err := <-consDone; err != nil {
		t.Fatal(err)
	}

	// Stored exactly once: as many messages as ids, each id once.
	var ids map[string]int
	if err := bus.RetryTransient(ctx, 0, func(ctx context.Context) error {
		ids = map[string]int{}
		return pub.Scan(ctx, bus.Raw, bus.AllSubjects(bus.Raw), time.Time{}, func(m bus.Stored) error {
			ids[m.Header.Get("Nats-Msg-Id")]++
			return nil
		})
	}, nil); err != nil {
		t.Fatal(err)
	}
	if len(ids) != total {
		t.Fatalf("stream holds %d distinct ids, published %d", len(ids), total)
	}
	for id, c := range ids {
		if c != 1 {
			t.Errorf("id %s stored %d times", id, c)
		}
	}
	t.Logf("%d published, %v publish retries", total, retries(t, reg, "publish"))
}

// retries reads codapipe_bus_retries_total{op} from reg.
func retries(t *testing.T, reg *prometheus.Registry, op string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "codapipe_bus_retries_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "op" && l.GetValue() == op {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	t.Fatalf("no codapipe_bus_retries_total{op=%q}", op)
	return 0
}

// TestClusterDrainWaitsForEveryProcess: on a 3-node cluster with
// replicated streams, four connections drain one new durable consumer at
// once with slow handlers. No drain ends while a message is still
// unhandled: when each returns, every message has been handled (and none
// twice).
func TestClusterDrainWaitsForEveryProcess(t *testing.T) {
	cl := natstest.StartCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 55*time.Second)
	defer cancel()
	admin := connect(t, cl.URL(), nil)
	three := bus.DefaultTopology()
	three.Replicas = 3
	if err := admin.EnsureTopology(ctx, three); err != nil {
		t.Fatal(err)
	}
	const n = 120
	for i := range n {
		if _, err := admin.Publish(ctx, bus.Subject(bus.Raw, "Celestia"), fmt.Sprint("d", i), []byte("x"), nil); err != nil {
			t.Fatal(err)
		}
	}
	var handled atomic.Int64
	var mu sync.Mutex
	seen := map[string]int{}
	var wg sync.WaitGroup
	atReturn := make([]int64, 4)
	errs := make([]error, 4)
	for p := range 4 {
		b := connect(t, cl.URL(), nil)
		wg.Add(1)
		go func() { // owned by the test: waited for below
			defer wg.Done()
			s := spec("cluster-drain")
			s.Drain, s.Workers = true, 3
			_, errs[p] = b.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
				time.Sleep(20 * time.Millisecond) // a handler's work
				mu.Lock()
				seen[m.ID]++
				mu.Unlock()
				handled.Add(1)
				return bus.Ack()
			})
			atReturn[p] = handled.Load()
		}()
	}
	wg.Wait()
	for p := range 4 {
		if errs[p] != nil {
			t.Fatalf("drain %d: %v", p, errs[p])
		}
		if atReturn[p] < n {
			t.Errorf("drain %d returned after %d of %d messages were handled", p, atReturn[p], n)
		}
	}
	if len(seen) != n {
		t.Fatalf("%d distinct messages handled, want %d", len(seen), n)
	}
}
