package blob

import (
	"context"
	"fmt"
)

// LocalFiler is implemented by buckets whose objects are files on this
// machine: the local backend. Readers of large objects (a shard set's
// files) read them in place instead of copying them out of the bucket.
type LocalFiler interface {
	// LocalFile returns the path of the object's file and its Info (the
	// SHA-256 the bucket recorded, or ""). The file is the object itself:
	// the caller only reads it, and checks its content itself, as Get's
	// reader would have. A missing object is an error wrapping ErrNotFound.
	LocalFile(ctx context.Context, key string) (string, Info, error)
}

var _ LocalFiler = (*localBucket)(nil)

func (b *localBucket) LocalFile(ctx context.Context, key string) (string, Info, error) {
	if err := ctx.Err(); err != nil {
		return "", Info{}, opError("open", key, err)
	}
	f, info, err := b.open(key)
	if err != nil {
		return "", Info{}, opError("open", key, err)
	}
	if err := f.Close(); err != nil {
		return "", Info{}, opError("open", key, fmt.Errorf("close: %w", err))
	}
	return b.path(key), info, nil
}
