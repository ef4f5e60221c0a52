// Package export is the resumable export of a built dataset folder to a blob store, with the
// manifest uploaded last as the commit marker.
//
// A dataset folder holds a manifest.json whose top-level "files" list names every other file of
// the set with its size and SHA-256:
//
//	{"files": [{"path": "train.jsonl", "bytes": 1234, "sha256": "9f86d0…"}, ...], ...}
//
// Dir copies the listed files to a blob.Bucket under a key prefix and then uploads manifest.json.
// A reader that finds prefix/manifest.json can rely on every object it lists being present with
// the listed size and SHA-256: the manifest is written only after every object has been verified,
// and a manifest that would cover objects about to be replaced is deleted before the first of
// them is touched. A re-run after an interruption (a cancelled context, a killed process, a lost
// connection) uploads only the objects that are missing or differ; a re-run over a complete
// export uploads nothing. docs/storage.md ("Exporting a dataset folder") has the rules in full.
package export

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// ManifestName is the name of the manifest in the dataset folder and, under the prefix, at the
// destination.
const ManifestName = "manifest.json"

// DefaultParallel is how many files are uploaded (and objects checked) at once when
// Options.Parallel is zero.
const DefaultParallel = 4

// BucketConfig returns cfg with Checksum "crc32c" when cfg sets none (an explicit Checksum is
// kept): the setting the export is measured with. Open the destination with it:
//
//	dst, err := blob.OpenBucket(ctx, url, export.BucketConfig(blob.Config{Logger: log}))
//
// The blob store's default, "crc64nvme", gives multipart uploads a full-object checksum, which
// MinIO pays for: 5–10 % of the export's rate in BenchmarkExport, 10 % for one 64 MiB upload
// (docs/performance.md). The export does not need it: each part still carries a CRC32C that the
// server verifies, the content's SHA-256 is checked against the manifest as the file is read
// for the upload (PutOptions.SHA256) and recorded on the object, and Dir checks every object's
// recorded size and SHA-256 before it writes the manifest. Single PUTs carry their SHA-256 as
// the request checksum whatever the setting.
func BucketConfig(cfg blob.Config) blob.Config {
	if cfg.Checksum == "" {
		cfg.Checksum = "crc32c"
	}
	return cfg
}

// Options are the optional settings of Dir.
type Options struct {
	// Parallel is how many files are uploaded at once, and how many objects are checked at once
	// (default DefaultParallel). Each S3 upload of a file larger than the bucket's part size also
	// sends up to blob.Config.UploadThreads parts at once and holds them in memory: at the
	// defaults, 4 files × 4 parts × 16 MiB = 256 MiB at most. 4 is the best trade of rate and
	// memory in BenchmarkExport (docs/performance.md).
	Parallel int
	// HashLocal hashes every local file before anything is sent, so that a file whose content
	// does not match the manifest's SHA-256 fails the export with nothing uploaded. It reads the
	// whole dataset once more. Without it the hash of each uploaded file is checked by the upload
	// itself (PutOptions.SHA256; a mismatch fails that upload, stores nothing and fails the
	// export before the manifest is written), and files that are already at the destination are
	// not read at all.
	HashLocal bool
	// Progress, when set, is called once the destination has been checked (FilesDone counts the
	// files already there), as the files are read for upload (every progressStep bytes), after
	// each file uploaded (Path set), and once the manifest is written (Committed). Calls are
	// serialized, never concurrent; the callback must return quickly, since uploads wait for it.
	Progress func(Progress)
}

// Progress is a snapshot of a running export, passed to Options.Progress.
type Progress struct {
	// Path is the file just uploaded; "" in the other events.
	Path string
	// Files is the number of files in the manifest (manifest.json not counted); FilesDone how
	// many of them are at the destination: Skipped (already there) + Uploaded (by this run).
	Files, FilesDone, Skipped, Uploaded int
	// Bytes is how many bytes of files this run has sent so far (files uploaded, and what has
	// been read of the large files being uploaded; it goes back when an attempt fails and is
	// retried); BytesToUpload how many it has to send in all (the sizes of the files not already
	// at the destination).
	Bytes, BytesToUpload int64
	// Committed is set in the last event, after manifest.json has been written (or found current).
	Committed bool
}

// Stats summarises an export. Dir returns it with its error too, counting what was done before
// the failure.
type Stats struct {
	// Files is the number of files in the manifest (manifest.json not counted); TotalBytes their
	// size in bytes.
	Files      int
	TotalBytes int64
	// Uploaded is how many files this run uploaded, Skipped how many were already at the
	// destination with the manifest's size and SHA-256.
	Uploaded, Skipped int
	// Bytes is how many bytes of files this run uploaded (manifest.json not counted).
	Bytes int64
	// ManifestDeleted reports that the destination's manifest.json was deleted before any
	// object was replaced: it differed from the local one, or it was current but objects it
	// lists were missing or differed.
	ManifestDeleted bool
	// ManifestUploaded reports that manifest.json was written; false when the destination's
	// already equalled the local one and every object verified (a no-op export), or on error.
	ManifestUploaded bool
	// Elapsed is the wall time of the export.
	Elapsed time.Duration
}

