package shard_test

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

var formats = []shard.Format{shard.FormatArrow, shard.FormatParquet}

// TestRoundTrip writes rows in both formats and reads every shard back with
// the independent reader: every value of every row must come back exactly,
// and the files must describe themselves (schema metadata).
func TestRoundTrip(t *testing.T) {
	shardtest.Require(t)
	cases := []struct {
		name      string
		rows      []shard.Row
		batchRows int
	}{
		{"edge", edgeRows(), 0},
		{"edge-batch1", edgeRows(), 1},
		{"many", manyRows(400, 1), 64},
		{"images", imageRows(12, 200<<10, 2), 5},
		{"nonfinite", []shard.Row{{
			Reward: math.Inf(1), Advantage: math.Inf(-1), GroupStd: math.NaN(),
			LogProbs: []float64{math.Inf(-1), math.NaN(), 0},
			Action:   &shard.Action{X: ptr(math.NaN()), Y: ptr(math.Inf(1))},
		}}, 0},
	}
	for _, format := range formats {
		for _, tc := range cases {
			t.Run(string(format)+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
				b, dir := localBucket(t)
				w, err := shard.NewWriter(shard.Config{
					Bucket: b, Prefix: "sets/a", Format: format, BatchRows: tc.batchRows,
					TempDir: t.TempDir(), Meta: testMeta(), Allocator: mem,
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Add(tc.rows); err != nil {
					t.Fatal(err)
				}
				if got := w.Rows(); got != int64(len(tc.rows)) {
					t.Errorf("Rows() = %d, want %d", got, len(tc.rows))
				}
				f, err := w.Commit(context.Background())
				if err != nil {
					t.Fatal(err)
				}
				if err := w.Close(); err != nil {
					t.Fatal(err)
				}
				mem.AssertSize(t, 0)

				if f.Rows != int64(len(tc.rows)) || f.Format != format ||
					!strings.HasPrefix(f.Key, "sets/a/part-") || !strings.HasSuffix(f.Key, format.Ext()) {
					t.Errorf("File = %+v", f)
				}
				sum, size := fileSHA256(t, b, f.Key)
				if sum != f.SHA256 || size != f.Bytes {
					t.Errorf("stored object: sha256 %s, %d bytes; File says %s, %d bytes", sum, size, f.SHA256, f.Bytes)
				}

				got := shardtest.Read(t, paths(dir, []shard.File{f})...)
				shardtest.Compare(t, tc.rows, got...)
				meta, version, err := got[0].Meta()
				if err != nil {
					t.Fatal(err)
				}
				if meta != testMeta() || version != shard.SchemaVersion {
					t.Errorf("metadata = %+v version %d, want %+v version %d", meta, version, testMeta(), shard.SchemaVersion)
				}
				var names []string
				for _, c := range got[0].Schema {
					names = append(names, c.Name)
				}
				var want []string
				for _, c := range shard.Columns() {
					want = append(want, c.Name)
				}
				if !slices.Equal(names, want) {
					t.Errorf("columns = %v, want %v", names, want)
				}
			})
		}
	}
}

// TestFileStructure checks the files with arrow-go's own readers: the Arrow
// schema is exactly Schema(meta), batches hold at most BatchRows rows, and
// Parquet files have one row group per batch.
func TestFileStructure(t *testing.T) {
	rows := manyRows(300, 3)
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			b, dir := localBucket(t)
			f := writeOne(t, shard.Config{Bucket: b, Format: format, BatchRows: 64, TempDir: t.TempDir(), Meta: testMeta()}, rows)
			path := paths(dir, []shard.File{f})[0]
			switch format {
			case shard.FormatArrow:
				fh, err := os.Open(path)
				if err != nil {
					t.Fatal(err)
				}
				defer fh.Close()
				r, err := ipc.NewFileReader(fh)
				if err != nil {
					t.Fatal(err)
				}
				defer r.Close()
				if !r.Schema().Equal(shard.Schema(testMeta())) || !r.Schema().Metadata().Equal(shard.Schema(testMeta()).Metadata()) {
					t.Errorf("schema = %v\nwant %v", r.Schema(), shard.Schema(testMeta()))
				}
				if r.NumRecords() != 5 { // 4×64 + 44
					t.Errorf("%d record batches, want 5", r.NumRecords())
				}
			case shard.FormatParquet:
				pf, err := file.OpenParquetFile(path, false)
				if err != nil {
					t.Fatal(err)
				}
				defer pf.Close()
				if pf.NumRowGroups() != 5 || pf.NumRows() != 300 {
					t.Errorf("%d row groups, %d rows; want 5, 300", pf.NumRowGroups(), pf.NumRows())
				}
				kv := pf.MetaData().KeyValueMetadata()
				if v := kv.FindValue(shard.MetaMode); v == nil || *v != shard.ModeStep {
					t.Errorf("key-value metadata %s = %v", shard.MetaMode, v)
				}
			}
		})
	}
}

