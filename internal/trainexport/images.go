package trainexport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path"
	"path/filepath"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/shard"
)

// imageWriter writes each distinct screenshot of an export once, as
// images/<sha256>.png under the export's folder.
type imageWriter struct {
	dir     string      // the export's folder
	store   *blob.Store // where images not embedded in the rows are read
	written map[string]string
	files   []File // the images written, in order
}

func newImageWriter(dir string, store *blob.Store) *imageWriter {
	return &imageWriter{dir: dir, store: store, written: map[string]string{}}
}

// ImagePath is the path of an image in an export, relative to its folder.
func ImagePath(sha string) string { return path.Join(ImageDir, sha+".png") }

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

// bytes returns an image's PNG bytes: embedded in the row, or from the
// blob store.
func (w *imageWriter) bytes(ctx context.Context, im shard.Image) ([]byte, error) {
	if im.Bytes != nil {
		return im.Bytes, nil
	}
	if w.store == nil {
		return nil, fmt.Errorf("image %s is not embedded and no blob store was given", im.SHA256)
	}
	b, err := w.store.GetBytes(ctx, im.SHA256)
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