// file is one entry of the manifest, validated.
type file struct {
	path   string // slash-separated, relative to the folder
	local  string // path on disk
	key    string // object key at the destination
	size   int64
	sha256 string // lower-case hex
}

// Dir exports the dataset folder dir to dst under prefix ("" for the bucket's root; slashes
// around it are ignored): every file listed in dir/manifest.json to the key prefix/path, then
// manifest.json itself to prefix/manifest.json.
//
// In order: the manifest is read and checked against the folder (paths relative and clean,
// no duplicates, every file present with the listed size; with Options.HashLocal, the listed
// SHA-256 too), and nothing is sent when it does not hold. A destination manifest.json that
// differs from the local one is deleted. Every object is checked with Stat: one with the
// listed size and a recorded SHA-256 equal to the listed one is skipped, every other one is
// uploaded with PutOptions.SHA256, so that the upload is verified (PutFile, or Put of the open
// file for files above 16 MiB; see upload), Options.Parallel at a time, in path order — after deleting the destination's manifest.json if it was current, so
// that it never covers an object being replaced. Then every object is checked again (size and
// SHA-256 equal to the manifest's) and only then manifest.json is uploaded, last.
//
// An upload that fails for a reason a new attempt may not meet again (damaged in transit, a
// network or server error that outlasted the client's retries) is tried up to 3 times. Any other
// error stops the export: uploads in flight are cancelled, nothing more is started, and
// manifest.json is not written, so a re-run resumes where it stopped. Errors name the file:
// "export: data/x.png: ...". Network calls run under the bucket's deadlines
// (blob.Config.OpTimeout for Stat and Delete, TransferTimeout for each upload); cancel ctx to
// stop the whole export.
func Dir(ctx context.Context, dir string, dst blob.Bucket, prefix string, opts Options) (st Stats, err error) {
	start := time.Now()
	defer func() { st.Elapsed = time.Since(start) }()
	parallel := opts.Parallel
	if parallel <= 0 {
		parallel = DefaultParallel
	}
	prefix = strings.Trim(prefix, "/")
	if prefix != "" {
		if err := blob.ValidateKey(prefix); err != nil {
			return st, fmt.Errorf("export: prefix %q: %w", prefix, err)
		}
	}

	raw, files, err := readManifest(dir, prefix)
	if err != nil {
		return st, err
	}
	st.Files = len(files)
	for _, f := range files {
		st.TotalBytes += f.size
	}
	if err := checkLocal(ctx, files, opts.HashLocal, parallel); err != nil {
		return st, err
	}
	mkey := objectKey(prefix, ManifestName)
	msum := sha256Hex(raw)

	// The destination's manifest: keep it only when it is the local one.
	current := false
	remote, err := dst.Stat(ctx, mkey)
	switch {
	case errors.Is(err, blob.ErrNotFound):
	case err != nil:
		return st, fmt.Errorf("export: %s: %w", ManifestName, err)
	case remote.Size == int64(len(raw)) && remote.SHA256 == msum:
		current = true
	default:
		if err := dst.Delete(ctx, mkey); err != nil {
			return st, fmt.Errorf("export: %s: deleting the destination's outdated manifest: %w", ManifestName, err)
		}
		st.ManifestDeleted = true
	}

	// Which objects are missing or differ.
	need := make([]bool, len(files))
	err = forEach(ctx, len(files), parallel, func(ctx context.Context, i int) error {
		ok, err := matches(ctx, dst, files[i], false)
		need[i] = !ok
		return err
	})
	if err != nil {
		return st, stopped(err, &st)
	}
	var todo []file
	var toUpload int64
	for i, f := range files {
		if need[i] {
			todo = append(todo, f)
			toUpload += f.size
		}
	}
	st.Skipped = len(files) - len(todo)
	if len(todo) > 0 && current {
		// The manifest would cover objects while they are being replaced.
		if err := dst.Delete(ctx, mkey); err != nil {
			return st, fmt.Errorf("export: %s: deleting the destination's manifest before repairing its objects: %w", ManifestName, err)
		}
		current = false
		st.ManifestDeleted = true
	}

	var mu sync.Mutex // guards st and sent, and serializes opts.Progress
	var sent, reported int64
	report := func(p string, committed bool) {
		if opts.Progress != nil {
			opts.Progress(Progress{Path: p, Files: st.Files, FilesDone: st.Skipped + st.Uploaded, Skipped: st.Skipped,
				Uploaded: st.Uploaded, Bytes: sent, BytesToUpload: toUpload, Committed: committed})
		}
		reported = sent
	}
	count := func(n int64) {
		mu.Lock()
		defer mu.Unlock()
		sent += n
		if n > 0 && sent-reported >= progressStep {
			report("", false)
		}
	}
	report("", false)

	err = forEach(ctx, len(todo), parallel, func(ctx context.Context, i int) error {
		f := todo[i]
		if err := upload(ctx, dst, f, count); err != nil {
			return err
		}
		mu.Lock()
		defer mu.Unlock()
		st.Uploaded++
		st.Bytes += f.size
		report(f.path, false)
		return nil
	})
	if err != nil {
		return st, stopped(err, &st)
	}

	// Every object, once more, as the destination has it now.
	err = forEach(ctx, len(files), parallel, func(ctx context.Context, i int) error {
		f := files[i]
		ok, err := matches(ctx, dst, f, true)
		if err != nil {
			return err
		}
		if !ok {
			return fmt.Errorf("export: %s: the object %s at %s does not have the manifest's size (%d bytes) and sha256 (%s) after the upload; was it changed by someone else?", f.path, f.key, dst, f.size, f.sha256)
		}
		return nil
	})
	if err != nil {
		return st, stopped(err, &st)
	}

	if !current {
		info, err := dst.Put(ctx, mkey, bytes.NewReader(raw), int64(len(raw)), blob.PutOptions{SHA256: msum, ContentType: "application/json"})
		if err != nil {
			return st, stopped(fmt.Errorf("export: %s: %w", ManifestName, err), &st)
		}
		if info.SHA256 != msum {
			return st, fmt.Errorf("export: %s: stored with sha256 %s, want %s", ManifestName, info.SHA256, msum)
		}
		st.ManifestUploaded = true
	}
	report("", true)
	return st, nil
}