// TestRolling rolls shards by rows and by bytes: every file but the last is
// at its threshold, and the files together hold every row in order.
func TestRolling(t *testing.T) {
	shardtest.Require(t)
	rows := imageRows(40, 30<<10, 5)
	cases := []struct {
		name      string
		rows      int64
		bytes     int64
		wantFiles int
	}{
		{"rows", 7, 0, 6}, // 5×7 + 5
		{"bytes", 0, 200 << 10, 0},
	}
	for _, format := range formats {
		for _, tc := range cases {
			t.Run(string(format)+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				b, dir := localBucket(t)
				tmp := t.TempDir()
				batch := 3
				if format == shard.FormatParquet {
					batch = 4 // fewer row groups: each costs 50 zstd streams, slow under the race detector
				}
				w := newWriter(t, shard.Config{
					Bucket: b, Prefix: "roll", Format: format, RowsPerShard: tc.rows, BytesPerShard: tc.bytes,
					BatchRows: batch, TempDir: tmp, Meta: testMeta(),
				})
				files := writeRolling(t, w, rows)
				if tc.wantFiles > 0 && len(files) != tc.wantFiles {
					t.Errorf("%d files, want %d", len(files), tc.wantFiles)
				}
				if len(files) < 2 {
					t.Fatalf("%d files: no rolling", len(files))
				}
				var total int64
				keys := map[string]bool{}
				for i, f := range files {
					total += f.Rows
					keys[f.Key] = true
					last := i == len(files)-1
					if tc.rows > 0 && !last && f.Rows != tc.rows {
						t.Errorf("file %d: %d rows, want %d", i, f.Rows, tc.rows)
					}
					// A file is committed with the first row that makes it
					// reach the threshold: at least the threshold, and less
					// than one more row (plus the footer) beyond it.
					if tc.bytes > 0 && !last && (f.Bytes < tc.bytes*9/10 || f.Bytes > tc.bytes+60<<10) {
						t.Errorf("file %d: %d bytes, threshold %d", i, f.Bytes, tc.bytes)
					}
				}
				if total != int64(len(rows)) || len(keys) != len(files) {
					t.Errorf("%d rows in %d distinct keys of %d files, want %d rows", total, len(keys), len(files), len(rows))
				}
				if got := listKeys(t, b, "roll/"); len(got) != len(files) {
					t.Errorf("bucket holds %v, want the %d files", got, len(files))
				}
				if left := dirEntries(t, tmp); len(left) != 0 {
					t.Errorf("temp dir holds %v after the commits", left)
				}
				shardtest.Compare(t, rows, shardtest.Read(t, paths(dir, files)...)...)
			})
		}
	}
}

