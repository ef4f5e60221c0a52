package blob_test

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// TestConformance runs the same behaviour checks against every backend: a local directory and a
// real MinIO server.
func TestConformance(t *testing.T) {
	tests := []struct {
		name string
		run  func(t *testing.T, f *fixture)
	}{
		{"LargeStream", testLargeStream},
		{"PutExistingIsNoop", testPutExistingIsNoop},
		{"Stat", testStat},
		{"ListByPrefix", testList},
		{"NotFound", testNotFound},
		{"CorruptionDetected", testCorruption},
		{"ConcurrentSameContent", testConcurrentSameContent},
		{"BucketObjects", testBucketObjects},
		{"PutOptionsSHA256", testPutOptionsSHA256},
		{"InvalidKeys", testInvalidKeys},
	}
	for _, b := range backends(t) {
		t.Run(b.name, func(t *testing.T) {
			for _, tc := range tests {
				t.Run(tc.name, func(t *testing.T) { tc.run(t, b.open(t)) })
			}
		})
	}
}

// testLargeStream streams 11 MiB of unknown length (above the S3 store's part size: a multipart
// upload of three parts) through Store.Put and Bucket.Put and reads both back; neither side ever holds the
// whole object.
func testLargeStream(t *testing.T, f *fixture) {
	const size = largeSize
	ctx := t.Context()
	want := genSum(t, 1, size)

	ref, err := f.s.Put(ctx, gen(1, size))
	if err != nil {
		t.Fatalf("Store.Put: %v", err)
	}
	if ref.SHA256 != want || ref.Size != size {
		t.Fatalf("Store.Put = %+v, want sha256 %s size %d", ref, want, size)
	}
	rc, err := f.s.Get(ctx, ref.SHA256)
	if err != nil {
		t.Fatalf("Store.Get: %v", err)
	}
	if got := sameStream(t, rc, gen(1, size)); got != want {
		t.Fatalf("read back sha256 %s, want %s", got, want)
	}
	rc.Close()

	want2 := genSum(t, 2, size)
	info, err := f.s.Bucket().Put(ctx, "big/stream.bin", gen(2, size), -1, blob.PutOptions{})
	if err != nil {
		t.Fatalf("Bucket.Put: %v", err)
	}
	if info.SHA256 != want2 || info.Size != size {
		t.Fatalf("Bucket.Put = %+v, want sha256 %s size %d", info, want2, size)
	}
	rc, ginfo, err := f.s.Bucket().Get(ctx, "big/stream.bin")
	if err != nil {
		t.Fatalf("Bucket.Get: %v", err)
	}
	if ginfo.Size != size {
		t.Errorf("Bucket.Get size %d, want %d", ginfo.Size, size)
	}
	if got := sameStream(t, rc, gen(2, size)); got != want2 {
		t.Fatalf("read back sha256 %s, want %s", got, want2)
	}
	rc.Close()
}

