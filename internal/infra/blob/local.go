package blob

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"iter"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"
)

// staleTemp is the age after which List and Open remove temporary files left by crashed writers.
const staleTemp = 24 * time.Hour

// localBucket stores objects as files under root; key "a/b" is the file root/a/b.
//
// Writes go to a temporary file ".tmp-*" in the target directory (or, for Store.Put, in
// root/.tmp/), which is fsynced, renamed over the final name and followed by an fsync of the
// directory, so a reader or a crash sees either the old or the new content. Concurrent writers
// of one key each rename a complete file; the last rename wins.
type localBucket struct {
	root string
	log  *slog.Logger
}

func openLocal(dir string, cfg Config) (*localBucket, error) {
	b := &localBucket{root: dir, log: cfg.logger()}
	if err := os.MkdirAll(b.spoolDir(), DirPerm); err != nil {
		return nil, fmt.Errorf("blob: open %s: %w", b, err)
	}
	// Fail now, not at the first Put, when the directory is not writable.
	f, err := os.CreateTemp(b.spoolDir(), "probe-*")
	if err != nil {
		return nil, fmt.Errorf("blob: open %s: directory not writable: %w", b, err)
	}
	f.Close()
	os.Remove(f.Name())
	b.removeStale(b.spoolDir(), true)
	return b, nil
}

func (b *localBucket) String() string { return Location{Scheme: "file", Dir: b.root}.String() }

func (b *localBucket) spoolDir() string { return filepath.Join(b.root, tmpPrefix) }

func (b *localBucket) path(key string) string {
	return filepath.Join(b.root, filepath.FromSlash(key))
}

// removeStale deletes temporary files older than staleTemp in dir, best effort: every regular
// file in the spool directory (all), only ".tmp*" files elsewhere.
func (b *localBucket) removeStale(dir string, all bool) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || (!all && !strings.HasPrefix(e.Name(), tmpPrefix)) {
			continue
		}
		if fi, err := e.Info(); err == nil && time.Since(fi.ModTime()) > staleTemp {
			if os.Remove(filepath.Join(dir, e.Name())) == nil {
				b.log.Debug("blob: removed stale temporary file", "path", filepath.Join(dir, e.Name()))
			}
		}
	}
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 256<<10); return &b }}

// writerOnly hides *os.File's ReadFrom so that io.CopyBuffer uses our larger buffer.
type writerOnly struct{ io.Writer }

func copyBuffered(dst io.Writer, src io.Reader) (int64, error) {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	return io.CopyBuffer(writerOnly{dst}, src, *bp)
}

// createTemp makes the directory of key's file and a temporary file in it,
// next to the final name (List and Open remove one left behind after a day).
func (b *localBucket) createTemp(key string) (*os.File, error) {
	dir := filepath.Dir(b.path(key))
	if err := mkdirAllSync(dir); err != nil {
		return nil, err
	}
	return os.CreateTemp(dir, tmpPrefix+"-*")
}

func (b *localBucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts PutOptions) (Info, error) {
	if err := checkPut(key, opts); err != nil {
		return Info{}, opError("put", key, err)
	}
	if err := ctx.Err(); err != nil {
		return Info{}, opError("put", key, err)
	}
	f, err := b.createTemp(key)
	if err != nil {
		return Info{}, opError("put", key, err)
	}
	hr := newHashReader(ctx, r, size, opts.SHA256)
	if _, err := copyBuffered(f, hr); err != nil {
		f.Close()
		os.Remove(f.Name())
		return Info{}, opError("put", key, err)
	}
	info, err := b.commit(f, key, hr.n, hr.sum())
	if err != nil {
		return Info{}, opError("put", key, err)
	}
	return info, nil
}

func (b *localBucket) PutFile(ctx context.Context, key, path string, opts PutOptions) (Info, error) {
	return putFile(ctx, b, key, path, opts)
}

// commit makes the complete temporary file f the object key: it records sum, fsyncs, renames f
// over the final name and fsyncs the directory. f is closed, and removed on failure.
func (b *localBucket) commit(f *os.File, key string, size int64, sum string) (Info, error) {
	tmp := f.Name()
	fail := func(err error) (Info, error) {
		f.Close()
		os.Remove(tmp)
		return Info{}, err
	}
	setSHA256Attr(f, sum)
	if err := Publish(f); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	fi, err := f.Stat()
	if err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		os.Remove(tmp)
		return Info{}, err
	}
	final := b.path(key)
	if err := os.Rename(tmp, final); err != nil {
		os.Remove(tmp)
		return Info{}, err
	}
	if err := syncDir(filepath.Dir(final)); err != nil {
		return Info{}, err
	}
	return Info{Key: key, Size: size, SHA256: sum, ModTime: fi.ModTime()}, nil
}