// TestCommitVisibility checks that nothing is in the bucket before Commit,
// that Abort leaves nothing behind, and that empty shards are not committed.
func TestCommitVisibility(t *testing.T) {
	ctx := context.Background()
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			b, _ := localBucket(t)
			tmp := t.TempDir()
			w := newWriter(t, shard.Config{Bucket: b, Prefix: "vis", Format: format, BatchRows: 2, TempDir: tmp, Meta: testMeta()})

			if _, err := w.Commit(ctx); !errors.Is(err, shard.ErrEmpty) {
				t.Errorf("Commit with no shard: %v, want ErrEmpty", err)
			}
			if err := w.Add(nil); err != nil {
				t.Fatal(err)
			}
			if _, err := w.Commit(ctx); !errors.Is(err, shard.ErrEmpty) {
				t.Errorf("Commit after Add(nil): %v, want ErrEmpty", err)
			}
			if left := dirEntries(t, tmp); len(left) != 0 {
				t.Errorf("Add(nil) opened a shard: %v", left)
			}

			// Rows written out in batches are still invisible before Commit.
			if err := w.Add(manyRows(9, 1)); err != nil {
				t.Fatal(err)
			}
			if keys := listKeys(t, b, ""); len(keys) != 0 {
				t.Errorf("before Commit the bucket holds %v", keys)
			}
			if left := dirEntries(t, tmp); len(left) != 1 || w.Bytes() <= 0 {
				t.Errorf("temp dir holds %v, Bytes %d: want one spool file", left, w.Bytes())
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			checkStored(t, b, tmp, "after Abort")
			if w.Rows() != 0 || w.Bytes() != 0 || w.Full() {
				t.Errorf("after Abort: Rows %d Bytes %d Full %v", w.Rows(), w.Bytes(), w.Full())
			}
			if _, err := w.Commit(ctx); !errors.Is(err, shard.ErrEmpty) {
				t.Errorf("Commit after Abort: %v, want ErrEmpty", err)
			}

			// Pending rows of an aborted shard do not leak into the next one.
			if err := w.Add(manyRows(1, 2)); err != nil {
				t.Fatal(err)
			}
			if err := w.Abort(); err != nil {
				t.Fatal(err)
			}
			rows := manyRows(3, 3)
			if err := w.Add(rows); err != nil {
				t.Fatal(err)
			}
			f, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if f.Rows != 3 {
				t.Errorf("committed %d rows, want 3", f.Rows)
			}
			checkStored(t, b, tmp, "after Commit", f.Key)

			// Close drops an open shard without committing it.
			if err := w.Add(rows); err != nil {
				t.Fatal(err)
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			checkStored(t, b, tmp, "after Close", f.Key)
			if err := w.Add(rows); err == nil {
				t.Error("Add after Close succeeded")
			}
		})
	}
}

// checkStored checks that the bucket holds exactly keys and that the
// writer's temp dir is empty, when (e.g. "after Abort").
func checkStored(t *testing.T, b blob.Bucket, tmp, when string, keys ...string) {
	t.Helper()
	if got := listKeys(t, b, ""); !slices.Equal(got, keys) {
		t.Errorf("%s the bucket holds %v, want %v", when, got, keys)
	}
	if left := dirEntries(t, tmp); len(left) != 0 {
		t.Errorf("%s the temp dir holds %v", when, left)
	}
}

// TestAddValidatesFirst checks that a row with invalid UTF-8 fails Add
// without adding any of the call's rows.
func TestAddValidatesFirst(t *testing.T) {
	b, _ := localBucket(t)
	w := newWriter(t, shard.Config{Bucket: b, TempDir: t.TempDir(), Meta: testMeta()})
	rows := manyRows(3, 1)
	rows[2].Action.Keys = []string{"ok", "bad\xff"}
	err := w.Add(rows)
	if err == nil || !strings.Contains(err.Error(), "row 2") || !strings.Contains(err.Error(), "action.keys") {
		t.Errorf("Add = %v, want an error naming row 2 and action.keys", err)
	}
	if w.Rows() != 0 {
		t.Errorf("Rows() = %d after a failed Add, want 0", w.Rows())
	}
}

// flakyBucket fails the first PutFile.
type flakyBucket struct {
	blob.Bucket
	fails int
	keys  []string
}

func (f *flakyBucket) PutFile(ctx context.Context, key, path string, opts blob.PutOptions) (blob.Info, error) {
	f.keys = append(f.keys, key)
	if f.fails > 0 {
		f.fails--
		return blob.Info{}, errors.New("injected upload failure")
	}
	return f.Bucket.PutFile(ctx, key, path, opts)
}

// TestCommitRetry checks that a failed upload keeps the finished shard:
// Add refuses more rows, and Commit again uploads the same bytes under the
// same key.
func TestCommitRetry(t *testing.T) {
	shardtest.Require(t)
	b, dir := localBucket(t)
	fb := &flakyBucket{Bucket: b, fails: 1}
	tmp := t.TempDir()
	w := newWriter(t, shard.Config{Bucket: fb, Prefix: "retry", TempDir: tmp, Meta: testMeta()})
	rows := edgeRows()
	if err := w.Add(rows); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Commit(context.Background()); err == nil {
		t.Fatal("Commit succeeded through a failing upload")
	}
	if err := w.Add(rows); err == nil {
		t.Error("Add to a finished shard succeeded")
	}
	if keys := listKeys(t, b, ""); len(keys) != 0 {
		t.Errorf("bucket holds %v after the failed upload", keys)
	}
	f, err := w.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if len(fb.keys) != 2 || fb.keys[0] != fb.keys[1] || fb.keys[1] != f.Key {
		t.Errorf("uploads to %v, committed %s: want the same key twice", fb.keys, f.Key)
	}
	if left := dirEntries(t, tmp); len(left) != 0 {
		t.Errorf("temp dir holds %v", left)
	}
	shardtest.Compare(t, rows, shardtest.Read(t, paths(dir, []shard.File{f})...)...)
}

