package judge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// VoteBucket is the JetStream key-value bucket of the vote cache.
const VoteBucket = "CODA_JUDGE_VOTES"

// DefaultVoteTTL is how long a cached call is kept: as long as the raw
// stream keeps trajectories (after that no redelivery can ask for it).
const DefaultVoteTTL = 30 * 24 * time.Hour

// Call is one answered judge call as the cache keeps it: enough to count
// the vote again without asking the model.
type Call struct {
	Raw        string    `json:"raw"`
	Model      string    `json:"model"`
	Endpoint   string    `json:"endpoint"`
	Resolution string    `json:"resolution"`
	LatencyMS  int64     `json:"latency_ms"`
	At         time.Time `json:"at"`
	// Choices and Choice: the call's n and this answer's choice index,
	// when the call asked for several answers (traj.Vote.Choices).
	Choices int `json:"choices,omitempty"`
	Choice  int `json:"choice,omitempty"`
	// FinishReason is the server's finish_reason for the answer ("stop",
	// "length": cut at max_tokens); empty when it gave none.
	FinishReason string `json:"finish_reason,omitempty"`
	// MaxTokens is the call's max_tokens when it was not the policy's
	// (the call made again after a truncated answer).
	MaxTokens int `json:"max_tokens,omitempty"`
}

// Cache keeps every answered judge call, keyed by trajectory, judge
// version, vote and attempt, so that a redelivered trajectory never asks
// the model again for an answer it already had.
type Cache interface {
	// Get returns the call stored under key, or ok false.
	Get(ctx context.Context, key string) (c Call, ok bool, err error)
	// Put stores the call under key.
	Put(ctx context.Context, key string, c Call) error
}

// CallKey is the cache key of attempt a (1-based) of vote v of trajectory
// id under judge version ver.
func CallKey(id, ver string, v, a int) string {
	return fmt.Sprintf("%s.%s.v%d.a%d", bus.KeyToken(id), bus.KeyToken(ver), v, a)
}

// KVCache is the Cache on a JetStream key-value bucket.
type KVCache struct {
	kv      jetstream.KeyValue
	bus     *bus.Bus
	timeout time.Duration
}

// OpenCache creates (with t's replicas) or opens the vote cache bucket,
// whose entries expire after ttl (0: DefaultVoteTTL).
func OpenCache(ctx context.Context, b *bus.Bus, t bus.Topology, ttl time.Duration) (*KVCache, error) {
	if ttl <= 0 {
		ttl = DefaultVoteTTL
	}
	kv, err := b.EnsureKeyValue(ctx, t, bus.KeyValueConfig(VoteBucket, "codapipe judge: every answered judge call, by trajectory.version.vote.attempt", ttl))
	if err != nil {
		return nil, fmt.Errorf("judge: vote cache: %w", err)
	}
	return &KVCache{kv: kv, bus: b, timeout: 10 * time.Second}, nil
}

// Get implements Cache.
func (c *KVCache) Get(ctx context.Context, key string) (Call, bool, error) {
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	e, err := c.kv.Get(cctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Call{}, false, nil
	}
	if err != nil {
		return Call{}, false, fmt.Errorf("judge: vote cache: get %s: %w", key, err)
	}
	var call Call
	if err := json.Unmarshal(e.Value(), &call); err != nil {
		// A damaged entry is asked again rather than trusted.
		return Call{}, false, nil
	}
	return call, true, nil
}

// Put implements Cache.
func (c *KVCache) Put(ctx context.Context, key string, call Call) error {
	b, err := json.Marshal(call)
	if err != nil {
		return err
	}
	if err := c.bus.CheckPayload(len(b)); err != nil {
		return fmt.Errorf("judge: vote cache: put %s: %w", key, err) // permanent: the same answer is as large again
	}
	cctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if _, err := c.kv.Put(cctx, key, b); err != nil {
		return fmt.Errorf("judge: vote cache: put %s: %w", key, err)
	}
	return nil
}
