package export_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/export"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/minio/minio-go/v7"
	"golang.org/x/time/rate"
)

// TestExportFresh exports a dataset to an empty destination: every file is uploaded and stored
// with its SHA-256, the manifest is the last object written, progress is reported, and a second
// run is a no-op.
func TestExportFresh(t *testing.T) {
	for _, be := range backends(t) {
		for _, prefix := range []string{"", "sft/run-1"} {
			t.Run(be.name+"/prefix="+prefix, func(t *testing.T) {
				d := writeDataset(t, t.TempDir(), "v1", standardSet)
				dst := be.open(t)
				rec := &recorder{Bucket: dst.bucket}
				var mu sync.Mutex
				var events []export.Progress
				opts := export.Options{Progress: func(p export.Progress) {
					mu.Lock()
					events = append(events, p)
					mu.Unlock()
				}}
				st, err := export.Dir(t.Context(), d.dir, rec, prefix, opts)
				if err != nil {
					t.Fatal(err)
				}
				n := len(d.files)
				if st.Files != n || st.Uploaded != n || st.Skipped != 0 || st.Bytes != d.totalBytes() ||
					st.TotalBytes != d.totalBytes() || !st.ManifestUploaded || st.ManifestDeleted {
					t.Errorf("stats %s, want %d files uploaded, %d bytes, manifest uploaded", describe(st), n, d.totalBytes())
				}
				evs := rec.take()
				checkManifestLast(t, evs, key(prefix, export.ManifestName))
				if got, want := stored(evs), keysOf(prefix, append(d.paths(), export.ManifestName)); !slices.Equal(got, want) {
					t.Errorf("stored %v, want %v", got, want)
				}
				verifyExported(t, dst.bucket, prefix, d)
				if dst.wire != nil {
					if got, want := dst.wire.take(), keysOf(prefix, append(d.paths(), export.ManifestName)); !slices.Equal(got, want) {
						t.Errorf("upload requests for %v, want %v", got, want)
					}
				}

				// Progress: one event after the check, one per file uploaded (Path set), one after
				// the commit, and maybe some as the large file is read.
				var done []string
				for _, e := range events {
					if e.Path != "" {
						done = append(done, e.Path)
					}
				}
				if slices.Sort(done); !slices.Equal(done, d.paths()) || len(events) < n+2 {
					t.Fatalf("%d progress events, want one per file and more: %+v", len(events), events)
				}
				first, last := events[0], events[len(events)-1]
				if first.FilesDone != 0 || first.BytesToUpload != d.totalBytes() || first.Files != n || first.Committed {
					t.Errorf("first progress event %+v", first)
				}
				if !last.Committed || last.FilesDone != n || last.Bytes != d.totalBytes() {
					t.Errorf("last progress event %+v", last)
				}
				for i := 1; i < len(events); i++ {
					if events[i].FilesDone < events[i-1].FilesDone || events[i].Bytes < events[i-1].Bytes {
						t.Errorf("progress went backwards: %+v then %+v", events[i-1], events[i])
					}
				}

				// Again: nothing to do.
				st, err = export.Dir(t.Context(), d.dir, rec, prefix, export.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if st.Uploaded != 0 || st.Skipped != n || st.Bytes != 0 || st.ManifestUploaded || st.ManifestDeleted {
					t.Errorf("second run: stats %s, want all %d skipped, no manifest written", describe(st), n)
				}
				if evs := rec.take(); len(evs) != 0 {
					t.Errorf("second run wrote %v, want nothing", evs)
				}
				if dst.wire != nil {
					if got := dst.wire.take(); len(got) != 0 {
						t.Errorf("second run sent uploads for %v", got)
					}
				}
			})
		}
	}
}

// TestExportResumesAfterCancel cancels the context after the first K uploads have completed,
// then runs the export again: the first run leaves no manifest, the second uploads exactly the
// objects that are not complete at the destination, and the manifest last.
func TestExportResumesAfterCancel(t *testing.T) {
	cases := []struct {
		name     string
		parallel int
		k        int
	}{
		{"sequential", 1, 3},
		{"parallel", 4, 2},
		{"first", 2, 1},
	}
	for _, be := range backends(t) {
		for _, tc := range cases {
			t.Run(be.name+"/"+tc.name, func(t *testing.T) {
				const prefix = "sft/v1"
				d := writeDataset(t, t.TempDir(), "v1", standardSet)
				dst := be.open(t)
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				st, err := export.Dir(ctx, d.dir, dst.bucket, prefix, export.Options{
					Parallel: tc.parallel,
					Progress: func(p export.Progress) {
						if p.Uploaded == tc.k {
							cancel()
						}
					},
				})
				if !errors.Is(err, context.Canceled) {
					t.Fatalf("interrupted run: error %v, want context.Canceled", err)
				}
				if !strings.Contains(err.Error(), "manifest not written") {
					t.Errorf("interrupted run: error %q does not say the manifest was not written", err)
				}
				if st.Uploaded < tc.k || st.ManifestUploaded {
					t.Errorf("interrupted run: stats %s, want at least %d uploaded, no manifest", describe(st), tc.k)
				}
				noManifest(t, dst.bucket, prefix)
				done := complete(t, dst.bucket, prefix, d)
				if tc.parallel == 1 && len(done) != tc.k {
					t.Errorf("sequential: %d objects complete after the cancel, want %d", len(done), tc.k)
				}
				if len(done) < tc.k || len(done) == len(d.files) {
					t.Fatalf("%d of %d objects complete after the cancel, want at least %d and not all", len(done), len(d.files), tc.k)
				}
				if dst.wire != nil {
					dst.wire.take()
				}

				checkResumed(t, d, dst.bucket, dst.wire, prefix, done, export.Options{Parallel: tc.parallel})
			})
		}
	}
}

// TestExportRepairsChangedObject changes one object of a complete export in different ways; the
// re-run deletes the (current) manifest first, re-uploads exactly that object and writes the
// manifest again, last.
func TestExportRepairsChangedObject(t *testing.T) {
	const prefix = "sft/v1"
	const victim = "images/chimerax/0002.png"
	type change struct {
		name string
		s3   bool // S3 only
		do   func(t *testing.T, dst *dest, k string, size int64)
	}
	changes := []change{
		{"other bytes, same size", false, func(t *testing.T, dst *dest, k string, size int64) {
			if _, err := dst.bucket.Put(t.Context(), k, bytes.NewReader(seedBytes(size, 1)), size, blob.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated", false, func(t *testing.T, dst *dest, k string, size int64) {
			if _, err := dst.bucket.Put(t.Context(), k, bytes.NewReader(seedBytes(size/2, 2)), size/2, blob.PutOptions{}); err != nil {
				t.Fatal(err)
			}
		}},
		{"deleted", false, func(t *testing.T, dst *dest, k string, size int64) {
			if err := dst.bucket.Delete(t.Context(), k); err != nil {
				t.Fatal(err)
			}
		}},
		{"replaced by another tool, no recorded sha256", true, func(t *testing.T, dst *dest, k string, size int64) {
			_, err := dst.client.PutObject(t.Context(), dst.s3Bucket, "root/"+k, bytes.NewReader(seedBytes(size, 3)), size, minio.PutObjectOptions{})
			if err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, be := range backends(t) {
		for _, ch := range changes {
			if ch.s3 && be.name == "local" {
				continue
			}
			t.Run(be.name+"/"+ch.name, func(t *testing.T) {
				d := writeDataset(t, t.TempDir(), "v1", standardSet)
				dst := be.open(t)
				if _, err := export.Dir(t.Context(), d.dir, dst.bucket, prefix, export.Options{}); err != nil {
					t.Fatal(err)
				}
				ch.do(t, dst, key(prefix, victim), d.files[victim].Bytes)
				if dst.wire != nil {
					dst.wire.take()
				}
				rec := &recorder{Bucket: dst.bucket}
				st, err := export.Dir(t.Context(), d.dir, rec, prefix, export.Options{})
				if err != nil {
					t.Fatal(err)
				}
				if st.Uploaded != 1 || st.Skipped != len(d.files)-1 || st.Bytes != d.files[victim].Bytes || !st.ManifestDeleted || !st.ManifestUploaded {
					t.Errorf("stats %s, want exactly %s re-uploaded, the manifest deleted and written again", describe(st), victim)
				}
				evs := rec.take()
				mkey := key(prefix, export.ManifestName)
				if evs[0] != (event{"delete", mkey}) || evs[1] != (event{"start", key(prefix, victim)}) {
					t.Errorf("events %v, want the manifest deleted before the repair", evs)
				}
				checkManifestLast(t, evs, mkey)
				checkStored(t, evs, dst.wire, keysOf(prefix, []string{victim, export.ManifestName}))
				verifyExported(t, dst.bucket, prefix, d)
			})
		}
	}
}

// TestExportReplacesOutdatedManifest exports a new version of a dataset over an older one: the
// old manifest is deleted before anything else is written, so that an interrupted export of the
// new version leaves no manifest; the resumed export completes it.
func TestExportReplacesOutdatedManifest(t *testing.T) {
	const prefix = "sft"
	for _, be := range backends(t) {
		t.Run(be.name, func(t *testing.T) {
			dst := be.open(t)
			old := writeDataset(t, t.TempDir(), "v1", standardSet)
			if _, err := export.Dir(t.Context(), old.dir, dst.bucket, prefix, export.Options{}); err != nil {
				t.Fatal(err)
			}
			// v2: the same paths with new content, except the small JSON file and one image.
			d := writeDataset(t, t.TempDir(), "v2", standardSet)
			for _, p := range []string{"dataset_info.json", "images/kalgebra/0001.png"} {
				b, err := os.ReadFile(filepath.Join(old.dir, p))
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(d.dir, p), b, 0o644); err != nil {
					t.Fatal(err)
				}
				d.files[p] = old.files[p]
			}
			var list []manifestFile
			for _, p := range d.paths() {
				list = append(list, d.files[p])
			}
			writeManifest(t, d.dir, map[string]any{"version": "v2", "files": list})

			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			rec := &recorder{Bucket: dst.bucket}
			_, err := export.Dir(ctx, d.dir, rec, prefix, export.Options{Parallel: 1, Progress: func(p export.Progress) {
				if p.Uploaded == 2 {
					cancel()
				}
			}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("error %v, want context.Canceled", err)
			}
			if evs := rec.take(); evs[0] != (event{"delete", key(prefix, export.ManifestName)}) {
				t.Errorf("first write %v, want the deletion of the old manifest", evs[0])
			}
			noManifest(t, dst.bucket, prefix)

			st, err := export.Dir(t.Context(), d.dir, rec, prefix, export.Options{})
			if err != nil {
				t.Fatal(err)
			}
			// Skipped: the files equal in both versions (the two copied, the empty one) and the two
			// uploaded by the interrupted run.
			same := 2
			for p, f := range d.files {
				if old.files[p] == f {
					same++
				}
			}
			if want := len(d.files) - same; st.Uploaded != want || st.Skipped != same || st.ManifestDeleted {
				t.Errorf("stats %s, want %d uploaded and %d skipped", describe(st), want, same)
			}
			checkManifestLast(t, rec.take(), key(prefix, export.ManifestName))
			verifyExported(t, dst.bucket, prefix, d)
		})
	}
}

// TestExportContentMismatch exports a folder where one file's content differs from the
// manifest's SHA-256 (same size): with HashLocal nothing is uploaded; without it the upload of
// that file fails (and stores nothing) and the manifest is not written.
func TestExportContentMismatch(t *testing.T) {
	for _, be := range backends(t) {
		for _, hashLocal := range []bool{true, false} {
			// A single PUT; PutFile's multipart upload on S3 (never started: PutFile hashes
			// first); a streamed multipart upload on S3 (aborted before its last part).
			for _, bad := range []string{"train.jsonl", midFile, largeFile} {
				name := be.name + "/upload-verifies/" + bad
				if hashLocal {
					name = be.name + "/hash-local/" + bad
				}
				t.Run(name, func(t *testing.T) {
					d := writeDataset(t, t.TempDir(), "v1", standardSet)
					if err := os.WriteFile(filepath.Join(d.dir, bad), seedBytes(d.files[bad].Bytes, 9), 0o644); err != nil {
						t.Fatal(err)
					}
					dst := be.open(t)
					rec := &recorder{Bucket: dst.bucket}
					st, err := export.Dir(t.Context(), d.dir, rec, "x", export.Options{HashLocal: hashLocal, Parallel: 1})
					if err == nil {
						t.Fatal("no error")
					}
					t.Log(err)
					if !strings.Contains(err.Error(), "export: "+bad+": ") || !strings.Contains(err.Error(), d.files[bad].SHA256) {
						t.Errorf("error %q does not name %s and the expected sha256", err, bad)
					}
					noManifest(t, dst.bucket, "x")
					if _, err := dst.bucket.Stat(t.Context(), key("x", bad)); !errors.Is(err, blob.ErrNotFound) {
						t.Errorf("%s: Stat error %v, want not found (nothing stored)", bad, err)
					}
					if !errors.Is(err, blob.ErrChecksumMismatch) {
						t.Errorf("error %v, want ErrChecksumMismatch", err)
					}
					if evs := rec.take(); hashLocal && (len(evs) != 0 || st.Uploaded != 0) {
						t.Errorf("HashLocal: writes %v, want none", evs)
					}
				})
			}
		}
	}
}

// TestExportBadManifest checks that a manifest that does not match the folder, or is malformed,
// fails with an error naming the file and what was expected, and that nothing is written.
func TestExportBadManifest(t *testing.T) {
	good := []spec{{"a.jsonl", 100}, {"img/b.png", 200}}
	entry := func(path string, size int64, sum string) map[string]any {
		return map[string]any{"path": path, "bytes": size, "sha256": sum}
	}
	var sumA, sumB string
	cases := []struct {
		name  string
		setup func(t *testing.T, dir string) any // returns the manifest (nil: leave none)
		want  []string                           // substrings of the error
	}{
		{"missing file", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("a.jsonl", 100, sumA), entry("img/c.png", 10, sumB)}}
		}, []string{"export: img/c.png: listed in the manifest (10 bytes) but missing from"}},
		{"size mismatch", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("a.jsonl", 101, sumA), entry("img/b.png", 200, sumB)}}
		}, []string{"export: a.jsonl: ", "has 100 bytes, the manifest says 101"}},
		{"parent path", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("a.jsonl", 100, sumA), entry("../x", 1, sumB)}}
		}, []string{`"../x" (manifest.json files[1])`, `".." in path`}},
		{"inner parent path", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("img/../a.jsonl", 100, sumA)}}
		}, []string{`"img/../a.jsonl"`, `".." in path`}},
		{"duplicate", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("a.jsonl", 100, sumA), entry("img/b.png", 200, sumB), entry("a.jsonl", 100, sumA)}}
		}, []string{`"a.jsonl" (manifest.json files[2]): listed twice (also files[0])`}},
		{"absolute path", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry(filepath.Join(dir, "a.jsonl"), 100, sumA)}}
		}, []string{"absolute path"}},
		{"unclean path", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("img//b.png", 200, sumB)}}
		}, []string{`"img//b.png"`, "not a clean path"}},
		{"lists itself", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("a.jsonl", 100, sumA), entry("manifest.json", 5, sumA)}}
		}, []string{"the manifest cannot list itself"}},
		{"reserved name", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry(".tmp-x", 100, sumA)}}
		}, []string{`".tmp-x"`, "invalid key"}},
		{"no sha256", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{map[string]any{"path": "a.jsonl", "bytes": 100}}}
		}, []string{`"a.jsonl" (manifest.json files[0]): no "sha256"`}},
		{"bad sha256", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("a.jsonl", 100, "abc")}}
		}, []string{`"sha256" "abc" is not 64 hex digits`}},
		{"no bytes", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{map[string]any{"path": "a.jsonl", "sha256": sumA}}}
		}, []string{`no "bytes"`}},
		{"no files list", func(t *testing.T, dir string) any {
			return map[string]any{"counts": map[string]int{}}
		}, []string{`has no "files" list`}},
		{"not json", func(t *testing.T, dir string) any {
			return "not an object"
		}, []string{"is not a JSON object"}},
		{"no manifest", func(t *testing.T, dir string) any {
			return nil
		}, []string{"export: manifest.json: ", "no such file"}},
		{"directory listed", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("img", 0, sumA)}}
		}, []string{"export: img: ", "is not a regular file"}},
		{"several problems", func(t *testing.T, dir string) any {
			return map[string]any{"files": []any{entry("a.jsonl", 7, sumA), entry("../y", 1, sumB), entry("gone.png", 3, sumB)}}
		}, []string{"export: a.jsonl: ", `"../y"`, "export: gone.png: "}},
	}
	dst := localDest(t) // the checks run before any write: one backend suffices
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			d := writeDataset(t, dir, "v1", good)
			sumA, sumB = d.files["a.jsonl"].SHA256, d.files["img/b.png"].SHA256
			os.Remove(filepath.Join(dir, export.ManifestName))
			if m := tc.setup(t, dir); m != nil {
				writeManifest(t, dir, m)
			}
			rec := &recorder{Bucket: dst.bucket}
			st, err := export.Dir(t.Context(), dir, rec, tc.name, export.Options{})
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if evs := rec.take(); len(evs) != 0 || st.Uploaded != 0 {
				t.Errorf("writes %v, want none", evs)
			}
			for info, err := range dst.bucket.List(t.Context(), tc.name) {
				t.Errorf("object %s at the destination (err %v)", info.Key, err)
			}
		})
	}
}