// TestNames checks custom names, and that bad ones fail at Add.
func TestNames(t *testing.T) {
	b, dir := localBucket(t)
	n := 0
	w := newWriter(t, shard.Config{Bucket: b, Prefix: "/named/", Format: shard.FormatParquet, TempDir: t.TempDir(), Meta: testMeta(),
		Name: func() string { n++; return []string{"batch-0001", "a/b"}[n-1] }})
	if err := w.Add(manyRows(2, 1)); err != nil {
		t.Fatal(err)
	}
	f, err := w.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if f.Key != "named/batch-0001.parquet" {
		t.Errorf("key = %q", f.Key)
	}
	if _, err := os.Stat(filepath.Join(dir, "named", "batch-0001.parquet")); err != nil {
		t.Error(err)
	}
	if err := w.Add(manyRows(1, 1)); err == nil {
		t.Error("a name with a slash was accepted")
	}
	if d := shard.DefaultName(); !strings.HasPrefix(d, "part-") || d == shard.DefaultName() {
		t.Errorf("DefaultName() = %q", d)
	}
}

// TestConfigErrors checks NewWriter's validation.
func TestConfigErrors(t *testing.T) {
	b, _ := localBucket(t)
	ok := shard.Config{Bucket: b, Meta: testMeta()}
	for name, mod := range map[string]func(*shard.Config){
		"no bucket":      func(c *shard.Config) { c.Bucket = nil },
		"format":         func(c *shard.Config) { c.Format = "csv" },
		"mode":           func(c *shard.Config) { c.Meta.Mode = "both" },
		"reward config":  func(c *shard.Config) { c.Meta.RewardConfig = "{" },
		"negative":       func(c *shard.Config) { c.RowsPerShard = -1 },
		"prefix":         func(c *shard.Config) { c.Prefix = "a/../b" },
		"tmp prefix":     func(c *shard.Config) { c.Prefix = ".tmp-x" },
		"temp dir":       func(c *shard.Config) { c.TempDir = "/nonexistent/dir" },
		"temp dir alone": func(c *shard.Config) { c.TempDir = "/dev/null" },
	} {
		cfg := ok
		mod(&cfg)
		if _, err := shard.NewWriter(cfg); err == nil {
			t.Errorf("%s: NewWriter succeeded", name)
		}
	}
	w, err := shard.NewWriter(ok)
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
}

// TestSchema checks the column names against Row's json tags and the
// metadata round trip.
func TestSchema(t *testing.T) {
	rt := reflect.TypeFor[shard.Row]()
	cols := shard.Columns()
	if rt.NumField() != len(cols) {
		t.Fatalf("Row has %d fields, the schema %d columns", rt.NumField(), len(cols))
	}
	for i, c := range cols {
		tag, _, _ := strings.Cut(rt.Field(i).Tag.Get("json"), ",")
		if tag != c.Name {
			t.Errorf("column %d = %q, Row field %s has json name %q", i, c.Name, rt.Field(i).Name, tag)
		}
		isPtr := rt.Field(i).Type.Kind() == reflect.Pointer
		if isPtr && !c.Nullable {
			t.Errorf("column %s: pointer field but not nullable", c.Name)
		}
	}
	s := shard.Schema(testMeta())
	m, v, err := shard.ParseMeta(shard.MetadataMap(s.Metadata()))
	if err != nil || m != testMeta() || v != shard.SchemaVersion {
		t.Errorf("ParseMeta = %+v, %d, %v", m, v, err)
	}
	for _, k := range s.Metadata().Keys() {
		if !strings.HasPrefix(k, "codapipe.") {
			t.Errorf("metadata key %q", k)
		}
	}
	if _, _, err := shard.ParseMeta(map[string]string{shard.MetaEps: "x"}); err == nil {
		t.Error("ParseMeta accepted a bad eps")
	}
}
