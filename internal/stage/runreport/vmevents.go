package runreport

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// VMEventDocs reads the run's VM events documents (ledger.VMEvents, one per
// rollout invocation) from the blob store, oldest invocation first.
func VMEventDocs(ctx context.Context, store *blob.Store, run string) ([]*ledger.VMEvents, error) {
	prefix := ledger.VMEventsPrefix(run)
	var docs []*ledger.VMEvents
	for info, err := range store.Bucket().List(ctx, prefix) {
		if err != nil {
			return nil, fmt.Errorf("run report: list %s in %s: %w", prefix, store, err)
		}
		if !strings.HasSuffix(info.Key, ".json") {
			continue
		}
		body, err := readKey(ctx, store, info.Key)
		if err != nil {
			return nil, fmt.Errorf("run report: read %s: %w", info.Key, err)
		}
		d, err := ledger.DecodeVMEvents(body)
		if err != nil {
			return nil, fmt.Errorf("run report: %s: %w", info.Key, err)
		}
		docs = append(docs, d)
	}
	slices.SortFunc(docs, func(a, b *ledger.VMEvents) int { return a.Invocation.Compare(b.Invocation) })
	return docs, nil
}

func readKey(ctx context.Context, store *blob.Store, key string) ([]byte, error) {
	rc, _, err := store.Bucket().Get(ctx, key)
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return io.ReadAll(rc)
}

// addVMEvents merges the documents into the VM figures and the timeline,
// and notes what they cannot show.
func (r *Report) addVMEvents(docs []*ledger.VMEvents) {
	if len(docs) == 0 {
		r.Notes = append(r.Notes, "no VM events recorded for the run (a run from before rollout recorded them, or one without a blob store): the timeline shows episodes and the environment errors they ended with, not VM resets, failures or quarantines.")
		return
	}
	r.VMs.EventDocuments = len(docs)
	r.VMs.Spans, r.VMs.Events = []ledger.VMSpan{}, []ledger.VMEvent{}
	perVM := map[string]*VMFigures{}
	for i := range r.VMs.PerVM {
		perVM[r.VMs.PerVM[i].VM] = &r.VMs.PerVM[i]
	}
	var added []string // VMs with events but no episode
	vm := func(name string) *VMFigures {
		if v := perVM[name]; v != nil {
			return v
		}
		added = append(added, name)
		v := &VMFigures{VM: name}
		perVM[name] = v
		return v
	}
	for _, d := range docs {
		if !d.Final {
			r.Notes = append(r.Notes, fmt.Sprintf("the VM events of the rollout invocation started %s were last written %s, before it ended (stopped or killed): its later resets, failures and quarantines are missing.",
				d.Invocation.UTC().Format(time.RFC3339), d.Written.UTC().Format(time.RFC3339)))
		}
		for _, s := range d.Spans {
			r.VMs.Spans = append(r.VMs.Spans, s)
			v := vm(s.VM)
			if s.Kind != ledger.SpanReset {
				continue
			}
			v.Resets++
			if s.End.After(s.Start) {
				v.ResetSeconds += s.End.Sub(s.Start).Seconds()
			}
		}
		for _, e := range d.Events {
			r.VMs.Events = append(r.VMs.Events, e)
			v := vm(e.VM)
			switch e.Kind {
			case ledger.VMFailed:
				v.Failures++
			case ledger.VMQuarantined:
				v.Quarantined++
			}
		}
	}
	if len(added) > 0 {
		for _, name := range added {
			r.VMs.PerVM = append(r.VMs.PerVM, *perVM[name])
		}
		slices.SortFunc(r.VMs.PerVM, func(a, b VMFigures) int { return strings.Compare(a.VM, b.VM) })
	}
}
