package rollout

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/vmpool"
)

// TestVMRecorder feeds the recorder pool events, some from several
// goroutines while it saves, and reads the document back from the store.
func TestVMRecorder(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	rec := newVMRecorder(store, "run-a", t0, slog.New(slog.DiscardHandler))
	boom := errors.New("boom")
	for _, ev := range []vmpool.Event{
		{VM: "a", Kind: vmpool.EventStarting, Time: at(0)},
		{VM: "b", Kind: vmpool.EventStarting, Time: at(0)},
		{VM: "a", Kind: vmpool.EventReady, Time: at(2)},
		{VM: "b", Kind: vmpool.EventFailed, Time: at(3), Err: boom},
		{VM: "b", Kind: vmpool.EventReady, Time: at(5)}, // the pool's retry of the start
		{VM: "b", Kind: vmpool.EventResetting, Time: at(6)},
		{VM: "b", Kind: vmpool.EventFailed, Time: at(7), Err: boom},
		{VM: "b", Kind: vmpool.EventQuarantined, Time: at(7), Err: boom}, // no retry
		{VM: "a", Kind: vmpool.EventLeased, Time: at(6)},
		{VM: "a", Kind: vmpool.EventReleased, Time: at(9)},
		{VM: "a", Kind: vmpool.EventResetting, Time: at(9)},
		{VM: "a", Kind: vmpool.EventChecking, Time: at(10)},
	} {
		rec.event(ev)
	}
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 50 {
				rec.event(vmpool.Event{VM: "c", Kind: vmpool.EventResetting, Time: at(20)})
				rec.event(vmpool.Event{VM: "c", Kind: vmpool.EventReady, Time: at(21)})
			}
		})
	}
	wg.Go(func() {
		if err := rec.save(ctx, false); err != nil {
			t.Error(err)
		}
	})
	wg.Wait()
	rec.finish(ctx)

	body, err := blob.ReadAll(ctx, store.Bucket(), ledger.VMEventsKey("run-a", t0))
	if err != nil {
		t.Fatal(err)
	}
	doc, err := ledger.DecodeVMEvents(body)
	if err != nil {
		t.Fatal(err)
	}
	if !doc.Final || doc.Run != "run-a" || !doc.Invocation.Equal(t0) {
		t.Errorf("document %+v: want final, run-a, invocation %v", doc, t0)
	}
	count := map[string]int{}
	for _, s := range doc.Spans {
		count[s.VM+" "+s.Kind]++
	}
	if count["a start"] != 1 || count["b start"] != 2 || count["a reset"] != 1 || count["b reset"] != 1 || count["c reset"] != 200 {
		t.Errorf("spans per VM and kind %v", count)
	}
	want := []ledger.VMSpan{
		{VM: "a", Kind: ledger.SpanStart, Start: at(0), End: at(2)},
		{VM: "b", Kind: ledger.SpanStart, Start: at(0), End: at(3), Err: "boom"},
		{VM: "b", Kind: ledger.SpanStart, Start: at(3), End: at(5)},
		{VM: "b", Kind: ledger.SpanReset, Start: at(6), End: at(7), Err: "boom"},
		{VM: "a", Kind: ledger.SpanReset, Start: at(9)}, // cut by a's idle health check: stays open
	}
	for i, w := range want {
		if s := doc.Spans[i]; s.VM != w.VM || s.Kind != w.Kind || !s.Start.Equal(w.Start) || !s.End.Equal(w.End) || s.Err != w.Err {
			t.Errorf("span %d: %+v, want %+v", i, s, w)
		}
	}
	var failed, quarantined int
	for _, e := range doc.Events {
		switch e.Kind {
		case ledger.VMFailed:
			failed++
		case ledger.VMQuarantined:
			quarantined++
		}
	}
	if failed != 2 || quarantined != 1 || len(doc.Events) != 3 {
		t.Errorf("events %+v: want 2 failures and 1 quarantine of b", doc.Events)
	}
}
