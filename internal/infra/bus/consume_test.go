package bus_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
)

// watchLog is a slog handler that closes seen the first time a record with
// message msg is logged.
type watchLog struct {
	msg  string
	seen chan struct{}
	once *atomic.Bool
}

func (w watchLog) Enabled(context.Context, slog.Level) bool { return true }
func (w watchLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == w.msg && w.once.CompareAndSwap(false, true) {
		close(w.seen)
	}
	return nil
}
func (w watchLog) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w watchLog) WithGroup(string) slog.Handler      { return w }

// A dead-letter copy that fails on the message's last delivery must not
// lose it: the next delivery, beyond MaxDeliver, dead-letters it without
// running the handler again.
func TestDeadLetterFailureOnLastDeliveryKeepsTheMessage(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	failed := watchLog{msg: "dead-letter publish failed; retrying the message later", seen: make(chan struct{}), once: new(atomic.Bool)}
	b := openWith(t, bus.Config{DataDir: dir, Timeout: 5 * time.Second, Logger: slog.New(failed)})
	publish(t, b, bus.Subject(bus.Raw, "A"), "m1", []byte("x"))
	// The dead-letter stream goes away during the last delivery and comes
	// back once the copy has failed.
	var calls atomic.Int32
	restored := make(chan error, 1)
	go func() { // owned by the test: ends when the failure is seen or the test ends
		select {
		case <-failed.seen:
			restored <- b.EnsureTopology(ctx, bus.DefaultTopology())
		case <-time.After(time.Minute):
			restored <- errors.New("the dead-letter copy never failed")
		}
	}()
	s := spec("dlq-fails")
	s.MaxDeliver, s.Drain, s.AckWait = 2, true, time.Second
	st, err := b.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
		if calls.Add(1) == 2 {
			if err := b.JetStream().DeleteStream(ctx, bus.StreamName(bus.Dead)); err != nil {
				t.Errorf("delete the dead-letter stream: %v", err)
			}
		}
		return bus.Retry(10*time.Millisecond, "not yet")
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := <-restored; err != nil {
		t.Fatal(err)
	}
	if n := calls.Load(); n != 2 {
		t.Errorf("handler ran %d times, want 2 (MaxDeliver), not again after the limit", n)
	}
	if st.Dead != 1 || st.Rejected != 2 {
		t.Errorf("stats %+v: want 2 rejections (one failed copy) and 1 dead letter", st)
	}
	dl := deadLetters(t, b, 1)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	if r := dl[0].Headers().Get(bus.HeaderDeadReason); !strings.Contains(r, "more than the limit of 2") {
		t.Errorf("dead reason %q does not say the limit was passed", r)
	}
}

// A handler that outlives the shutdown grace still gets its answer to the
// server: its work is done and must not be redone.
func TestAckAfterShutdownGraceReachesTheServer(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	publish(t, b, bus.Subject(bus.Raw, "A"), "m1", []byte("x"))
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := spec("late-ack")
	s.ShutdownGrace = 100 * time.Millisecond
	st, err := b.Consume(cctx, s, func(hctx context.Context, m *bus.Msg) bus.Result {
		cancel()
		<-hctx.Done() // the grace period is over
		return bus.Ack()
	})
	if err != nil {
		t.Fatal(err)
	}
	cons, err := b.JetStream().Consumer(ctx, bus.StreamName(bus.Raw), "late-ack")
	if err != nil {
		t.Fatal(err)
	}
	info, err := cons.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.Acked != 1 || info.AckFloor.Stream != 1 || info.NumAckPending != 0 {
		t.Errorf("stats %+v, server ack floor %d, %d awaiting ack: want the ack on the server", st, info.AckFloor.Stream, info.NumAckPending)
	}
}

// flakyClaims fails the first fail Gets as an unreachable store would.
type flakyClaims struct {
	*blob.Store
	fail atomic.Int32
}

