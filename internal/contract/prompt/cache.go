package prompt

import (
	"context"
	"errors"
	"sync"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Cache fetches the prompt sets trajectories record from the blob store,
// once per hash, for the consumers that render finished trajectories
// again (the shard writer, the SFT builder). It is safe for concurrent
// use.
type Cache struct {
	blobs Blobs

	mu   sync.Mutex
	sets map[string]*Set
}

// NewCache returns an empty cache over blobs.
func NewCache(blobs Blobs) *Cache { return &Cache{blobs: blobs, sets: map[string]*Set{}} }

// Of returns the prompt set t records. Its errors wrap ErrNotRecorded when
// t records none, ErrInvalid when the stored set does not parse, and the
// blob store's errors (blob.ErrNotFound, blob.ErrChecksumMismatch), so
// that callers can tell bad input from a failing store (Unavailable).
func (c *Cache) Of(ctx context.Context, t *traj.Trajectory) (*Set, error) {
	c.mu.Lock()
	p, ok := c.sets[t.Prompts]
	c.mu.Unlock()
	if ok {
		return p, nil
	}
	p, err := Fetch(ctx, c.blobs, t.Prompts)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.sets[t.Prompts] = p
	c.mu.Unlock()
	return p, nil
}

// Unavailable reports whether err, from Cache.Of or Fetch, says the prompt
// set cannot be had at all — the trajectory records none, the blob store
// does not have it, or what it holds is not a prompt set — rather than
// that the store failed: trying again cannot help. A checksum mismatch
// (blob.ErrChecksumMismatch) is not among them: a read cut short reports
// one too, so callers decide for themselves.
func Unavailable(err error) bool {
	return errors.Is(err, ErrNotRecorded) || errors.Is(err, blob.ErrNotFound) || errors.Is(err, ErrInvalid)
}