// mkdirAllSync is os.MkdirAll that also fsyncs the parent of every
// directory it creates, so that an object committed into a new directory
// survives a crash with its directory entries.
func mkdirAllSync(dir string) error {
	if fi, err := os.Stat(dir); err == nil && fi.IsDir() {
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir {
		if err := mkdirAllSync(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, DirPerm); err != nil {
		if fi, serr := os.Stat(dir); serr != nil || !fi.IsDir() {
			return err
		}
		return nil // made by a concurrent Put
	}
	return syncDir(parent)
}

// syncDir fsyncs a directory so that a rename into it survives a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// newSpool implements spooler: a temporary file in root/.tmp, on the same file system as the
// objects so that commitSpool is a rename.
func (b *localBucket) newSpool() (*os.File, error) {
	return os.CreateTemp(b.spoolDir(), "spool-*")
}

// commitSpool implements spooler.
func (b *localBucket) commitSpool(ctx context.Context, key string, f *os.File, size int64, sum string) (Info, error) {
	if err := ctx.Err(); err != nil {
		f.Close()
		os.Remove(f.Name())
		return Info{}, err
	}
	if err := mkdirAllSync(filepath.Dir(b.path(key))); err != nil {
		f.Close()
		os.Remove(f.Name())
		return Info{}, err
	}
	return b.commit(f, key, size, sum)
}

// open opens the object's file and returns it with its Info; not-found and directories are
// ErrNotFound.
func (b *localBucket) open(key string) (*os.File, Info, error) {
	if err := ValidateKey(key); err != nil {
		return nil, Info{}, err
	}
	f, err := os.Open(b.path(key))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil, Info{}, ErrNotFound
		}
		return nil, Info{}, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, Info{}, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, Info{}, ErrNotFound
	}
	return f, Info{Key: key, Size: fi.Size(), SHA256: getSHA256Attr(f), ModTime: fi.ModTime()}, nil
}

func (b *localBucket) Get(ctx context.Context, key string) (io.ReadCloser, Info, error) {
	if err := ctx.Err(); err != nil {
		return nil, Info{}, opError("get", key, err)
	}
	f, info, err := b.open(key)
	if err != nil {
		return nil, Info{}, opError("get", key, err)
	}
	return newVerifyingReadCloser(f, "get", key, info.Size, info.SHA256, nil), info, nil
}

func (b *localBucket) Stat(ctx context.Context, key string) (Info, error) {
	if err := ctx.Err(); err != nil {
		return Info{}, opError("stat", key, err)
	}
	f, info, err := b.open(key)
	if err != nil {
		return Info{}, opError("stat", key, err)
	}
	f.Close()
	return info, nil
}

func (b *localBucket) Delete(ctx context.Context, key string) error {
	if err := ValidateKey(key); err != nil {
		return opError("delete", key, err)
	}
	if err := ctx.Err(); err != nil {
		return opError("delete", key, err)
	}
	p := b.path(key)
	fi, err := os.Lstat(p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return opError("delete", key, err)
	}
	if fi.IsDir() {
		return nil // a directory is not an object; never remove it
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return opError("delete", key, err)
	}
	return syncDirQuiet(filepath.Dir(p))
}

func syncDirQuiet(dir string) error {
	if err := syncDir(dir); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

func (b *localBucket) List(ctx context.Context, prefix string) iter.Seq2[Info, error] {
	return func(yield func(Info, error) bool) {
		if err := validatePrefix(prefix); err != nil {
			yield(Info{}, opError("list", prefix, err))
			return
		}
		b.walk(ctx, prefix[:strings.LastIndexByte(prefix, '/')+1], prefix, yield)
	}
}

// walk yields the objects under the directory dirRel ("" or a key prefix ending in "/") whose
// keys start with prefix, in key order. Entries are sorted by name with "/" appended to
// directories, which is the byte order of the full keys ("a/b.txt" < "a/b/c" because '.' < '/').
// It returns false when the listing must stop.
func (b *localBucket) walk(ctx context.Context, dirRel, prefix string, yield func(Info, error) bool) bool {
	if err := ctx.Err(); err != nil {
		yield(Info{}, opError("list", prefix, err))
		return false
	}
	dir := filepath.Join(b.root, filepath.FromSlash(dirRel))
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return true
		}
		yield(Info{}, opError("list", prefix, err))
		return false
	}
	type entry struct {
		sortKey string
		e       fs.DirEntry
	}
	sorted := make([]entry, 0, len(entries))
	stale := false
	for _, e := range entries {
		name := e.Name()
		if strings.HasPrefix(name, tmpPrefix) {
			stale = stale || !e.IsDir()
			continue
		}
		k := name
		if e.IsDir() {
			k += "/"
		}
		sorted = append(sorted, entry{k, e})
	}
	if stale {
		b.removeStale(dir, false)
	}
	slices.SortFunc(sorted, func(x, y entry) int { return strings.Compare(x.sortKey, y.sortKey) })
	for _, s := range sorted {
		rel := dirRel + s.sortKey
		if s.e.IsDir() {
			if strings.HasPrefix(rel, prefix) || strings.HasPrefix(prefix, rel) {
				if !b.walk(ctx, rel, prefix, yield) {
					return false
				}
			}
			continue
		}
		if !s.e.Type().IsRegular() || !strings.HasPrefix(rel, prefix) || ValidateKey(rel) != nil {
			continue
		}
		fi, err := s.e.Info()
		if err != nil {
			continue // removed since ReadDir
		}
		if !yield(Info{Key: rel, Size: fi.Size(), ModTime: fi.ModTime()}, nil) {
			return false
		}
	}
	return true
}
