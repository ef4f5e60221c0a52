package bus

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// WorkStream is the work-queue stream that holds the planned episodes of
// rollout runs shared by several hosts: one message per episode on
// WorkSubject(run), removed when a host acknowledges it (the episode's
// trajectory is published and recorded in the ledger).
const WorkStream = "CODA_WORK"

// WorkSubject is the subject of a run's planned episodes:
// "coda.work.<run key token>" (KeyToken, so any run name is one token).
func WorkSubject(run string) string { return SubjectPrefix + ".work." + KeyToken(run) }

// WorkStreamConfig is the configuration of WorkStream: work-queue
// retention (a message lives until one consumer acknowledges it), file
// storage, t's replicas and de-duplication window (hosts enqueueing the
// same plan store each episode once), no age limit, and new messages
// refused rather than old ones dropped when a limit is reached.
func (t Topology) WorkStreamConfig() jetstream.StreamConfig {
	return jetstream.StreamConfig{
		Name:        WorkStream,
		Description: "codapipe rollout work queue: planned episodes of shared runs (coda.work.<run>)",
		Subjects:    []string{SubjectPrefix + ".work.>"},
		Retention:   jetstream.WorkQueuePolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    max(t.Replicas, 1),
		Duplicates:  t.Duplicates,
		Discard:     jetstream.DiscardNew,
	}
}

// EnsureWorkStream creates WorkStream when it is missing (as
// EnsureTopology does for the other streams) and returns it.
func (b *Bus) EnsureWorkStream(ctx context.Context, t Topology) (jetstream.Stream, error) {
	cfg := t.WorkStreamConfig()
	if _, err := b.ensureStream(ctx, t, cfg); err != nil {
		return nil, fmt.Errorf("bus: ensure stream %s: %w", WorkStream, err)
	}
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.js.Stream(cctx, WorkStream)
	if err != nil {
		return nil, fmt.Errorf("bus: stream %s: %w", WorkStream, err)
	}
	return s, nil
}