func (f *flakyClaims) Get(ctx context.Context, sha string) (io.ReadCloser, error) {
	if f.fail.Add(-1) >= 0 {
		return nil, errors.New("dial tcp 10.0.0.9:9000: i/o timeout")
	}
	return f.Store.Get(ctx, sha)
}

// A claim store that is briefly unreachable delays a claim-checked
// message; a claim that is gone dead-letters it at once.
func TestClaimStoreErrors(t *testing.T) {
	tests := []struct {
		name      string
		fail      int32
		drop      bool // remove the blob after publishing
		wantCalls int32
		wantDead  int64
	}{
		{"unreachable twice, then handled", 2, false, 1, 0},
		{"blob gone: dead-lettered without retries", 0, true, 0, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			store, err := blob.Open(ctx, filepath.Join(dir, "blobs"), blob.Config{})
			if err != nil {
				t.Fatal(err)
			}
			fc := &flakyClaims{Store: store}
			fc.fail.Store(tt.fail)
			b := openWith(t, bus.Config{DataDir: dir, Claims: fc, Timeout: 5 * time.Second})
			ack, err := b.Publish(ctx, bus.Subject(bus.Raw, "A"), "big", make([]byte, 2<<20), nil)
			if err != nil || !ack.Claimed {
				t.Fatalf("publish: %+v, %v: want a claim check", ack, err)
			}
			if tt.drop {
				var keys []string
				for info, err := range store.List(ctx, "") {
					if err != nil {
						t.Fatal(err)
					}
					keys = append(keys, info.SHA256)
				}
				if len(keys) != 1 {
					t.Fatalf("blobs %v: want the one claim", keys)
				}
				if err := store.Delete(ctx, keys[0]); err != nil {
					t.Fatal(err)
				}
			}
			s := spec("claims")
			s.Drain = true
			var calls atomic.Int32
			st, err := b.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
				calls.Add(1)
				return bus.Ack()
			})
			if err != nil {
				t.Fatal(err)
			}
			if calls.Load() != tt.wantCalls || st.Dead != tt.wantDead {
				t.Errorf("handler calls %d, stats %+v: want %d calls and %d dead letters", calls.Load(), st, tt.wantCalls, tt.wantDead)
			}
			if tt.fail > 0 && st.Retried != int64(tt.fail) {
				t.Errorf("stats %+v: want %d retries for the unreachable store", st, tt.fail)
			}
		})
	}
}

// A long reason with line breaks, on a message near the payload limit,
// still makes a valid dead-letter copy.
func TestDeadLetterLongReasonNearPayloadLimit(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	body := make([]byte, int(b.MaxPayload())-(8<<10))
	ack, err := b.Publish(ctx, bus.Subject(bus.Raw, "A"), "m1", body, nil)
	if err != nil || ack.Claimed {
		t.Fatalf("publish: %+v, %v: want it inline", ack, err)
	}
	reason := "judge said:\r\n" + strings.Repeat("é", 16<<10)
	s := spec("long-reason")
	s.Drain = true
	st, err := b.Consume(ctx, s, func(context.Context, *bus.Msg) bus.Result { return bus.Reject(reason) })
	if err != nil {
		t.Fatal(err)
	}
	if st.Dead != 1 {
		t.Fatalf("stats %+v: want the message dead-lettered", st)
	}
	dl := deadLetters(t, b, 1)
	if len(dl) != 1 {
		t.Fatalf("%d dead letters, want 1", len(dl))
	}
	got := dl[0].Headers().Get(bus.HeaderDeadReason)
	if !strings.HasPrefix(got, "judge said: é") || !strings.HasSuffix(got, "…") || len(got) > 2<<10 {
		t.Errorf("dead reason %.40q… (%d bytes): want the start, cut to 2 KiB and marked", got, len(got))
	}
	if len(dl[0].Data()) != len(body) {
		t.Errorf("dead-letter body %d bytes, want %d", len(dl[0].Data()), len(body))
	}
}