// stopped adds to err how far the export got when it was cancelled.
func stopped(err error, st *Stats) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		if !strings.HasPrefix(err.Error(), "export: ") {
			err = fmt.Errorf("export: %w", err)
		}
		return fmt.Errorf("%w (stopped after uploading %d of %d files; manifest not written, a re-run resumes)", err, st.Uploaded, st.Files)
	}
	return err
}

// matches reports whether the object of f is at dst with f's size and SHA-256. An object whose
// SHA-256 was not recorded (uploaded by another tool, or a local file system without extended
// attributes) does not match, unless read is set: then it is read and hashed.
func matches(ctx context.Context, dst blob.Bucket, f file, read bool) (bool, error) {
	info, err := dst.Stat(ctx, f.key)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("export: %s: %w", f.path, err)
	case info.Size != f.size:
		return false, nil
	case info.SHA256 != "":
		return info.SHA256 == f.sha256, nil
	case !read:
		return false, nil
	}
	rc, _, err := dst.Get(ctx, f.key)
	if err != nil {
		if errors.Is(err, blob.ErrNotFound) {
			return false, nil
		}
		return false, fmt.Errorf("export: %s: %w", f.path, err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		return false, fmt.Errorf("export: %s: reading back: %w", f.path, err)
	}
	return n == f.size && hex.EncodeToString(h.Sum(nil)) == f.sha256, nil
}

// forEach calls fn(ctx, i) for i in [0, n), at most parallel at once, each index once. The first
// error cancels the context passed to the other calls, no new call starts, and forEach returns
// that error once every call has returned; when ctx is cancelled it returns ctx's cause.
func forEach(ctx context.Context, n, parallel int, fn func(ctx context.Context, i int) error) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(parallel, n) {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(ctx, i); err != nil {
					cancel(err)
					return
				}
			}
		})
	}
	wg.Wait()
	return context.Cause(ctx)
}

// objectKey is the destination key of a file.
func objectKey(prefix, p string) string {
	if prefix == "" {
		return p
	}
	return prefix + "/" + p
}

// contentType is the Content-Type recorded on S3 for the dataset's usual files ("" gives
// application/octet-stream).
func contentType(p string) string {
	switch strings.ToLower(path.Ext(p)) {
	case ".json":
		return "application/json"
	case ".jsonl":
		return "application/jsonl"
	case ".parquet":
		return "application/vnd.apache.parquet"
	case ".png":
		return "image/png"
	case ".jpg", ".jpeg":
		return "image/jpeg"
	case ".txt", ".md":
		return "text/plain; charset=utf-8"
	}
	return ""
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// hashFile returns the hex SHA-256 and size of the file at p, stopping when ctx is done.
func hashFile(ctx context.Context, p string) (string, int64, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", 0, err
	}
	defer f.Close()
	h := sha256.New()
	buf := make([]byte, 1<<20)
	var n int64
	for {
		if err := ctx.Err(); err != nil {
			return "", n, err
		}
		k, err := f.Read(buf)
		h.Write(buf[:k])
		n += int64(k)
		if err == io.EOF {
			return hex.EncodeToString(h.Sum(nil)), n, nil
		}
		if err != nil {
			return "", n, err
		}
	}
}

// localPath is the path on disk of the manifest's slash-separated p in dir.
func localPath(dir, p string) string { return filepath.Join(dir, filepath.FromSlash(p)) }
