package trainexport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/shard"
)

// imageWriter writes each distinct screenshot of an export once, as
// images/<sha256>.png under the export's folder.
type imageWriter struct {
	dir     string      // the export's folder
	set     blob.Bucket // the shard set's bucket and prefix: its embedded images and image files
	prefix  string
	store   *blob.Store // where images the set does not carry are read (nil: none)
	written map[string]string
	files   []File // the images written, in order
}

func newImageWriter(dir string, set blob.Bucket, prefix string, store *blob.Store) *imageWriter {
	return &imageWriter{dir: dir, set: set, prefix: prefix, store: store, written: map[string]string{}}
}

// ImagePath is the path of an image in an export, relative to its folder:
// the layout of a shard set's image files (shard.ImagePath).
func ImagePath(sha string) string { return shard.ImagePath(sha) }

// write writes the image unless an earlier row wrote it, and returns its
// path relative to the export's folder. The bytes are checked against the
// image's SHA-256, so a damaged screenshot never reaches a trainer.
func (w *imageWriter) write(ctx context.Context, im shard.Image) (string, error) {
	if p, ok := w.written[im.SHA256]; ok {
		return p, nil
	}
	b, err := w.bytes(ctx, im)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	if got := hex.EncodeToString(sum[:]); got != im.SHA256 {
		return "", fmt.Errorf("image %s: its bytes have SHA-256 %s: %w", im.SHA256, got, blob.ErrChecksumMismatch)
	}
	rel := ImagePath(im.SHA256)
	if err := writeFile(filepath.Join(w.dir, filepath.FromSlash(rel)), b); err != nil {
		return "", fmt.Errorf("image %s: %w", im.SHA256, err)
	}
	w.written[im.SHA256] = rel
	w.files = append(w.files, File{Path: rel, Bytes: int64(len(b)), SHA256: im.SHA256})
	return rel, nil
}

// bytes returns an image's PNG bytes: the set's own copy (embedded in the
// row, or its image file), or, for a set that only references its images,
// the blob store's.
func (w *imageWriter) bytes(ctx context.Context, im shard.Image) ([]byte, error) {
	b, err := shard.ReadImage(ctx, w.set, w.prefix, im)
	switch {
	case errors.Is(err, shard.ErrImageNotInSet) && w.store == nil:
		return nil, fmt.Errorf("image %s is not in the set and no blob store was given", im.SHA256)
	case errors.Is(err, shard.ErrImageNotInSet):
		b, err = w.store.GetBytes(ctx, im.SHA256)
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
