package shard

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// ImageMode is where a set's rows carry their prompt images.
type ImageMode string

// Image modes.
const (
	// ImagesFiles writes each distinct image once as a file beside the
	// shards, "<set>/images/<sha256>.png" (ImagePath), listed in the
	// manifest with its size and SHA-256; rows name it in images.path. The
	// default: a set is complete on its own, and a screenshot shown by the
	// G rows of its step and the next step's rows is stored once.
	ImagesFiles ImageMode = "files"
	// ImagesEmbed puts the PNG bytes into every row (images.bytes): each
	// file stands alone, at the price of every screenshot being stored in
	// each row that shows it (about 2G times per screenshot in step mode).
	ImagesEmbed ImageMode = "embed"
	// ImagesStore writes references only: the images stay in the blob
	// store the rows were made from, which a reader of the set needs.
	ImagesStore ImageMode = "store"
)

// ImageModes lists the image modes, the default first.
var ImageModes = []ImageMode{ImagesFiles, ImagesEmbed, ImagesStore}

const imageModesText = "files, embed or store"

// Valid reports whether m is one of ImageModes.
func (m ImageMode) Valid() bool { return slices.Contains(ImageModes, m) }

// ImagesDir is the folder of a set's image files, relative to its manifest.
const ImagesDir = "images"

// ImagePath is the path of the image file with the given SHA-256 relative
// to the set's manifest: "images/<sha256>.png".
func ImagePath(sha256Hex string) string { return ImagesDir + "/" + sha256Hex + ".png" }

// ImageFile is one image file of a set (ImagesFiles).
type ImageFile struct {
	// Path is relative to the manifest's folder (ImagePath).
	Path string `json:"path"`
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// SHA256 is the lower-case hex SHA-256 of the file: the image's
	// reference (images.sha256).
	SHA256 string `json:"sha256"`
}

// mergeImages returns the distinct image files of a and b, sorted by path.
func mergeImages(a, b []ImageFile) []ImageFile {
	out := append(slices.Clone(a), b...)
	slices.SortFunc(out, func(x, y ImageFile) int { return cmp.Compare(x.Path, y.Path) })
	return slices.CompactFunc(out, func(x, y ImageFile) bool { return x.Path == y.Path })
}

// maxKnownImages bounds the images a Writer remembers as stored.
const maxKnownImages = 1 << 17

