package export_test

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/export"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/minio/minio-go/v7"
)

const MiB = 1 << 20

// testPartSize is the S3 part size of the tests: the smallest S3 allows, so that a file of a few
// MiB already goes as a multipart upload.
const testPartSize = blob.MinPartSize

// spec is a file of a test dataset: path and size; the content is pseudo-random from the path.
type spec struct {
	path string
	size int64
}

// standardSet is the dataset of most tests: the SFT layout in miniature, an empty file, one
// file above the test part size (uploaded with PutFile, multipart on S3) and one above the size
// from which the export streams files (multipart on S3).
var standardSet = []spec{
	{"train.jsonl", 180 << 10},
	{"val.jsonl", 20 << 10},
	{"dataset_info.json", 700},
	{"images/chimerax/0001.png", 40 << 10},
	{"images/chimerax/0002.png", 55 << 10},
	{"images/kalgebra/0001.png", 30 << 10},
	{"images/empty.png", 0},
	{largeFile, blob.DefaultPartSize + 1*MiB},
	{midFile, 6 * MiB},
}

// largeFile and midFile are the files of standardSet above the size from which the export
// streams files and above the test part size.
const (
	largeFile = "parquet/train-00000-of-00001.parquet"
	midFile   = "parquet/val-00000-of-00001.parquet"
)

// dataset is a dataset folder written by writeDataset.
type dataset struct {
	dir   string
	files map[string]manifestFile // by path
}

type manifestFile struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// paths returns the dataset's file paths, sorted.
func (d *dataset) paths() []string {
	var ps []string
	for p := range d.files {
		ps = append(ps, p)
	}
	slices.Sort(ps)
	return ps
}

func (d *dataset) totalBytes() int64 {
	var n int64
	for _, f := range d.files {
		n += f.Bytes
	}
	return n
}

// content returns n pseudo-random bytes determined by seed.
func content(seed string, n int64) []byte {
	var s [32]byte
	h := sha256.Sum256([]byte(seed))
	copy(s[:], h[:])
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

func sumHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// writeDataset writes the files of specs (content seeded by path and version) and a
// manifest.json listing them in reverse order, with other top-level fields beside "files".
func writeDataset(t testing.TB, dir string, version string, specs []spec) *dataset {
	t.Helper()
	d := &dataset{dir: dir, files: map[string]manifestFile{}}
	var list []manifestFile
	for _, s := range specs {
		b := content(version+"/"+s.path, s.size)
		p := filepath.Join(dir, filepath.FromSlash(s.path))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
		f := manifestFile{Path: s.path, Bytes: s.size, SHA256: sumHex(b)}
		d.files[s.path] = f
		list = append([]manifestFile{f}, list...)
	}
	writeManifest(t, dir, map[string]any{
		"version": version,
		"counts":  map[string]int{"ChimeraX": 2, "KAlgebra": 1},
		"skipped": []any{},
		"files":   list,
	})
	return d
}

func writeManifest(t testing.TB, dir string, m any) {
	t.Helper()
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, export.ManifestName), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// dest is an empty destination of one backend.
type dest struct {
	bucket blob.Bucket
	// wire records the object names of upload requests (S3 only, else nil).
	wire *wire
	// client and s3Bucket reach the S3 bucket directly (S3 only); dir is the local directory
	// (local only).
	client   *minio.Client
	s3Bucket string
	dir      string
}

// backend makes fresh destinations of one kind.
type backend struct {
	name string
	open func(t *testing.T) *dest
}

// backends returns the local backend and a MinIO backend (one server for the calling test, a
// fresh bucket per destination, the bucket URL under the prefix "root").
func backends(t *testing.T) []backend {
	local := backend{name: "local", open: localDest}
	var srv *miniotest.Server
	if _, err := miniotest.Binary(); err == nil || os.Getenv("CI") == "true" {
		srv = miniotest.Start(t)
	}
	s3 := backend{name: "minio", open: func(t *testing.T) *dest {
		if srv == nil {
			miniotest.Start(t) // skips (MinIO not installed)
		}
		w := &wire{rt: srv.Transport(), keys: map[string]int{}}
		cfg := srv.Config()
		cfg.Transport = w
		cfg.PartSize = testPartSize
		bucket := srv.NewBucket(t)
		w.bucket = bucket
		b, err := blob.OpenBucket(context.Background(), "s3://"+bucket+"/root", cfg)
		if err != nil {
			t.Fatal(err)
		}
		return &dest{bucket: b, wire: w, client: srv.Client(t), s3Bucket: bucket}
	}}
	return []backend{local, s3}
}

// localDest opens an empty local destination.
func localDest(t *testing.T) *dest {
	dir := t.TempDir()
	b, err := blob.OpenBucket(context.Background(), dir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &dest{bucket: b, dir: dir}
}

// wire is an HTTP transport that records, per object name, the upload requests (PUT and POST:
// single PUTs, and the initiation, parts and completion of multipart uploads).
type wire struct {
	rt     http.RoundTripper
	bucket string
	mu     sync.Mutex
	keys   map[string]int
}

func (w *wire) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut || r.Method == http.MethodPost {
		if key, ok := strings.CutPrefix(r.URL.Path, "/"+w.bucket+"/"); ok {
			w.mu.Lock()
			w.keys[strings.TrimPrefix(key, "root/")]++
			w.mu.Unlock()
		}
	}
	return w.rt.RoundTrip(r)
}

// take returns the object names uploads were sent for since the last call, sorted.
func (w *wire) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var ks []string
	for k := range w.keys {
		ks = append(ks, k)
	}
	clear(w.keys)
	slices.Sort(ks)
	return ks
}