// TestExportEmptyFileList exports a manifest without files: only the manifest is written.
func TestExportEmptyFileList(t *testing.T) {
	dir := t.TempDir()
	writeManifest(t, dir, map[string]any{"files": []any{}})
	dst := localDest(t)
	st, err := export.Dir(t.Context(), dir, dst.bucket, "/empty/", export.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if st.Files != 0 || !st.ManifestUploaded {
		t.Errorf("stats %s", describe(st))
	}
	if _, err := dst.bucket.Stat(t.Context(), "empty/"+export.ManifestName); err != nil {
		t.Error(err)
	}
}

// TestExportRetries makes the upload of one file fail in different ways: failures that a new
// attempt may not meet again are retried (up to 3 attempts in all), the others are not; a
// failure that remains stops the export, names the file, starts no further upload and writes
// no manifest. Progress never counts the bytes of a failed attempt.
func TestExportRetries(t *testing.T) {
	damaged := fmt.Errorf("blob: put x: %w: the server rejected the upload as damaged in transit", blob.ErrChecksumMismatch)
	cases := []struct {
		name     string
		failures int   // how many attempts fail
		err      error // the failure
		attempts int   // attempts expected
		ok       bool
	}{
		{"damaged in transit once", 1, damaged, 2, true},
		{"network error twice", 2, errors.New("connection reset by peer"), 3, true},
		{"network error always", 5, errors.New("connection reset by peer"), 3, false},
		{"access denied", 5, fmt.Errorf("blob: put x: %w", blob.ErrAccessDenied), 1, false},
		{"deadline", 5, fmt.Errorf("blob: put x: %w", context.DeadlineExceeded), 1, false},
	}
	for _, victim := range []string{largeFile, "train.jsonl"} { // a stream (Put), and PutFile
		for _, tc := range cases {
			t.Run(victim+"/"+tc.name, func(t *testing.T) {
				d := writeDataset(t, t.TempDir(), "v1", standardSet)
				dst := localDest(t)
				fb := &failingBucket{recorder: recorder{Bucket: dst.bucket}, fail: "p/" + victim, failures: tc.failures, err: tc.err}
				var mu sync.Mutex
				var maxBytes, lastBytes int64
				st, err := export.Dir(t.Context(), d.dir, fb, "p", export.Options{Parallel: 1, Progress: func(p export.Progress) {
					mu.Lock()
					maxBytes, lastBytes = max(maxBytes, p.Bytes), p.Bytes
					mu.Unlock()
				}})
				if got := fb.attempts.Load(); got != int64(tc.attempts) {
					t.Errorf("%d attempts, want %d", got, tc.attempts)
				}
				if maxBytes > d.totalBytes() {
					t.Errorf("progress counted %d bytes, more than the %d to send", maxBytes, d.totalBytes())
				}
				if tc.ok {
					if err != nil {
						t.Fatal(err)
					}
					if st.Uploaded != len(d.files) || st.Bytes != d.totalBytes() || lastBytes != d.totalBytes() {
						t.Errorf("stats %s, last progress %d bytes; want every file uploaded once", describe(st), lastBytes)
					}
					verifyExported(t, dst.bucket, "p", d)
					return
				}
				if err == nil || !strings.Contains(err.Error(), "export: "+victim+": ") || !strings.Contains(err.Error(), tc.err.Error()) {
					t.Fatalf("error %v, want the failure naming the file", err)
				}
				// Path order, one at a time: the files before the victim are uploaded, no other.
				before := slices.Index(d.paths(), victim)
				if st.Uploaded != before {
					t.Errorf("stats %s, want %d uploaded before the failure", describe(st), before)
				}
				if got := stored(fb.take()); !slices.Equal(got, keysOf("p", d.paths()[:before])) {
					t.Errorf("stored %v, want the files before %s", got, victim)
				}
				noManifest(t, dst.bucket, "p")
			})
		}
	}
}

// failingBucket fails the first failures Puts and PutFiles of one key with err; a Put after
// reading half of the content.
type failingBucket struct {
	recorder
	fail     string
	failures int
	err      error
	attempts atomic.Int64
}

func (f *failingBucket) Put(ctx context.Context, key string, r io.Reader, size int64, opts blob.PutOptions) (blob.Info, error) {
	if key == f.fail {
		if n := f.attempts.Add(1); n <= int64(f.failures) {
			io.CopyN(io.Discard, r, size/2)
			return blob.Info{}, f.err
		}
	}
	return f.recorder.Put(ctx, key, r, size, opts)
}

func (f *failingBucket) PutFile(ctx context.Context, key, path string, opts blob.PutOptions) (blob.Info, error) {
	if key == f.fail {
		if n := f.attempts.Add(1); n <= int64(f.failures) {
			return blob.Info{}, f.err
		}
	}
	return f.recorder.PutFile(ctx, key, path, opts)
}

// childEnv makes the test binary run childExport instead of the tests (see TestMain): the kill
// test starts it as a child process. Its value is a JSON childConfig.
const childEnv = "CODAPIPE_EXPORT_TEST_CHILD"

func TestMain(m *testing.M) {
	if cfg := os.Getenv(childEnv); cfg != "" {
		os.Exit(childExport(cfg))
	}
	os.Exit(m.Run())
}

// childConfig tells the child what to export where.
type childConfig struct {
	Endpoint, AccessKey, SecretKey, Bucket string
	Dir, Prefix                            string
	// Slow names the file whose upload is throttled to Rate bytes/s; the child prints
	// "SENT <bytes>" each MiB of its request bodies.
	Slow string
	Rate int
}

// childExport runs one export as the kill test's child and returns the exit status. It prints
// "DONE <path>" for each file uploaded and "SENT <bytes>" as the slow file's bytes go out.
func childExport(raw string) int {
	var c childConfig
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", childEnv, err)
		return 2
	}
	ctx := context.Background()
	tr := &slowTransport{rt: http.DefaultTransport.(*http.Transport).Clone(), match: c.Slow,
		lim: rate.NewLimiter(rate.Limit(c.Rate), 256<<10)}
	b, err := blob.OpenBucket(ctx, "s3://"+c.Bucket, blob.Config{
		Endpoint: c.Endpoint, Region: miniotest.Region, AccessKeyID: c.AccessKey, SecretAccessKey: c.SecretKey,
		PathStyle: true, Transport: tr, Getenv: func(string) string { return "" },
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	st, err := export.Dir(ctx, c.Dir, b, c.Prefix, export.Options{Parallel: 1, Progress: func(p export.Progress) {
		if p.Path != "" {
			fmt.Printf("DONE %s\n", p.Path)
		}
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("FINISHED %+v\n", st)
	return 0
}

// slowTransport throttles the request bodies of URLs containing match and prints how many of
// their bytes have been sent, every MiB.
type slowTransport struct {
	rt    http.RoundTripper
	match string
	lim   *rate.Limiter
	sent  atomic.Int64
}

func (s *slowTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Body == nil || r.Body == http.NoBody || !strings.Contains(r.URL.Path, s.match) {
		return s.rt.RoundTrip(r)
	}
	r2 := r.Clone(r.Context())
	r2.Body = &slowBody{ReadCloser: r.Body, t: s, ctx: r.Context()}
	return s.rt.RoundTrip(r2)
}

type slowBody struct {
	io.ReadCloser
	t   *slowTransport
	ctx context.Context
}

func (b *slowBody) Read(p []byte) (int, error) {
	p = p[:min(len(p), b.t.lim.Burst())]
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		if werr := b.t.lim.WaitN(b.ctx, n); werr != nil && err == nil {
			err = werr
		}
		after := b.t.sent.Add(int64(n))
		if after>>20 != (after-int64(n))>>20 {
			fmt.Printf("SENT %d\n", after)
		}
	}
	return n, err
}

// TestExportResumesAfterKill runs the export in a child process (one file at a time), kills it
// (SIGKILL) while a 64 MiB file is halfway through its multipart upload, and runs it again: the interrupted run
// leaves no manifest and no partial object, the re-run uploads exactly the objects that were not
// complete, every object verifies and the manifest is written last.
func TestExportResumesAfterKill(t *testing.T) {
	srv := miniotest.Start(t)
	const prefix = "sft/v1"
	const big = "b/train-00000.parquet"
	specs := []spec{
		{"a/0001.png", 100 << 10}, {"a/0002.png", 120 << 10}, {"a/0003.png", 90 << 10},
		{big, 64 * MiB},
		{"c/0001.png", 80 << 10}, {"c/0002.png", 110 << 10},
		{"train.jsonl", 1 * MiB}, {"val.jsonl", 64 << 10},
	}
	d := writeDataset(t, t.TempDir(), "v1", specs)
	bucket := srv.NewBucket(t)
	cfg, err := json.Marshal(childConfig{Endpoint: srv.Endpoint, AccessKey: srv.AccessKey, SecretKey: srv.SecretKey,
		Bucket: bucket, Dir: d.dir, Prefix: prefix, Slow: big, Rate: 16 << 20})
	if err != nil {
		t.Fatal(err)
	}

	// The child uploads the big file at 16 MiB/s; kill it once 24 MiB of it are out (16 MiB
	// parts, 4 in flight: no part is complete yet, or one or two are).
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+string(cfg))
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
	defer timer.Stop()
	var lines []string
	killed := false
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		line := sc.Text()
		lines = append(lines, line)
		if n, ok := strings.CutPrefix(line, "SENT "); ok && !killed {
			if sent, _ := strconv.ParseInt(n, 10, 64); sent >= 24*MiB {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
				killed = true
			}
		}
	}
	err = cmd.Wait()
	ws, _ := cmd.ProcessState.Sys().(syscall.WaitStatus)
	if !killed || !ws.Signaled() || ws.Signal() != syscall.SIGKILL {
		t.Fatalf("child not killed mid-upload (wait: %v)\nstdout:\n%s\nstderr:\n%s", err, strings.Join(lines, "\n"), stderr.String())
	}
	t.Logf("child killed after: %s", strings.Join(slices.DeleteFunc(lines, func(l string) bool { return strings.HasPrefix(l, "SENT") }), ", "))

	w := &wire{rt: srv.Transport(), bucket: bucket, keys: map[string]int{}}
	bcfg := srv.Config()
	bcfg.Transport = w
	b, err := blob.OpenBucket(t.Context(), "s3://"+bucket, bcfg)
	if err != nil {
		t.Fatal(err)
	}
	noManifest(t, b, prefix)
	if _, err := b.Stat(t.Context(), key(prefix, big)); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("%s after the kill: Stat error %v, want not found (no partial object)", big, err)
	}
	var incomplete []string
	for u := range srv.Client(t).ListIncompleteUploads(t.Context(), bucket, key(prefix, big), true) {
		if u.Err != nil {
			t.Fatal(u.Err)
		}
		incomplete = append(incomplete, u.Key)
	}
	if !slices.Contains(incomplete, key(prefix, big)) {
		t.Errorf("incomplete multipart uploads %v, want the one of %s the child was killed in", incomplete, big)
	}
	done := complete(t, b, prefix, d)
	// One file at a time, in path order: the files before the big one are complete, the others
	// are not at the destination.
	if want := []string{"a/0001.png", "a/0002.png", "a/0003.png"}; !slices.Equal(done, want) {
		t.Errorf("complete after the kill: %v, want %v", done, want)
	}

	checkResumed(t, d, b, w, prefix, done, export.Options{})
}

// benchSet is the benchmark's dataset: 20 files, 256 MiB, shaped like an SFT export (three
// Parquet shards, the JSONL files, image batches of a few MiB).
var benchSet = func() []spec {
	s := []spec{
		{"parquet/train-00000-of-00003.parquet", 64 * MiB},
		{"parquet/train-00001-of-00003.parquet", 48 * MiB},
		{"parquet/train-00002-of-00003.parquet", 40 * MiB},
		{"train.jsonl", 32 * MiB},
		{"val.jsonl", 4 * MiB},
		{"dataset_info.json", 1 << 10},
	}
	for i := range 8 {
		s = append(s, spec{fmt.Sprintf("images/a/%04d.png", i), 6 * MiB})
	}
	for i := range 6 {
		s = append(s, spec{fmt.Sprintf("images/b/%04d.png", i), 20*MiB/6 - 1<<10/6})
	}
	return s
}()

// benchRounds is how many export/PutObject pairs one iteration of BenchmarkExport runs (odd, for
// the median).
const benchRounds = 5

// BenchmarkExport exports a 256 MiB dataset of 20 files to an empty prefix of a MinIO server
// (default Options; the bucket opened with BucketConfig of the server's Config, i.e. the blob
// store's defaults but for the checksum) and uploads the same files (manifest.json included) with plain minio-go
// PutObject calls (a client with minio-go's defaults), one after another, to another empty
// prefix of the same server. Each round runs one of each, alternating which goes first, and
// removes what they wrote (with a sync) after each; benchRounds rounds per iteration, after an
// untimed warm-up. It reports the median over the rounds of export bytes/s ÷ PutObject bytes/s
// (sft.export_vs_put, target ≥ 0.8; the median, because other work on the machine can slow one
// upload of a round and not the other) and both rates over all rounds in MB/s (10^6 bytes).
// docs/performance.md has figures.
func BenchmarkExport(b *testing.B) {
	srv := miniotest.Start(b)
	d := writeDataset(b, b.TempDir(), "bench", benchSet)
	total := d.totalBytes()
	ctx := b.Context()
	bucket, err := blob.OpenBucket(ctx, srv.URL(""), export.BucketConfig(srv.Config()))
	if err != nil {
		b.Fatal(err)
	}
	client := srv.Client(b)
	paths := append(d.paths(), export.ManifestName)

	exportOnce := func(prefix string) time.Duration {
		start := time.Now()
		st, err := export.Dir(ctx, d.dir, bucket, prefix, export.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if st.Uploaded != len(d.files) {
			b.Fatalf("export uploaded %d files, want %d", st.Uploaded, len(d.files))
		}
		return time.Since(start)
	}
	putOnce := func(prefix string) time.Duration {
		start := time.Now()
		for _, p := range paths {
			f, err := os.Open(d.dir + "/" + p)
			if err != nil {
				b.Fatal(err)
			}
			fi, err := f.Stat()
			if err != nil {
				b.Fatal(err)
			}
			_, err = client.PutObject(ctx, srv.Bucket, prefix+"/"+p, f, fi.Size(), minio.PutObjectOptions{})
			f.Close()
			if err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start)
	}
	// clean removes what one upload wrote and flushes the page cache's dirty pages, so that
	// every timed upload starts from the same state.
	clean := func(prefix string) {
		objs := client.ListObjects(ctx, srv.Bucket, minio.ListObjectsOptions{Prefix: prefix + "/", Recursive: true})
		for e := range client.RemoveObjects(ctx, srv.Bucket, objs, minio.RemoveObjectsOptions{}) {
			b.Fatal(e.Err)
		}
		syscall.Sync()
	}

	// Untimed first: two exports and a PutObject round. The first exports of a process are
	// slower (about 3.3 s and 2.5 s, then 1.6–2.2 s, on this machine), as the heap grows to the
	// multipart part buffers; a multi-GiB export pays that once, a 256 MiB one would be
	// dominated by it.
	var warm []float64
	for range 2 {
		warm = append(warm, exportOnce("export").Seconds())
		clean("export")
	}
	putOnce("put")
	clean("put")
	b.ResetTimer()

	var exportTime, putTime time.Duration
	var bytes int64
	var ratios, exportTimes, putTimes []float64
	round := 0
	for b.Loop() {
		for range benchRounds {
			round++
			var e, p time.Duration
			runExport := func() {
				e = exportOnce("export")
				b.StopTimer()
				clean("export")
				b.StartTimer()
			}
			runPut := func() {
				p = putOnce("put")
				b.StopTimer()
				clean("put")
				b.StartTimer()
			}
			if round%2 == 1 {
				runExport()
				runPut()
			} else {
				runPut()
				runExport()
			}
			exportTime += e
			putTime += p
			bytes += total
			ratios = append(ratios, p.Seconds()/e.Seconds())
			exportTimes = append(exportTimes, e.Seconds())
			putTimes = append(putTimes, p.Seconds())
		}
	}
	b.Logf("seconds: untimed exports %.2f; per round: export %.2f, PutObject %.2f", warm, exportTimes, putTimes)
	slices.Sort(ratios)
	b.ReportMetric(ratios[len(ratios)/2], "sft.export_vs_put")
	b.ReportMetric(float64(bytes)/exportTime.Seconds()/1e6, "sft.export_mb_per_s")
	b.ReportMetric(float64(bytes)/putTime.Seconds()/1e6, "sft.put_mb_per_s")
}