func testPutExistingIsNoop(t *testing.T, f *fixture) {
	ctx := t.Context()
	data := []byte("screenshot bytes, stored once")
	ref, err := f.s.PutBytes(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	before, err := f.s.Stat(ctx, ref.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	var fiBefore os.FileInfo
	if f.dir != "" {
		fiBefore, _ = os.Stat(filepath.Join(f.dir, filepath.FromSlash(blob.Key(ref.SHA256))))
	}
	var uploads int64
	if f.uploads != nil {
		uploads = f.uploads.Load()
	}
	for _, put := range []struct {
		name string
		do   func() (blob.Ref, error)
	}{
		{"PutBytes", func() (blob.Ref, error) { return f.s.PutBytes(ctx, data) }},
		{"Put", func() (blob.Ref, error) { return f.s.Put(ctx, bytes.NewReader(data)) }},
	} {
		again, err := put.do()
		if err != nil || again != ref {
			t.Fatalf("second %s = %+v, %v; want %+v", put.name, again, err, ref)
		}
	}
	after, err := f.s.Stat(ctx, ref.SHA256)
	if err != nil {
		t.Fatal(err)
	}
	if !after.ModTime.Equal(before.ModTime) {
		t.Errorf("ModTime changed from %v to %v: content was written again", before.ModTime, after.ModTime)
	}
	if f.uploads != nil {
		if n := f.uploads.Load() - uploads; n != 0 {
			t.Errorf("%d upload requests for content already stored, want 0", n)
		}
	}
	if fiBefore != nil {
		fiAfter, err := os.Stat(filepath.Join(f.dir, filepath.FromSlash(blob.Key(ref.SHA256))))
		if err != nil || !os.SameFile(fiBefore, fiAfter) {
			t.Errorf("the object's file was replaced (err %v)", err)
		}
	}
}

func testStat(t *testing.T, f *fixture) {
	ctx := t.Context()
	data := bytes.Repeat([]byte("codapipe "), 1000)
	ref, err := f.s.PutBytes(ctx, data)
	if err != nil {
		t.Fatal(err)
	}
	if ref.SHA256 != blob.SumSHA256(data) || ref.Size != int64(len(data)) {
		t.Fatalf("PutBytes = %+v", ref)
	}
	info, err := f.s.Stat(ctx, strings.ToUpper(ref.SHA256)) // upper case is accepted
	if err != nil {
		t.Fatal(err)
	}
	if info.Key != blob.Key(ref.SHA256) || info.Size != ref.Size || info.SHA256 != ref.SHA256 || info.ModTime.IsZero() {
		t.Errorf("Store.Stat = %+v", info)
	}
	// The bucket layer returns the SHA-256 recorded at write time.
	binfo, err := f.s.Bucket().Stat(ctx, blob.Key(ref.SHA256))
	if err != nil {
		t.Fatal(err)
	}
	if binfo.SHA256 != ref.SHA256 {
		t.Errorf("Bucket.Stat SHA256 = %q, want %q (S3 metadata / local xattr)", binfo.SHA256, ref.SHA256)
	}
}

func testList(t *testing.T, f *fixture) {
	ctx := t.Context()
	restore := blob.SetListPage(7) // S3 pages of 7 keys: the listing crosses page boundaries
	defer restore()

	var refs []string
	for i := range 40 {
		ref, err := f.s.PutBytes(ctx, fmt.Appendf(nil, "object %d", i))
		if err != nil {
			t.Fatal(err)
		}
		refs = append(refs, ref.SHA256)
	}
	slices.Sort(refs)
	collect := func(prefix string) []string {
		var got []string
		for info, err := range f.s.List(ctx, prefix) {
			if err != nil {
				t.Fatalf("List(%q): %v", prefix, err)
			}
			if info.Size == 0 || info.SHA256 == "" || info.Key != blob.Key(info.SHA256) {
				t.Errorf("List(%q) yielded %+v", prefix, info)
			}
			got = append(got, info.SHA256)
		}
		return got
	}
	for _, prefix := range []string{"", refs[0][:1], refs[5][:2], refs[9][:3], refs[13], "f0f0f0f0"} {
		var want []string
		for _, r := range refs {
			if strings.HasPrefix(r, prefix) {
				want = append(want, r)
			}
		}
		if got := collect(prefix); !slices.Equal(got, want) {
			t.Errorf("Store.List(%q) = %d hashes %v\nwant %d %v", prefix, len(got), got, len(want), want)
		}
	}

	// The bucket layer: byte order of keys, "a/b.txt" before "a/b/c" ('.' < '/').
	keys := []string{"a/b/c", "a/b.txt", "a/b-", "a/ba", "a/b/d/e", "b", "ab"}
	for _, k := range keys {
		if _, err := f.s.Bucket().Put(ctx, k, strings.NewReader(k), -1, blob.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, prefix := range []string{"a/", "a/b", "a/b/", "a", "zzz", ""} {
		var want []string
		for _, k := range append(keys, func() []string {
			var ks []string
			for _, r := range refs {
				ks = append(ks, blob.Key(r))
			}
			return ks
		}()...) {
			if strings.HasPrefix(k, prefix) {
				want = append(want, k)
			}
		}
		slices.Sort(want)
		var got []string
		for info, err := range f.s.Bucket().List(ctx, prefix) {
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, info.Key)
		}
		if !slices.Equal(got, want) {
			t.Errorf("Bucket.List(%q) = %q\nwant %q", prefix, got, want)
		}
	}
	// Stopping early is fine.
	for range f.s.List(ctx, "") {
		break
	}
}

func testNotFound(t *testing.T, f *fixture) {
	ctx := t.Context()
	missing := blob.SumSHA256([]byte("never stored"))
	_, err := f.s.Get(ctx, missing)
	checkNotFound(t, "Store.Get", err, "blob: get "+blob.Key(missing)+": not found")
	_, err = f.s.Stat(ctx, missing)
	checkNotFound(t, "Store.Stat", err, "blob: stat "+blob.Key(missing)+": not found")
	_, _, err = f.s.Bucket().Get(ctx, "no/such/key")
	checkNotFound(t, "Bucket.Get", err, "blob: get no/such/key: not found")
	_, err = f.s.Bucket().Stat(ctx, "no/such/key")
	checkNotFound(t, "Bucket.Stat", err, "blob: stat no/such/key: not found")
	if err := f.s.Bucket().Delete(ctx, "no/such/key"); err != nil {
		t.Errorf("Delete of a missing key: %v", err)
	}
}

func checkNotFound(t *testing.T, what string, err error, msg string) {
	t.Helper()
	if !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("%s: error %v, want ErrNotFound", what, err)
	} else if err.Error() != msg {
		t.Errorf("%s: error %q, want %q", what, err, msg)
	}
}

func testCorruption(t *testing.T, f *fixture) {
	ctx := t.Context()
	for _, tc := range []struct {
		name   string
		size   int
		tamper string
	}{
		{"overwrittenViaBucket", 1000, "bucket"},
		{"overwrittenViaBucketLarge", largeSize, "bucket"},
		{"fileEditedOnDisk", 1000, "file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.tamper == "file" && f.dir == "" {
				t.Skip("local backend only")
			}
			data := bytes.Repeat([]byte{byte(tc.size)}, tc.size)
			data[0] = byte(len(tc.name))
			ref, err := f.s.PutBytes(ctx, data)
			if err != nil {
				t.Fatal(err)
			}
			bad := slices.Clone(data)
			bad[len(bad)/2] ^= 0xff
			switch tc.tamper {
			case "bucket": // same size, different content, through the public API
				if _, err := f.s.Bucket().Put(ctx, blob.Key(ref.SHA256), bytes.NewReader(bad), int64(len(bad)), blob.PutOptions{}); err != nil {
					t.Fatal(err)
				}
			case "file":
				if err := os.WriteFile(filepath.Join(f.dir, filepath.FromSlash(blob.Key(ref.SHA256))), bad, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			rc, err := f.s.Get(ctx, ref.SHA256)
			if err != nil {
				t.Fatalf("Get: %v (the error must come at EOF)", err)
			}
			got, err := readAll(rc)
			if !errors.Is(err, blob.ErrChecksumMismatch) {
				t.Fatalf("reading corrupt content: error %v, want ErrChecksumMismatch", err)
			}
			if !strings.Contains(err.Error(), blob.Key(ref.SHA256)) {
				t.Errorf("error %q does not name the key", err)
			}
			if len(got) != len(bad) {
				t.Errorf("read %d bytes before the error, want %d", len(got), len(bad))
			}
			if tc.tamper == "file" { // the bucket layer checks the recorded SHA-256 too
				rc, _, err := f.s.Bucket().Get(ctx, blob.Key(ref.SHA256))
				if err != nil {
					t.Fatal(err)
				}
				if _, err := readAll(rc); !errors.Is(err, blob.ErrChecksumMismatch) {
					t.Errorf("Bucket.Get of an edited file: error %v, want ErrChecksumMismatch", err)
				}
			}
		})
	}
}

func testConcurrentSameContent(t *testing.T, f *fixture) {
	ctx := t.Context()
	const writers = 8
	data := bytes.Repeat([]byte("same content from many writers "), 64<<10) // ~2 MiB
	refs := make([]blob.Ref, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for i := range writers {
		wg.Go(func() {
			if i%2 == 0 {
				refs[i], errs[i] = f.s.Put(ctx, bytes.NewReader(data))
			} else {
				refs[i], errs[i] = f.s.PutBytes(ctx, data)
			}
		})
	}
	// Concurrent writers of one named key with different content: one complete version wins.
	versions := [][]byte{bytes.Repeat([]byte{'x'}, 3*MiB), bytes.Repeat([]byte{'y'}, 2*MiB), []byte("z")}
	for _, v := range versions {
		wg.Go(func() {
			if _, err := f.s.Bucket().Put(ctx, "contended", bytes.NewReader(v), -1, blob.PutOptions{}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	for i := range writers {
		if errs[i] != nil || refs[i] != refs[0] {
			t.Fatalf("writer %d: %+v, %v; writer 0: %+v", i, refs[i], errs[i], refs[0])
		}
	}
	got, err := f.s.GetBytes(ctx, refs[0].SHA256)
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("GetBytes after concurrent puts: %d bytes, %v", len(got), err)
	}
	var n int
	for info, err := range f.s.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		n++
		if info.SHA256 != refs[0].SHA256 {
			t.Errorf("unexpected object %+v", info)
		}
	}
	if n != 1 {
		t.Errorf("%d objects after concurrent puts of one content, want 1", n)
	}
	rc, _, err := f.s.Bucket().Get(ctx, "contended")
	if err != nil {
		t.Fatal(err)
	}
	last, err := readAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.ContainsFunc(versions, func(v []byte) bool { return bytes.Equal(v, last) }) {
		t.Errorf("contended key holds %d bytes that are none of the versions written", len(last))
	}
	if f.dir != "" { // no temporary files left behind
		filepath.WalkDir(f.dir, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), ".tmp") {
				t.Errorf("temporary file left: %s", p)
			}
			if err == nil && !d.IsDir() && strings.Contains(p, "/.tmp/") {
				t.Errorf("spool file left: %s", p)
			}
			return nil
		})
	}
}

func testBucketObjects(t *testing.T, f *fixture) {
	ctx := t.Context()
	b := f.s.Bucket()
	tests := []struct {
		name string
		key  string
		body []byte
		size int64 // -1: unknown
	}{
		{"empty", "manifests/empty.json", nil, 0},
		{"knownSize", "shards/run-1/part-0000.arrow", bytes.Repeat([]byte("arrow"), 1000), 5000},
		{"unknownSize", "shards/run-1/part-0001.arrow", []byte("unknown size"), -1},
		{"unicode", "sft/données/ü.jsonl", []byte("{}\n"), 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			info, err := b.Put(ctx, tc.key, io.MultiReader(bytes.NewReader(tc.body)), tc.size, blob.PutOptions{ContentType: "application/octet-stream"})
			if err != nil {
				t.Fatal(err)
			}
			if info.Key != tc.key || info.Size != int64(len(tc.body)) || info.SHA256 != blob.SumSHA256(tc.body) {
				t.Errorf("Put = %+v", info)
			}
			rc, ginfo, err := b.Get(ctx, tc.key)
			if err != nil {
				t.Fatal(err)
			}
			got, err := readAll(rc)
			if err != nil || !bytes.Equal(got, tc.body) {
				t.Fatalf("Get = %q, %v", got, err)
			}
			if ginfo.Size != int64(len(tc.body)) || ginfo.SHA256 != info.SHA256 {
				t.Errorf("Get info = %+v, want size %d sha %s", ginfo, len(tc.body), info.SHA256)
			}
			sinfo, err := b.Stat(ctx, tc.key)
			if err != nil || sinfo.Size != int64(len(tc.body)) {
				t.Errorf("Stat = %+v, %v", sinfo, err)
			}
			if err := b.Delete(ctx, tc.key); err != nil {
				t.Fatal(err)
			}
			if _, err := b.Stat(ctx, tc.key); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("Stat after Delete: %v, want ErrNotFound", err)
			}
		})
	}
	t.Run("PutFile", func(t *testing.T) {
		p := filepath.Join(t.TempDir(), "shard.arrow")
		body := bytes.Repeat([]byte{7}, partSize+3) // above the part size: multipart on S3
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		info, err := b.PutFile(ctx, "shards/file.arrow", p, blob.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if info.SHA256 != blob.SumSHA256(body) || info.Size != int64(len(body)) {
			t.Errorf("PutFile = %+v", info)
		}
		sinfo, err := b.Stat(ctx, "shards/file.arrow")
		if err != nil || sinfo.SHA256 != info.SHA256 {
			t.Errorf("Stat = %+v, %v; want the SHA-256 recorded", sinfo, err)
		}
		rc, _, err := b.Get(ctx, "shards/file.arrow")
		if err != nil {
			t.Fatal(err)
		}
		if got, err := readAll(rc); err != nil || !bytes.Equal(got, body) {
			t.Errorf("Get after PutFile: %d bytes, %v", len(got), err)
		}
	})
	t.Run("SizeMismatch", func(t *testing.T) {
		for _, size := range []int64{3, 100} {
			_, err := b.Put(ctx, "short", strings.NewReader("0123456789"), size, blob.PutOptions{})
			if err == nil {
				t.Errorf("Put of 10 bytes announced as %d: no error", size)
			}
			if _, err := b.Stat(ctx, "short"); !errors.Is(err, blob.ErrNotFound) {
				t.Errorf("size %d: object stored despite the mismatch (%v)", size, err)
			}
		}
	})
}

// testPutOptionsSHA256 checks that a wrong expected SHA-256 fails the Put and stores nothing,
// for a small object (one PUT on S3) and a large stream (multipart on S3).
func testPutOptionsSHA256(t *testing.T, f *fixture) {
	ctx := t.Context()
	b := f.s.Bucket()
	for _, tc := range []struct {
		name string
		r    func() io.Reader
		size int64
	}{
		{"small", func() io.Reader { return strings.NewReader("hello") }, 5},
		{"smallStream", func() io.Reader { return io.MultiReader(strings.NewReader("hello")) }, -1},
		{"largeStream", func() io.Reader { return gen(3, largeSize) }, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			wrong := blob.SumSHA256([]byte("something else"))
			_, err := b.Put(ctx, "checked/"+tc.name, tc.r(), tc.size, blob.PutOptions{SHA256: wrong})
			if !errors.Is(err, blob.ErrChecksumMismatch) {
				t.Fatalf("Put with a wrong SHA256: %v, want ErrChecksumMismatch", err)
			}
			if _, err := b.Stat(ctx, "checked/"+tc.name); !errors.Is(err, blob.ErrNotFound) {
				t.Fatalf("object stored despite the mismatch (%v)", err)
			}
			right := blob.SumSHA256(func() []byte { d, _ := io.ReadAll(tc.r()); return d }())
			info, err := b.Put(ctx, "checked/"+tc.name, tc.r(), tc.size, blob.PutOptions{SHA256: right})
			if err != nil || info.SHA256 != right {
				t.Fatalf("Put with the right SHA256: %+v, %v", info, err)
			}
			if sinfo, err := b.Stat(ctx, "checked/"+tc.name); err != nil || sinfo.SHA256 != right {
				t.Errorf("Stat = %+v, %v; want the SHA-256 recorded", sinfo, err)
			}
		})
	}
}

func testInvalidKeys(t *testing.T, f *fixture) {
	ctx := t.Context()
	b := f.s.Bucket()
	for _, key := range []string{"", "/abs", "a//b", "a/../b", "a/./b", "dir/", ".tmp-x", "a/.tmp/b", "back\\slash", "nul\x00"} {
		if _, err := b.Put(ctx, key, strings.NewReader("x"), 1, blob.PutOptions{}); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Put(%q): %v, want ErrInvalidKey", key, err)
		}
		if _, err := b.Stat(ctx, key); !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Stat(%q): %v, want ErrInvalidKey", key, err)
		}
	}
	if _, err := f.s.Get(ctx, "not-a-hash"); !errors.Is(err, blob.ErrInvalidKey) {
		t.Errorf("Store.Get(not-a-hash): %v, want ErrInvalidKey", err)
	}
	for _, err := range f.s.List(ctx, "xyz") {
		if !errors.Is(err, blob.ErrInvalidKey) {
			t.Errorf("Store.List(xyz): %v, want ErrInvalidKey", err)
		}
	}
}