// recorder is a blob.Bucket that records the writes passed to the real bucket it wraps, in the
// order they start and end.
type recorder struct {
	blob.Bucket
	mu     sync.Mutex
	events []event
	// afterPut, when set, is called after each successful Put or PutFile with the key.
	afterPut func(key string)
}

type event struct {
	op  string // "start", "end" (of a successful Put or PutFile), "fail", "delete"
	key string
}

func (r *recorder) record(op, key string) {
	r.mu.Lock()
	r.events = append(r.events, event{op, key})
	r.mu.Unlock()
}

func (r *recorder) Put(ctx context.Context, key string, rd io.Reader, size int64, opts blob.PutOptions) (blob.Info, error) {
	r.record("start", key)
	info, err := r.Bucket.Put(ctx, key, rd, size, opts)
	r.done(key, err)
	return info, err
}

func (r *recorder) PutFile(ctx context.Context, key, path string, opts blob.PutOptions) (blob.Info, error) {
	r.record("start", key)
	info, err := r.Bucket.PutFile(ctx, key, path, opts)
	r.done(key, err)
	return info, err
}

func (r *recorder) done(key string, err error) {
	if err != nil {
		r.record("fail", key)
		return
	}
	r.record("end", key)
	if r.afterPut != nil {
		r.afterPut(key)
	}
}

func (r *recorder) Delete(ctx context.Context, key string) error {
	r.record("delete", key)
	return r.Bucket.Delete(ctx, key)
}

// take returns the events since the last call.
func (r *recorder) take() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	ev := r.events
	r.events = nil
	return ev
}

// stored returns the keys whose Put or PutFile succeeded in evs, sorted.
func stored(evs []event) []string {
	var ks []string
	for _, e := range evs {
		if e.op == "end" {
			ks = append(ks, e.key)
		}
	}
	slices.Sort(ks)
	return ks
}

// checkManifestLast checks that the upload of the manifest started after every other write had
// ended, and that nothing happened after it.
func checkManifestLast(t *testing.T, evs []event, manifestKey string) {
	t.Helper()
	start := slices.Index(evs, event{"start", manifestKey})
	if start < 0 {
		t.Fatalf("the manifest %s was not uploaded; events %v", manifestKey, evs)
	}
	for _, e := range evs[:start] {
		if e.key == manifestKey && e.op != "delete" {
			t.Fatalf("the manifest was written more than once: %v", evs)
		}
	}
	for i, e := range evs[:start] {
		if e.op == "start" && !slices.Contains(evs[i+1:start], event{"end", e.key}) {
			t.Fatalf("the manifest upload started before the upload of %s ended: %v", e.key, evs)
		}
	}
	if rest := evs[start+1:]; len(rest) != 1 || rest[0] != (event{"end", manifestKey}) {
		t.Fatalf("after the manifest upload started: %v, want only its end", rest)
	}
}

// key is the destination key of p under prefix.
func key(prefix, p string) string {
	if prefix == "" {
		return p
	}
	return prefix + "/" + p
}

