package ledger

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// Ledger writes go through a short outage: the server stops, writes are
// made meanwhile, and they land once it is back (retried with backoff);
// each record is written once with the value asked for.
func TestLedgerWritesRetryThroughAnOutage(t *testing.T) {
	srv := natstest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, l := openLedger(ctx, t, bus.Config{URL: srv.URL(), Timeout: time.Second, Logger: slog.New(slog.DiscardHandler)})
	l.timeout = time.Second
	l.SetRetryBudget(30 * time.Second)
	srv.Shutdown()
	errs := make(chan error, 3)
	go func() { errs <- l.MarkDone(ctx, "r", EpisodeKey{"A", 0}, Record{ID: "t-a", Steps: 3}, true) }()
	go func() { errs <- l.MarkDone(ctx, "r", EpisodeKey{"B", 1}, Record{ID: "t-b", Steps: 4}, false) }()
	go func() { errs <- l.Finish(ctx, "r", time.Now()) }()
	time.Sleep(1500 * time.Millisecond) // the writes fail and are retried meanwhile
	srv.Restart()
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatalf("write across the outage: %v", err)
		}
	}
	done, err := l.Done(ctx, "r", []string{"A", "B"})
	if err != nil {
		t.Fatal(err)
	}
	if done[EpisodeKey{"A", 0}].ID != "t-a" || done[EpisodeKey{"B", 1}].ID != "t-b" || len(done) != 2 {
		t.Errorf("records after the outage: %+v", done)
	}
	if rec, ok, err := l.Published(ctx, "r", EpisodeKey{"A", 0}); err != nil || !ok || rec.Steps != 3 {
		t.Errorf("Published(A/0) = %+v, %v, %v", rec, ok, err)
	}
	if _, ok, err := l.Published(ctx, "r", EpisodeKey{"C", 0}); err != nil || ok {
		t.Errorf("Published(C/0) = %v, %v; want not published", ok, err)
	}
	if fin, err := l.Finished(ctx, "r"); err != nil || !fin {
		t.Errorf("Finished = %v, %v", fin, err)
	}
}
