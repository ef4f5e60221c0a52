package blob

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// FileMover is implemented by buckets that can store a local file by moving it into place instead
// of copying it: the local backend. Writers of large files (the shard writer) use it when the
// bucket has it and PutFile otherwise.
type FileMover interface {
	// MoveFile stores the local file at path under key like PutFile, and takes the file: after a
	// successful call path no longer exists. opts.SHA256 is required and is recorded as the
	// object's SHA-256 without re-reading the content, so the caller must have computed it over
	// exactly the bytes it wrote. The local backend fsyncs the file, renames it into place and
	// fsyncs the directory; when path is on another file system it falls back to PutFile (which
	// verifies opts.SHA256) and then removes path. When the call fails, path is left as it was
	// whenever that is possible.
	MoveFile(ctx context.Context, key, path string, opts PutOptions) (Info, error)
}

var _ FileMover = (*localBucket)(nil)

func (b *localBucket) MoveFile(ctx context.Context, key, path string, opts PutOptions) (Info, error) {
	if err := checkPut(key, opts); err != nil {
		return Info{}, opError("move", key, err)
	}
	if opts.SHA256 == "" {
		return Info{}, opError("move", key, errors.New("PutOptions.SHA256 is required"))
	}
	if err := ctx.Err(); err != nil {
		return Info{}, opError("move", key, err)
	}
	fi, err := os.Lstat(path)
	if err != nil {
		return Info{}, opError("move", key, err)
	}
	if !fi.Mode().IsRegular() {
		return Info{}, opError("move", key, fmt.Errorf("%s is not a regular file", path))
	}
	// Move the file to a temporary name next to its final one first, so that a crash in between
	// leaves a stale temporary file (removed by List and Open after a day), never a partial object.
	// createTemp reserves the unique name; the rename replaces the empty file.
	reserved, err := b.createTemp(key)
	if err != nil {
		return Info{}, opError("move", key, err)
	}
	reserved.Close()
	tmp := reserved.Name()
	if err := os.Rename(path, tmp); err != nil {
		os.Remove(tmp)
		if errors.Is(err, syscall.EXDEV) { // another file system: copy
			info, err := b.PutFile(ctx, key, path, opts)
			if err == nil {
				os.Remove(path)
			}
			return info, err
		}
		return Info{}, opError("move", key, err)
	}
	final := b.path(key)
	giveBack := func(err error) (Info, error) {
		if os.Rename(tmp, path) != nil {
			os.Remove(tmp)
		}
		return Info{}, opError("move", key, err)
	}
	f, err := os.Open(tmp)
	if err != nil {
		return giveBack(err)
	}
	setSHA256Attr(f, opts.SHA256)
	err = Publish(f) // a spool made by os.CreateTemp is 0600
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return giveBack(err)
	}
	if err := os.Rename(tmp, final); err != nil {
		return giveBack(err)
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return Info{}, opError("move", key, err)
	}
	return Info{Key: key, Size: fi.Size(), SHA256: opts.SHA256, ModTime: fi.ModTime()}, nil
}
