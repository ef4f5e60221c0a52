package advantage

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
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
	before := time.Now()
	ld, err := dead.manifestLease(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ld.rec.Until.Before(before.Add(ackWait)) {
		t.Fatalf("the lease is held until %v, want at least --ack-wait (%v) from when it was taken", ld.rec.Until, ackWait)
	}
	if d := time.Until(ld.rec.Until); d > ackWait {
		t.Fatalf("the lease is held for %v, want at most --ack-wait %v", d, ackWait)
	}
	next := &server{st: open(), cfg: Config{AckWait: ackWait}}
	ln, err := next.manifestLease(ctx) // the dead holder never gives it back
	if err != nil {
		t.Fatalf("next writer: %v", err)
	}
	if time.Now().Before(ld.rec.Until) {
		t.Fatalf("the next writer took the lease before the dead holder's time (%v)", ld.rec.Until)
	}
	if ln.rec.Owner != next.st.owner || !ln.rec.Until.After(ld.rec.Until) {
		t.Fatalf("next writer got %+v after the dead holder's %+v", ln.rec, ld.rec)
	}
	if err := next.st.release(ctx, ln, false, 0); err != nil {
		t.Fatal(err)
	}
}

// A manifest writer that stalled past its lease between listing the
// commits and writing them finds out when it renews the lease just before
// the write: while another process holds it, or after another wrote a
// manifest of more commits and gave it back, it does not write; a writer
// whose lease is still its own, or whose listing is as long, writes.
func TestStalledManifestWriterDoesNotWrite(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := statesOn(ctx, t)
	const ackWait = 300 * time.Millisecond
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := &server{st: open(), cfg: Config{AckWait: ackWait}, log: quiet}
	b := &server{st: open(), cfg: Config{AckWait: time.Minute}, log: quiet}
	wroteFive := func(t *testing.T) { // b writes a manifest of 5 commits
		lb, err := b.manifestLease(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.st.release(ctx, lb, false, 5); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name        string
		other       func(t *testing.T) // what b does while a stalls
		listed      int
		held, write bool
	}{
		{"no stall", nil, 3, true, true},
		{"another holds it", func(t *testing.T) {
			if _, err := b.manifestLease(ctx); err != nil {
				t.Fatal(err)
			}
		}, 3, false, false},
		{"another wrote more and gave it back", wroteFive, 3, true, false},
		{"another wrote as many and gave it back", wroteFive, 5, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := a.manifestLease(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if tc.other != nil {
				poll.Until(t, "a's lease to pass its time", 10*time.Second, func() bool { return time.Now().After(l.rec.Until) })
				tc.other(t)
			}
			nl, held, write, err := a.renewManifestLease(ctx, l, tc.listed)
			if err != nil || held != tc.held || write != tc.write {
				t.Fatalf("renew: held %v, write %v, err %v; want held %v, write %v", held, write, err, tc.held, tc.write)
			}
			// Leave the lease free for the next case.
			owner := a
			if !held {
				owner = b
				if nl, err = b.st.acquire(ctx, b.st.manifestKey(), time.Minute); err != nil {
					t.Fatal(err)
				}
			}
			if err := owner.st.release(ctx, nl, false, 0); err != nil {
				t.Fatal(err)
			}
		})
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
