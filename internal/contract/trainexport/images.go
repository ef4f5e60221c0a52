package trainexport

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// imageWriter writes each distinct screenshot of an export once, as
// images/<sha256>.png under the export's folder. The files are written in
// the background, imagesAtOnce at a time (creating many small files one
// after another was most of an export's time); wait returns once all are
// written, before the manifest that lists them.
type imageWriter struct {
	dir    string      // the export's folder
	set    blob.Bucket // the shard set's bucket and prefix: its embedded images and image files
	prefix string
	store  *blob.Store // where images the set does not carry are read (nil: none)

	written map[string]string // by SHA-256: the path, relative to dir
	slots   chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	files   []File // the images written, sorted by path once wait returns
	err     error  // the first failure
}

// imagesAtOnce bounds the image files an export writes at once.
const imagesAtOnce = 8

func newImageWriter(dir string, set blob.Bucket, prefix string, store *blob.Store) *imageWriter {
	return &imageWriter{dir: dir, set: set, prefix: prefix, store: store, written: map[string]string{}, slots: make(chan struct{}, imagesAtOnce)}
}

// ImagePath is the path of an image in an export, relative to its folder:
// the layout of a shard set's image files (shard.ImagePath).
func ImagePath(sha string) string { return shard.ImagePath(sha) }

// has reports whether an earlier row wrote (or is writing) the image.
func (w *imageWriter) has(sha string) bool {
	_, ok := w.written[sha]
	return ok
}

// write starts writing the image unless an earlier row did, and returns
// its path relative to the export's folder. A failure (the bytes missing,
// or not of the image's SHA-256: a damaged screenshot never reaches a
// trainer) is returned by this or a later call, or by wait.
func (w *imageWriter) write(ctx context.Context, im shard.Image) (string, error) {
	if err := w.failed(); err != nil {
		return "", err
	}
	if p, ok := w.written[im.SHA256]; ok {
		return p, nil
	}
	rel := ImagePath(im.SHA256)
	w.written[im.SHA256] = rel
	select {
	case w.slots <- struct{}{}:
	case <-ctx.Done():
		return "", ctx.Err()
	}
	w.wg.Add(1)
	go func() { // owned by w: wait waits for it
		defer func() { <-w.slots; w.wg.Done() }()
		f, err := w.writeOne(ctx, im, rel)
		w.mu.Lock()
		defer w.mu.Unlock()
		if err != nil {
			w.err = cmp.Or(w.err, err)
			return
		}
		w.files = append(w.files, f)
	}()
	return rel, nil
}

// writeOne writes one image's file: a hard link to the set's image file
// when the set is on this machine's file system, else a copy of its bytes.
func (w *imageWriter) writeOne(ctx context.Context, im shard.Image, rel string) (File, error) {
	dst := filepath.Join(w.dir, filepath.FromSlash(rel))
	src, ok, err := shard.LocalImage(ctx, w.set, w.prefix, im)
	if err != nil {
		return File{}, fmt.Errorf("image %s: %w", im.SHA256, err)
	}
	if ok {
		if n, err := linkFile(src, dst); err == nil {
			return File{Path: rel, Bytes: n, SHA256: im.SHA256}, nil
		}
		// Another file system, or links not allowed: copy.
	}
	b, err := w.bytes(ctx, im)
	if err != nil {
		return File{}, err
	}
	if err := writeFile(dst, b); err != nil {
		return File{}, fmt.Errorf("image %s: %w", im.SHA256, err)
	}
	return File{Path: rel, Bytes: int64(len(b)), SHA256: im.SHA256}, nil
}

func (w *imageWriter) failed() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// wait waits for the images being written and returns the first failure.
func (w *imageWriter) wait() error {
	w.wg.Wait()
	slices.SortFunc(w.files, func(a, b File) int { return cmp.Compare(a.Path, b.Path) })
	return w.failed()
}

// bytes returns an image's PNG bytes, checked against its SHA-256: the
// set's own copy (embedded in the row, or its image file), or, for a set
// that only references its images, the blob store's.
func (w *imageWriter) bytes(ctx context.Context, im shard.Image) ([]byte, error) {
	b, err := shard.ReadImage(ctx, w.set, w.prefix, im)
	switch {
	case errors.Is(err, shard.ErrImageNotInSet) && w.store == nil:
		return nil, fmt.Errorf("image %s is not in the set and no blob store was given", im.SHA256)
	case errors.Is(err, shard.ErrImageNotInSet):
		b, err = w.store.GetBytes(ctx, im.SHA256) // checked by the store
	}
	if err != nil {
		return nil, fmt.Errorf("image %s: %w", im.SHA256, err)
	}
	return b, nil
}

// writeFile writes a file through a ".partial" file renamed into place,
// synced first, so that a file under its final name is always whole.
func writeFile(name string, b []byte) error {
	f, err := os.OpenFile(name+".partial", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, blob.FilePerm)
	if err != nil {
		return err
	}
	_, err = f.Write(b)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(name+".partial", name)
	}
	if err != nil {
		os.Remove(name + ".partial")
	}
	return err
}

// linkFile makes name a hard link to the file src (through a ".partial"
// name renamed into place, like writeFile) and returns its size.
func linkFile(src, name string) (int64, error) {
	os.Remove(name + ".partial")
	if err := os.Link(src, name+".partial"); err != nil {
		return 0, err
	}
	fi, err := os.Stat(name + ".partial")
	if err == nil {
		err = os.Rename(name+".partial", name)
	}
	if err != nil {
		os.Remove(name + ".partial")
		return 0, err
	}
	return fi.Size(), nil
}
