package ledger

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// VMEventsVersion is the schema version of the VM events document.
const VMEventsVersion = 1

// VMEvents is what the VM pool did during one rollout invocation of a run:
// its VMs' start and reset spans, and their failures and quarantines. It is
// kept in the blob store under VMEventsKey (not in the ledger's KV bucket:
// a long run has more spans than a KV value holds); rollout rewrites it
// while it runs and at its end, and `rollout report` merges the documents
// of all invocations of a run. docs/contracts.md describes it.
type VMEvents struct {
	SchemaVersion int    `json:"schema_version"`
	Run           string `json:"run"`
	// Invocation is when this rollout invocation started; Written when the
	// document was last written, Final whether the invocation had ended
	// then (false: it was written while running, and a killed rollout
	// leaves it so).
	Invocation time.Time `json:"invocation"`
	Written    time.Time `json:"written_at"`
	Final      bool      `json:"final"`
	Spans      []VMSpan  `json:"spans"`
	Events     []VMEvent `json:"events"`
}

// VMSpan kinds.
const (
	SpanStart = "start" // Backend.Start and the first health check
	SpanReset = "reset" // Backend.Reset (revert to the snapshot) and its health check
)

// VMSpan is one start or reset of a VM: from the pool's starting or
// resetting event to the VM's next ready or failed event. End is zero when
// the span had not ended when the document was written; Err is the
// failure that ended it ("" when the VM became ready).
type VMSpan struct {
	VM    string    `json:"vm"`
	Kind  string    `json:"kind"`
	Start time.Time `json:"start"`
	End   time.Time `json:"end,omitzero"`
	Err   string    `json:"error,omitempty"`
}

// VMEvent kinds (the pool's event kinds).
const (
	VMFailed      = "failed"      // a start, reset, health check or leased episode failed
	VMQuarantined = "quarantined" // the VM was taken out of rotation
	VMLockLost    = "lock-lost"   // the VM's lock was lost; the pool let the VM go
)

// VMEvent is one failure or quarantine of a VM.
type VMEvent struct {
	VM   string    `json:"vm"`
	Kind string    `json:"kind"`
	Time time.Time `json:"time"`
	Err  string    `json:"error,omitempty"`
}

// VMEventsPrefix is the blob store prefix of a run's VM events documents
// (the run's name escaped into one token, bus.KeyToken).
func VMEventsPrefix(run string) string { return "runs/" + bus.KeyToken(run) + "/vm-events/" }

// VMEventsKey is the blob store key of the VM events document of the
// invocation of run that started at invocation.
func VMEventsKey(run string, invocation time.Time) string {
	return VMEventsPrefix(run) + invocation.UTC().Format("20060102T150405.000000000Z") + ".json"
}

// DecodeVMEvents decodes a VM events document, refusing a schema version
// newer than this build knows.
func DecodeVMEvents(b []byte) (*VMEvents, error) {
	var d VMEvents
	if err := json.Unmarshal(b, &d); err != nil {
		return nil, fmt.Errorf("VM events document: %w", err)
	}
	if d.SchemaVersion < 1 || d.SchemaVersion > VMEventsVersion {
		return nil, fmt.Errorf("VM events document: schema version %d, this build reads 1 to %d", d.SchemaVersion, VMEventsVersion)
	}
	return &d, nil
}
