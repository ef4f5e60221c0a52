package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/vmpool"
)

// vmEventsEvery is how often a running rollout rewrites its VM events
// document, so that a killed rollout leaves most of them.
const vmEventsEvery = 30 * time.Second

// vmRecorder collects the pool's start and reset spans, failures and
// quarantines of one rollout invocation (ledger.VMEvents) and writes them
// to the blob store. Its event method is given to vmpool.WithEvents: the
// pool calls it with its own lock held, from its goroutines; the recorder
// takes its own lock, so save may run at any time.
type vmRecorder struct {
	store *blob.Store
	key   string
	log   *slog.Logger

	mu   sync.Mutex
	doc  ledger.VMEvents
	open map[string]int // VM → index in doc.Spans of its span in progress
	// retry is, per VM whose start or reset failed and is not quarantined,
	// the span the pool's retry makes (it emits no new starting or
	// resetting event): recorded when it ends.
	retry map[string]ledger.VMSpan
}

func newVMRecorder(store *blob.Store, run string, invocation time.Time, log *slog.Logger) *vmRecorder {
	return &vmRecorder{
		store: store, key: ledger.VMEventsKey(run, invocation), log: log,
		doc: ledger.VMEvents{SchemaVersion: ledger.VMEventsVersion, Run: run, Invocation: invocation.UTC(),
			Spans: []ledger.VMSpan{}, Events: []ledger.VMEvent{}},
		open: map[string]int{}, retry: map[string]ledger.VMSpan{},
	}
}

// event records one pool event.
func (r *vmRecorder) event(ev vmpool.Event) {
	r.mu.Lock()
	defer r.mu.Unlock()
	errText := ""
	if ev.Err != nil {
		errText = ev.Err.Error()
	}
	// end ends the VM's span in progress; after a failure the pool retries
	// the start or reset (unless it quarantines the VM), which is a span
	// from the failure to the next ready or failed event.
	end := func() {
		var kind string
		if rs, ok := r.retry[ev.VM]; ok {
			rs.End, rs.Err = ev.Time.UTC(), errText
			r.doc.Spans = append(r.doc.Spans, rs)
			delete(r.retry, ev.VM)
			kind = rs.Kind
		} else if i, ok := r.open[ev.VM]; ok {
			r.doc.Spans[i].End, r.doc.Spans[i].Err = ev.Time.UTC(), errText
			delete(r.open, ev.VM)
			kind = r.doc.Spans[i].Kind
		} else {
			return
		}
		if ev.Kind == vmpool.EventFailed {
			r.retry[ev.VM] = ledger.VMSpan{VM: ev.VM, Kind: kind, Start: ev.Time.UTC()}
		}
	}
	switch ev.Kind {
	case vmpool.EventStarting, vmpool.EventResetting:
		delete(r.retry, ev.VM)
		end() // not expected: a span in progress ends where the next begins
		kind := ledger.SpanReset
		if ev.Kind == vmpool.EventStarting {
			kind = ledger.SpanStart
		}
		r.open[ev.VM] = len(r.doc.Spans)
		r.doc.Spans = append(r.doc.Spans, ledger.VMSpan{VM: ev.VM, Kind: kind, Start: ev.Time.UTC()})
	case vmpool.EventChecking:
		// A health check of an idle VM: its ready or failed event is not
		// the end of a start or reset.
		delete(r.open, ev.VM)
		delete(r.retry, ev.VM)
	case vmpool.EventReady:
		end()
	case vmpool.EventFailed:
		end()
		r.doc.Events = append(r.doc.Events, ledger.VMEvent{VM: ev.VM, Kind: ledger.VMFailed, Time: ev.Time.UTC(), Err: errText})
	case vmpool.EventQuarantined:
		delete(r.retry, ev.VM) // no retry of a quarantined VM
		r.doc.Events = append(r.doc.Events, ledger.VMEvent{VM: ev.VM, Kind: ledger.VMQuarantined, Time: ev.Time.UTC(), Err: errText})
	case vmpool.EventLockLost:
		end() // a start or reset under way is cancelled and not retried
		r.doc.Events = append(r.doc.Events, ledger.VMEvent{VM: ev.VM, Kind: ledger.VMLockLost, Time: ev.Time.UTC(), Err: errText})
	}
}

// save writes the document as it stands (final: the invocation has ended).
func (r *vmRecorder) save(ctx context.Context, final bool) error {
	r.mu.Lock()
	doc := r.doc
	doc.Spans = slices.Clone(r.doc.Spans)
	doc.Events = slices.Clone(r.doc.Events)
	r.mu.Unlock()
	doc.Written = time.Now().UTC()
	doc.Final = final
	body, err := json.Marshal(doc)
	if err != nil {
		return fmt.Errorf("rollout: VM events of run %q: %w", doc.Run, err)
	}
	if _, err := r.store.Bucket().Put(ctx, r.key, bytes.NewReader(body), int64(len(body)), blob.PutOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("rollout: write the VM events of run %q to %s: %w", doc.Run, r.key, err)
	}
	return nil
}

// keep rewrites the document every interval until ctx ends or stop is
// called; stop waits for the goroutine to return.
func (r *vmRecorder) keep(ctx context.Context, every time.Duration) (stop func()) {
	return bus.Every(ctx, every, func(ctx context.Context) {
		if err := r.save(ctx, false); err != nil && ctx.Err() == nil {
			r.log.Warn("rollout: could not write the VM events", "key", r.key, "err", err)
		}
	})
}

// finish writes the final document, also when ctx was cancelled (a stopped
// rollout), with a deadline of its own.
func (r *vmRecorder) finish(ctx context.Context) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := r.save(ctx, true); err != nil {
		r.log.Warn("rollout: could not write the VM events", "key", r.key, "err", err)
	}
}
