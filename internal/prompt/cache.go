package prompt

import (
	"context"
	"errors"
	"sync"

	"github.com/codapipe/codapipe/internal/blob"
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
// t records none, and the blob store's errors (blob.ErrNotFound,
// blob.ErrChecksumMismatch) when the set is missing or damaged, so that
// callers can tell bad input from a failing store.
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
// set cannot be had at all — the trajectory records none, or the blob
// store does not have it or holds damaged bytes — rather than that the
// store failed for now: trying again cannot help.
func Unavailable(err error) bool {
	return errors.Is(err, ErrNotRecorded) || errors.Is(err, blob.ErrNotFound) || errors.Is(err, blob.ErrChecksumMismatch)
}
