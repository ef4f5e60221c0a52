package bus_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// open starts an embedded bus on dir with the topology and a local blob
// store as claim store.
func open(t testing.TB, dir string) *bus.Bus {
	t.Helper()
	ctx := context.Background()
	claims, err := blob.Open(ctx, filepath.Join(dir, "blobs"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return openWith(t, bus.Config{DataDir: dir, Claims: claims, Timeout: 5 * time.Second})
}

// openWith opens a bus with cfg, closed when the test ends, and ensures
// the topology.
func openWith(t testing.TB, cfg bus.Config) *bus.Bus {
	t.Helper()
	b, err := bus.Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	if err := b.EnsureTopology(context.Background(), bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	return b
}

// publish publishes body on subject with the message id, or fails the
// test.
func publish(t testing.TB, b *bus.Bus, subject, id string, body []byte) {
	t.Helper()
	if _, err := b.Publish(context.Background(), subject, id, body, nil); err != nil {
		t.Fatal(err)
	}
}

func streamMsgs(t *testing.T, b *bus.Bus, k bus.Kind) uint64 {
	t.Helper()
	s, err := b.JetStream().Stream(context.Background(), bus.StreamName(k))
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

func spec(durable string) bus.ConsumerSpec {
	return bus.ConsumerSpec{
		Stream: bus.StreamName(bus.Raw), Durable: durable,
		AckWait: 2 * time.Second, FetchWait: 200 * time.Millisecond, ShutdownGrace: 5 * time.Second,
	}
}

func TestPublishSameIDTwiceStoresOne(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	subj := bus.Subject(bus.Raw, "ChimeraX")
	a1, err := b.Publish(ctx, subj, "01KAKQ3J0G7ZR4X2M5T8V9W6YB", []byte(`{"n":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	a2, err := b.Publish(ctx, subj, "01KAKQ3J0G7ZR4X2M5T8V9W6YB", []byte(`{"n":1}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if a1.Duplicate || !a2.Duplicate || a1.Seq != a2.Seq {
		t.Fatalf("first %+v, second %+v: want the second to be a duplicate of the first", a1, a2)
	}
	if n := streamMsgs(t, b, bus.Raw); n != 1 {
		t.Fatalf("stream holds %d messages, want 1", n)
	}
	if _, err := b.Publish(ctx, subj, "", []byte("x"), nil); err == nil {
		t.Fatal("publish without id accepted")
	}
}

func TestRetryWithDelayIsRedeliveredLater(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	publish(t, b, bus.Subject(bus.Raw, "Celestia"), "m1", []byte("hello"))
	const delay = 400 * time.Millisecond
	var times []time.Time
	var deliveries []uint64
	s := spec("retry")
	s.Drain = true
	st, err := b.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
		times = append(times, time.Now())
		deliveries = append(deliveries, m.Deliveries)
		if len(times) == 1 {
			return bus.Retry(delay, "model endpoint busy")
		}
		return bus.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(times) != 2 || deliveries[0] != 1 || deliveries[1] != 2 {
		t.Fatalf("deliveries %v, want [1 2]", deliveries)
	}
	if gap := times[1].Sub(times[0]); gap < delay {
		t.Fatalf("redelivered after %v, before the %v delay", gap, delay)
	}
	if st.Acked != 1 || st.Retried != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func deadLetters(t *testing.T, b *bus.Bus, n int) []jetstream.Msg {
	t.Helper()
	ctx := context.Background()
	c, err := b.JetStream().OrderedConsumer(ctx, bus.StreamName(bus.Dead), jetstream.OrderedConsumerConfig{})
	if err != nil {
		t.Fatal(err)
	}
	batch, err := c.Fetch(n, jetstream.FetchMaxWait(2*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	var out []jetstream.Msg
	for m := range batch.Messages() {
		out = append(out, m)
	}
	return out
}

func TestRejectCopiesToDeadLetterSubject(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	subj := bus.Subject(bus.Raw, "GRASS GIS")
	hdr := nats.Header{"Coda-Run": []string{"nightly"}}
	if _, err := b.Publish(ctx, subj, "bad-1", []byte("{not json"), hdr); err != nil {
		t.Fatal(err)
	}
	publish(t, b, subj, "good-1", []byte("{}"))
	s := spec("judge")
	s.Drain = true
	var handled []string
	st, err := b.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
		handled = append(handled, m.ID)
		if m.ID == "bad-1" {
			return bus.Reject("trajectory: invalid JSON at offset 1")
		}
		return bus.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Dead != 1 || st.Acked != 1 {
		t.Fatalf("stats %+v, want 1 dead and 1 acked (the good message is not lost)", st)
	}
	dl := deadLetters(t, b, 1)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	m := dl[0]
	h := m.Headers()
	checks := map[string]string{
		"subject":              m.Subject(),
		bus.HeaderDeadReason:   h.Get(bus.HeaderDeadReason),
		bus.HeaderDeadSubject:  h.Get(bus.HeaderDeadSubject),
		bus.HeaderDeadConsumer: h.Get(bus.HeaderDeadConsumer),
		"Coda-Run (original)":  h.Get("Coda-Run"),
		"Coda-Dead-Msg-Id":     h.Get("Coda-Dead-Msg-Id"),
		"body":                 string(m.Data()),
	}
	want := map[string]string{
		"subject":              "coda.dlq.traj.GRASS_GIS",
		bus.HeaderDeadReason:   "trajectory: invalid JSON at offset 1",
		bus.HeaderDeadSubject:  subj,
		bus.HeaderDeadConsumer: "judge",
		"Coda-Run (original)":  "nightly",
		"Coda-Dead-Msg-Id":     "bad-1",
		"body":                 "{not json",
	}
	for k, w := range want {
		if checks[k] != w {
			t.Errorf("%s = %q, want %q", k, checks[k], w)
		}
	}
	// DeadLetterIDs finds it by the subject it arrived on, and only there.
	if ids, err := b.DeadLetterIDs(ctx, subj); err != nil || !slices.Equal(ids, []string{"bad-1"}) {
		t.Errorf("DeadLetterIDs(%s) = %v, %v; want [bad-1]", subj, ids, err)
	}
	if ids, err := b.DeadLetterIDs(ctx, bus.Subject(bus.Raw, "KAlgebra")); err != nil || len(ids) != 0 {
		t.Errorf("DeadLetterIDs of another app = %v, %v; want none", ids, err)
	}
}

func TestRetriesExhaustedAreDeadLettered(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	publish(t, b, bus.Subject(bus.Raw, "KAlgebra"), "m", []byte("x"))
	s := spec("exhaust")
	s.Drain, s.MaxDeliver = true, 3
	var calls atomic.Int32
	st, err := b.Consume(ctx, s, func(context.Context, *bus.Msg) bus.Result {
		calls.Add(1)
		return bus.Retry(10*time.Millisecond, "endpoint 503")
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 3 || st.Dead != 1 {
		t.Fatalf("calls %d stats %+v, want 3 calls and 1 dead letter", calls.Load(), st)
	}
	dl := deadLetters(t, b, 1)
	if len(dl) != 1 || !strings.Contains(dl[0].Headers().Get(bus.HeaderDeadReason), "retries exhausted after 3 deliveries: endpoint 503") {
		t.Fatalf("dead letter missing or wrong reason: %v", dl)
	}
}

func TestHandlerPanicIsRetriedNotFatal(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	publish(t, b, bus.Subject(bus.Raw, "ChimeraX"), "p", []byte("x"))
	s := spec("panic")
	s.Drain, s.AckWait = true, time.Second
	var calls atomic.Int32
	st, err := b.Consume(ctx, s, func(context.Context, *bus.Msg) bus.Result {
		if calls.Add(1) == 1 {
			panic("nil map")
		}
		return bus.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	if st.Retried != 1 || st.Acked != 1 {
		t.Fatalf("stats %+v, want the panic retried then acked", st)
	}
}

func TestClaimCheckCarriesLargeBody(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	body := make([]byte, 5<<20)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	ack, err := b.Publish(ctx, bus.Subject(bus.Raw, "ChimeraX"), "big", body, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !ack.Claimed {
		t.Fatalf("a 5 MiB body under a %d-byte payload limit was not claim-checked", b.MaxPayload())
	}
	s := spec("claims")
	s.Drain = true
	var got []byte
	var claimed bool
	if _, err := b.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
		got, claimed = m.Data, m.Claimed
		return bus.Ack()
	}); err != nil {
		t.Fatal(err)
	}
	if !claimed || sha256.Sum256(got) != sha256.Sum256(body) {
		t.Fatalf("body arrived claimed=%v, %d bytes, intact=%v", claimed, len(got), bytes.Equal(got, body))
	}
	// Small bodies travel inline.
	ack, err = b.Publish(ctx, bus.Subject(bus.Raw, "ChimeraX"), "small", []byte("x"), nil)
	if err != nil || ack.Claimed {
		t.Fatalf("small body: %+v %v", ack, err)
	}
}

func TestTooLargeWithoutClaimStore(t *testing.T) {
	b := openWith(t, bus.Config{DataDir: t.TempDir()})
	_, err := b.Publish(context.Background(), bus.Subject(bus.Raw, "x"), "id", make([]byte, 2<<20), nil)
	if !errors.Is(err, bus.ErrTooLarge) {
		t.Fatalf("want ErrTooLarge, got %v", err)
	}
}

func TestDrainExitsWhenDone(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	for i := range 25 {
		publish(t, b, bus.Subject(bus.Raw, "Celestia"), fmt.Sprint("d", i), []byte("x"))
	}
	s := spec("drain")
	s.Drain, s.Workers = true, 3
	var n atomic.Int32
	st, err := b.Consume(ctx, s, func(context.Context, *bus.Msg) bus.Result { n.Add(1); return bus.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	if n.Load() != 25 || st.Acked != 25 {
		t.Fatalf("handled %d, stats %+v, want 25", n.Load(), st)
	}
	// Nothing left: a second drain returns at once, handling nothing.
	st, err = b.Consume(ctx, s, func(context.Context, *bus.Msg) bus.Result { t.Error("unexpected message"); return bus.Ack() })
	if err != nil || st.Acked != 0 {
		t.Fatalf("second drain: %+v %v", st, err)
	}
}

func TestLongHandlerKeptAliveByHeartbeats(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	publish(t, b, bus.Subject(bus.Raw, "ChimeraX"), "slow", []byte("x"))
	s := spec("slow")
	s.Drain, s.AckWait, s.Workers = true, time.Second, 2
	var calls atomic.Int32
	st, err := b.Consume(ctx, s, func(context.Context, *bus.Msg) bus.Result {
		calls.Add(1)
		time.Sleep(3 * time.Second) // three ack waits
		return bus.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls.Load() != 1 || st.Acked != 1 {
		t.Fatalf("handler ran %d times (stats %+v): the message was redelivered while in progress", calls.Load(), st)
	}
}

func TestShutdownLetsInFlightHandlerFinish(t *testing.T) {
	b := open(t, t.TempDir())
	ctx, cancel := context.WithCancel(context.Background())
	publish(t, b, bus.Subject(bus.Raw, "ChimeraX"), "inflight", []byte("x"))
	started := make(chan struct{})
	release := make(chan struct{})
	done := make(chan bus.Stats)
	go func() {
		st, err := b.Consume(ctx, spec("shutdown"), func(hctx context.Context, _ *bus.Msg) bus.Result {
			close(started)
			<-release
			if hctx.Err() != nil {
				return bus.Retry(0, "cancelled")
			}
			return bus.Ack()
		})
		if err != nil {
			t.Error(err)
		}
		done <- st
	}()
	<-started
	cancel() // SIGINT: stop fetching
	close(release)
	st := <-done
	if st.Acked != 1 {
		t.Fatalf("stats %+v: the in-flight message should finish and be acked after the stop", st)
	}
}

func TestRestartKeepsUnacknowledgedMessages(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b := open(t, dir)
	for i := range 5 {
		publish(t, b, bus.Subject(bus.Raw, "ChimeraX"), fmt.Sprint("r", i), []byte(fmt.Sprint(i)))
	}
	// Handle two, then stop (as a killed worker would, before the rest).
	ctx1, stop := context.WithCancel(ctx)
	var handled atomic.Int32
	if _, err := b.Consume(ctx1, spec("judge"), func(context.Context, *bus.Msg) bus.Result {
		if handled.Add(1) == 2 {
			stop()
		}
		return bus.Ack()
	}); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}

	b2 := open(t, dir) // a second command on the same data directory
	if n := streamMsgs(t, b2, bus.Raw); n != 5 {
		t.Fatalf("after restart the stream holds %d messages, want 5", n)
	}
	s := spec("judge")
	s.Drain = true
	var rest []string
	if _, err := b2.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
		rest = append(rest, string(m.Data))
		return bus.Ack()
	}); err != nil {
		t.Fatal(err)
	}
	if strings.Join(rest, ",") != "2,3,4" {
		t.Fatalf("after restart the consumer got %v, want the 3 unacknowledged [2 3 4]", rest)
	}
}

func TestDataDirInUse(t *testing.T) {
	dir := t.TempDir()
	b := open(t, dir)
	_ = b
	_, err := bus.Open(context.Background(), bus.Config{DataDir: dir})
	if !errors.Is(err, bus.ErrDataDirInUse) {
		t.Fatalf("want ErrDataDirInUse, got %v", err)
	}
}

func TestExternalServerAuth(t *testing.T) {
	t.Run("user-password", func(t *testing.T) {
		srv := natstest.Start(t, func(o *server.Options) { o.Username, o.Password = "coda", "s3cret" })
		ctx := context.Background()
		if _, err := bus.Open(ctx, bus.Config{URL: srv.URL(), User: "coda", Password: "wrong", Timeout: 2 * time.Second}); err == nil ||
			!strings.Contains(strings.ToLower(err.Error()), "authorization") {
			t.Fatalf("wrong password: want an authorization error, got %v", err)
		}
		b := openWith(t, bus.Config{URL: srv.URL(), User: "coda", Password: "s3cret"})
		if b.URL() != "" {
			t.Errorf("URL() = %q for an external server", b.URL())
		}
	})
	t.Run("token", func(t *testing.T) {
		srv := natstest.Start(t, func(o *server.Options) { o.Authorization = "tok-123" })
		b, err := bus.Open(context.Background(), bus.Config{URL: srv.URL(), Token: "tok-123"})
		if err != nil {
			t.Fatal(err)
		}
		b.Close()
	})
	t.Run("no jetstream", func(t *testing.T) {
		srv := natstest.Start(t, func(o *server.Options) { o.JetStream = false })
		_, err := bus.Open(context.Background(), bus.Config{URL: srv.URL(), Timeout: 2 * time.Second})
		if err == nil || !strings.Contains(err.Error(), "JetStream not available") {
			t.Fatalf("want a clear JetStream error, got %v", err)
		}
	})
	t.Run("external restart keeps stream", func(t *testing.T) {
		srv := natstest.Start(t)
		ctx := context.Background()
		b := openWith(t, bus.Config{URL: srv.URL()})
		publish(t, b, bus.Subject(bus.Raw, "a"), "x1", []byte("x"))
		srv.Restart()
		var n uint64
		poll.Until(t, "reconnect and stream state", 15*time.Second, func() bool {
			s, err := b.JetStream().Stream(ctx, bus.StreamName(bus.Raw))
			if err != nil {
				return false
			}
			info, err := s.Info(ctx)
			if err != nil {
				return false
			}
			n = info.State.Msgs
			return true
		})
		if n != 1 {
			t.Fatalf("after a server restart the stream holds %d messages, want 1", n)
		}
	})
}

func TestConcurrentPublishersDedup(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				if _, err := b.Publish(ctx, bus.Subject(bus.Raw, "ChimeraX"), fmt.Sprint("t", i), []byte(fmt.Sprint(w)), nil); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if n := streamMsgs(t, b, bus.Raw); n != 50 {
		t.Fatalf("4 publishers of the same 50 ids stored %d messages, want 50", n)
	}
}
