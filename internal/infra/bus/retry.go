package bus

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/codapipe/codapipe/internal/infra/clock"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream API error codes that pass on their own: the cluster is
// electing a leader, a stream or consumer is moving, a peer is catching up.
var transientCodes = map[jetstream.ErrorCode]bool{
	10004: true, // JSClusterIncompleteErr: incomplete results
	10008: true, // JSClusterNotAvailErr: JetStream system temporarily unavailable
	10009: true, // JSClusterNotLeaderErr: cluster can not handle request
	10023: true, // JSInsufficientResourcesErr: a peer is missing
	10118: true, // JSStreamOfflineErr
	10194: true, // JSStreamOfflineReasonErrF
	10119: true, // JSConsumerOfflineErr
	10195: true, // JSConsumerOfflineReasonErrF
	10163: true, // JSStreamExpectedLastSeqPerSubjectNotReady
	10041: true, // JSRaftGeneralErrF
	// JSClusterNoPeersErrF: no suitable peers for placement — on a cluster
	// that is starting or has lost a node, the peers are not (yet) known to
	// be online; a real shortage (more replicas than nodes) ends with the
	// retry budget and this error.
	10005: true,
	// JSStreamDuplicateMessageConflict: a message with the same Msg-Id is
	// being stored (a cluster proposes it): asked again, the server answers
	// with the stored message's ack, marked duplicate.
	10158: true,
}

// IsTransient reports whether err, returned by a request to NATS, may pass
// if the same request is made again a little later: a timeout, no
// responders (a stream leader is being elected), a connection that is
// reconnecting, or a JetStream API error of a cluster in transition. A
// request with a message id (Publish) or a compare-and-swap (key-value
// Create/Update) may be repeated safely; callers retry only such requests.
// A cancelled or expired ctx of the caller is not transient (RetryTransient checks
// ctx itself).
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	switch {
	case errors.Is(err, nats.ErrTimeout),
		errors.Is(err, context.DeadlineExceeded), // the per-request deadline
		errors.Is(err, nats.ErrNoResponders),
		errors.Is(err, nats.ErrConnectionReconnecting),
		errors.Is(err, nats.ErrDisconnected),
		errors.Is(err, nats.ErrNoServers),
		errors.Is(err, jetstream.ErrNoStreamResponse),
		errors.Is(err, jetstream.ErrNoHeartbeat),
		errors.Is(err, jetstream.ErrConsumerLeadershipChanged),
		errors.Is(err, jetstream.ErrServerShutdown),
		errors.Is(err, jetstream.ErrAsyncPublishTimeout):
		return true
	}
	var api *jetstream.APIError
	if errors.As(err, &api) {
		return transientCodes[api.ErrorCode] || api.Code == 503
	}
	return false
}

// DefaultRetryBudget is how long RetryTransient keeps trying by default: longer
// than a JetStream leader election (a few seconds) and a short outage.
const DefaultRetryBudget = 2 * time.Minute

// ErrRetryBudget is wrapped by the error of RetryTransient when the budget was
// spent on transient errors.
var ErrRetryBudget = errors.New("retry budget spent")

// RetryTransient calls op until it returns nil or an error that is not transient
// (IsTransient), ctx ends, or budget (DefaultRetryBudget when ≤ 0) is
// spent, waiting between calls from 100 ms doubling to 5 s, with jitter.
// It returns op's last error, wrapped with ErrRetryBudget when the budget
// ran out. onRetry, when not nil, is called before each wait (for logs and
// metrics). Only idempotent operations may be retried.
func RetryTransient(ctx context.Context, budget time.Duration, op func(ctx context.Context) error, onRetry func(attempt int, err error)) error {
	if budget <= 0 {
		budget = DefaultRetryBudget
	}
	deadline := time.Now().Add(budget)
	wait := 100 * time.Millisecond
	for attempt := 1; ; attempt++ {
		err := op(ctx)
		if err == nil || !IsTransient(err) {
			return err
		}
		if ctx.Err() != nil {
			return err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return fmt.Errorf("%w after %d attempts over %s: %w", ErrRetryBudget, attempt, budget, err)
		}
		if onRetry != nil {
			onRetry(attempt, err)
		}
		d := min(wait/2+rand.N(wait/2+1), left)
		if clock.Sleep(ctx, d) != nil {
			return err
		}
		wait = min(2*wait, 5*time.Second)
	}
}