// PutImages stores the images of rows that carry bytes as the set's image
// files (ImagePath under the set's prefix) and makes the rows name them:
// each image gets its Path and loses its Bytes. Each distinct image is
// stored once: not at all when this writer stored it before or the bucket
// holds it already with its size; otherwise by an atomic, checksummed Put
// (the local bucket fsyncs it). Several processes storing the same image
// write the same bytes under the same name, so the result is the same.
// The bytes must have their SHA-256; an image that does not is refused.
//
// PutImages is safe for concurrent use and does not hold the writer: the
// handlers call it before Add, which then takes only rows whose files are
// stored, so every file a shard names is in the bucket before the shard
// (and the commit record after it) is.
func (w *Writer) PutImages(ctx context.Context, rows []Row) error {
	// The distinct images, stored concurrently (each Put waits for its
	// fsync or its upload: one at a time, a trajectory's screenshots
	// would wait for each other's).
	var todo []*Image
	seen := map[string]bool{}
	for i := range rows {
		for k := range rows[i].Images {
			if im := &rows[i].Images[k]; im.Bytes != nil && !seen[im.SHA256] {
				seen[im.SHA256] = true
				todo = append(todo, im)
			}
		}
	}
	sizes := make([]int64, len(todo))
	errs := make([]error, len(todo))
	sem := make(chan struct{}, putImagesAtOnce)
	var wg sync.WaitGroup
	for j, im := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() { // owned: waited for below
			defer func() { <-sem; wg.Done() }()
			sizes[j], errs[j] = w.putImage(ctx, im.SHA256, im.Bytes)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	done := make(map[string]int64, len(todo))
	for j, im := range todo {
		done[im.SHA256] = sizes[j]
	}
	for i := range rows {
		for k := range rows[i].Images {
			if im := &rows[i].Images[k]; im.Bytes != nil {
				im.Bytes, im.Path, im.stored = nil, ImagePath(im.SHA256), done[im.SHA256]
			}
		}
	}
	return nil
}

// putImagesAtOnce bounds the image files one PutImages call stores at
// once.
const putImagesAtOnce = 8

// putImage stores one image file unless it is known to be stored.
func (w *Writer) putImage(ctx context.Context, sha string, data []byte) (int64, error) {
	size := int64(len(data))
	w.imgMu.Lock()
	known := w.known[sha] == size
	w.imgMu.Unlock()
	if known {
		return size, nil
	}
	if got := blob.SumSHA256(data); got != sha {
		return 0, fmt.Errorf("shard: image %s: its bytes have SHA-256 %s: %w", sha, got, blob.ErrChecksumMismatch)
	}
	key := w.key(ImagePath(sha))
	info, err := w.cfg.Bucket.Stat(ctx, key)
	if err != nil || info.Size != size || (info.SHA256 != "" && info.SHA256 != sha) {
		if err != nil && !errors.Is(err, blob.ErrNotFound) {
			return 0, fmt.Errorf("shard: image %s: %w", key, err)
		}
		if _, err := w.cfg.Bucket.Put(ctx, key, bytes.NewReader(data), size, blob.PutOptions{ContentType: "image/png", SHA256: sha}); err != nil {
			return 0, fmt.Errorf("shard: image %s: %w", key, err)
		}
	}
	w.imgMu.Lock()
	if len(w.known) >= maxKnownImages {
		clear(w.known)
	}
	w.known[sha] = size
	w.imgMu.Unlock()
	return size, nil
}

// ErrImageNotInSet is returned by ReadImage for an image the set does not
// carry (written with ImagesStore, or before schema version 3): it is in
// the blob store the set was made from.
var ErrImageNotInSet = errors.New("image not carried by the set (neither embedded nor an image file)")

// maxImageBytes bounds an image file ReadImage reads.
const maxImageBytes = 256 << 20

// ReadImage returns the bytes of a row's image from the set at prefix in
// b: its embedded bytes, or its image file (Path, resolved against the
// manifest's folder); either must have the image's SHA-256 (an error
// wrapping blob.ErrChecksumMismatch otherwise). An image the set
// does not carry gives an error wrapping ErrImageNotInSet (read it from
// the blob store), a missing file one wrapping blob.ErrNotFound.
func ReadImage(ctx context.Context, b blob.Bucket, prefix string, im Image) ([]byte, error) {
	if im.Bytes != nil {
		if got := blob.SumSHA256(im.Bytes); got != im.SHA256 {
			return nil, fmt.Errorf("shard: embedded image has SHA-256 %s, want %s: %w", got, im.SHA256, blob.ErrChecksumMismatch)
		}
		return im.Bytes, nil
	}
	key, err := imageKey(prefix, im)
	if err != nil {
		return nil, err
	}
	data, err := readLimited(ctx, b, key, maxImageBytes)
	if err != nil {
		return nil, fmt.Errorf("shard: image %s: %w", im.SHA256, err)
	}
	if got := blob.SumSHA256(data); got != im.SHA256 {
		return nil, fmt.Errorf("shard: image file %s has SHA-256 %s, want %s: %w", key, got, im.SHA256, blob.ErrChecksumMismatch)
	}
	return data, nil
}

// imageKey is the key of a row's image file in the set at prefix: its
// Path resolved against the manifest's folder.
func imageKey(prefix string, im Image) (string, error) {
	if im.Path == "" {
		return "", fmt.Errorf("shard: image %s: %w", im.SHA256, ErrImageNotInSet)
	}
	if err := checkRelPath(im.Path); err != nil {
		return "", fmt.Errorf("shard: image %s: %w", im.SHA256, err)
	}
	if p := strings.Trim(prefix, "/"); p != "" {
		return p + "/" + im.Path, nil
	}
	return im.Path, nil
}

// LocalImage returns the path of a row's image file in a set whose bucket
// is on this machine (blob.LocalFiler), checked like ReadImage checks it:
// for a copy that reads nothing twice (a hard link). ok is false, with no
// error, when there is no such file to link: the image is embedded, not
// carried by the set, or the bucket is not local.
func LocalImage(ctx context.Context, b blob.Bucket, prefix string, im Image) (path string, ok bool, err error) {
	lf, local := b.(blob.LocalFiler)
	if !local || im.Bytes != nil || im.Path == "" {
		return "", false, nil
	}
	key, err := imageKey(prefix, im)
	if err != nil {
		return "", false, err
	}
	path, _, err = lf.LocalFile(ctx, key)
	if err != nil {
		return "", false, fmt.Errorf("shard: image %s: %w", im.SHA256, err)
	}
	n, sum, err := hashLocal(ctx, path)
	switch {
	case err != nil:
		return "", false, fmt.Errorf("shard: image %s: %w", im.SHA256, err)
	case n > maxImageBytes:
		return "", false, fmt.Errorf("shard: image %s: %s: larger than %d bytes", im.SHA256, key, int64(maxImageBytes))
	case sum != im.SHA256:
		return "", false, fmt.Errorf("shard: image file %s has SHA-256 %s, want %s: %w", key, sum, im.SHA256, blob.ErrChecksumMismatch)
	}
	return path, true, nil
}