// complete returns the paths of d whose objects are at the destination with the manifest's size
// and SHA-256, checked by reading the content back.
func complete(t *testing.T, b blob.Bucket, prefix string, d *dataset) []string {
	t.Helper()
	var ok []string
	for _, p := range d.paths() {
		rc, _, err := b.Get(context.Background(), key(prefix, p))
		if errors.Is(err, blob.ErrNotFound) {
			continue
		}
		if err != nil {
			t.Fatal(err)
		}
		h := sha256.New()
		_, err = io.Copy(h, rc)
		rc.Close()
		if err == nil && hex.EncodeToString(h.Sum(nil)) == d.files[p].SHA256 {
			ok = append(ok, p)
		}
	}
	return ok
}

// verifyExported checks that every file of d is at the destination with its size and SHA-256
// (recorded, and of the content read back), and that the manifest is the local one.
func verifyExported(t *testing.T, b blob.Bucket, prefix string, d *dataset) {
	t.Helper()
	ctx := context.Background()
	for _, p := range d.paths() {
		want := d.files[p]
		info, err := b.Stat(ctx, key(prefix, p))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if info.Size != want.Bytes || info.SHA256 != want.SHA256 {
			t.Errorf("%s: stored %d bytes sha256 %s, want %d bytes %s", p, info.Size, info.SHA256, want.Bytes, want.SHA256)
		}
	}
	if got := complete(t, b, prefix, d); len(got) != len(d.files) {
		t.Errorf("content read back matches for %d of %d files", len(got), len(d.files))
	}
	rc, _, err := b.Get(ctx, key(prefix, export.ManifestName))
	if err != nil {
		t.Fatalf("manifest: %v", err)
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	local, err := os.ReadFile(filepath.Join(d.dir, export.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(local) {
		t.Errorf("the destination's manifest differs from the local one")
	}
}

// noManifest fails the test when the destination has a manifest.
func noManifest(t *testing.T, b blob.Bucket, prefix string) {
	t.Helper()
	_, err := b.Stat(context.Background(), key(prefix, export.ManifestName))
	if !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("manifest at the destination after an interrupted export: Stat error %v, want not found", err)
	}
}

// keysOf returns the keys of paths under prefix.
func keysOf(prefix string, paths []string) []string {
	ks := make([]string, len(paths))
	for i, p := range paths {
		ks[i] = key(prefix, p)
	}
	slices.Sort(ks)
	return ks
}

// without returns the paths of all not in some.
func without(all, some []string) []string {
	var out []string
	for _, p := range all {
		if !slices.Contains(some, p) {
			out = append(out, p)
		}
	}
	return out
}

// seedBytes returns distinct bytes of length n for overwriting an object.
func seedBytes(n int64, seed uint64) []byte {
	var s [32]byte
	binary.LittleEndian.PutUint64(s[:], seed)
	b := make([]byte, n)
	rand.NewChaCha8(s).Read(b)
	return b
}

func describe(st export.Stats) string {
	return fmt.Sprintf("%+v", st)
}

// checkResumed runs the export of d to b again after an interrupted one
// that left the files done complete: it must upload exactly the others and
// the manifest, last (also on the wire, when w is given), skip done, and
// leave a complete export.
func checkResumed(t *testing.T, d *dataset, b blob.Bucket, w *wire, prefix string, done []string, opts export.Options) {
	t.Helper()
	rec := &recorder{Bucket: b}
	st, err := export.Dir(t.Context(), d.dir, rec, prefix, opts)
	if err != nil {
		t.Fatal(err)
	}
	missing := without(d.paths(), done)
	if st.Uploaded != len(missing) || st.Skipped != len(done) || !st.ManifestUploaded {
		t.Errorf("re-run: stats %s, want %d uploaded (files − already complete), %d skipped", describe(st), len(missing), len(done))
	}
	evs := rec.take()
	checkManifestLast(t, evs, key(prefix, export.ManifestName))
	checkStored(t, evs, w, keysOf(prefix, append(missing, export.ManifestName)))
	verifyExported(t, b, prefix, d)
}

// checkStored fails unless the events stored exactly the keys want and,
// when w is given, the wire carried uploads of exactly those.
func checkStored(t *testing.T, evs []event, w *wire, want []string) {
	t.Helper()
	if got := stored(evs); !slices.Equal(got, want) {
		t.Errorf("stored %v, want %v", got, want)
	}
	if w != nil {
		if got := w.take(); !slices.Equal(got, want) {
			t.Errorf("sent uploads for %v, want %v", got, want)
		}
	}
}
