package advantage

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/natstest"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/poll"
)

// statesOn starts a NATS server and returns a function that opens the
// state of set "set1" on it as one more process would.
func statesOn(ctx context.Context, t *testing.T) func() *state {
	srv := natstest.Start(t)
	return func() *state {
		st, err := openState(ctx, pipetest.Bus(t, srv.URL()), bus.DefaultTopology(), "set1")
		if err != nil {
			t.Fatal(err)
		}
		return st
	}
}

// Leases of two processes (two states on one bucket): one holder at a
// time; a lease given back is free at once; one marked done stays done
// for everyone; one whose holder stopped renewing it is taken over once
// its time has passed.
func TestLeaseOneHolderAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := statesOn(ctx, t)
	a, b := open(), open()
	key := a.flushKey("run.task")

	la, err := a.acquire(ctx, key, time.Minute)
	if err != nil || la.rec.Done {
		t.Fatalf("first acquire: %+v %v", la, err)
	}
	var held *heldError
	if _, err := b.acquire(ctx, key, time.Minute); !errors.As(err, &held) {
		t.Fatalf("second process took a held lease: %v", err)
	}
	if la, err = a.acquire(ctx, key, time.Minute); err != nil { // the holder renews it
		t.Fatalf("renew: %v", err)
	}
	if err := a.release(ctx, la, false, 0); err != nil {
		t.Fatal(err)
	}
	lb, err := b.acquire(ctx, key, time.Minute)
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	if err := b.release(ctx, lb, true, 0); err != nil {
		t.Fatal(err)
	}
	if la, err = a.acquire(ctx, key, time.Minute); err != nil || !la.rec.Done {
		t.Fatalf("after done: %+v %v; want the lease marked done", la, err)
	}

	// Takeover: a holder that dies keeps the lease only until its time.
	mk := a.manifestKey()
	if _, err := a.acquire(ctx, mk, 200*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "the expired lease to be taken over", 10*time.Second, func() bool {
		_, err := b.acquire(ctx, mk, time.Minute)
		return err == nil
	})
	if _, err := a.acquire(ctx, mk, time.Minute); !errors.As(err, &held) {
		t.Fatalf("the old holder took back a lease taken over: %v", err)
	}
}

// The manifest lease lasts --ack-wait: a process that died holding it
// (its own --ack-wait, 700 ms here) blocks the next writer that long, not
// a fixed minute, and the next writer holds it for its --ack-wait in turn.
func TestManifestLeaseLastsAckWait(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := statesOn(ctx, t)
	const ackWait = 700 * time.Millisecond
	dead := &server{st: open(), cfg: Config{AckWait: ackWait}}
	ld, err := dead.manifestLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if d := time.Until(ld.rec.Until); d <= 0 || d > ackWait {
		t.Fatalf("the lease is held for %v, want at most --ack-wait %v", d, ackWait)
	}
	next := &server{st: open(), cfg: Config{AckWait: ackWait}}
	ln, err := next.manifestLease(ctx) // the dead holder never gives it back
	if err != nil {
		t.Fatalf("next writer: %v", err)
	}
	if ln.rec.Owner != next.st.owner || !ln.rec.Until.After(ld.rec.Until) {
		t.Fatalf("next writer got %+v after the dead holder's %+v", ln.rec, ld.rec)
	}
	if err := next.st.release(ctx, ln, false, 0); err != nil {
		t.Fatal(err)
	}
}

// The state bucket is created with the topology's replicas (--replicas):
// three on a 3-server cluster.
func TestStateBucketReplicas(t *testing.T) {
	cl := natstest.StartEmbeddedCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	topo := bus.DefaultTopology()
	topo.Replicas = 3
	st, err := openState(ctx, pipetest.Bus(t, cl.URL()), topo, "set1")
	if err != nil {
		t.Fatal(err)
	}
	if r := natstest.Replicas(ctx, t, st.kv); r != 3 {
		t.Fatalf("%s created with %d replicas, want 3", StateBucket, r)
	}
}
