package shard

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

func TestRecycler(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	r := newRecycler(mem, 3<<20)

	small := r.Allocate(100)
	big := r.Allocate(1 << 20)
	big[0] = 7
	r.Free(big)
	again := r.Allocate(900 << 10) // fits the kept 1 MiB buffer
	if &again[0] != &big[0] || len(again) != 900<<10 || again[0] != 0 {
		t.Errorf("Allocate did not reuse the freed buffer zeroed (len %d, first byte %d)", len(again), again[0])
	}
	if b := r.Allocate(100 << 10); &b[0] == &big[0] {
		t.Error("a buffer was handed out twice")
	} else {
		r.Free(b)
	}
	// Growing within the parent's length keeps the buffer; beyond it moves
	// the content.
	again[1] = 9
	grown := r.Reallocate(1<<20, again)
	if &grown[0] != &again[0] || grown[1] != 9 {
		t.Error("Reallocate within capacity moved the buffer")
	}
	moved := r.Reallocate(2<<20, grown)
	if moved[1] != 9 || len(moved) != 2<<20 {
		t.Error("Reallocate lost the content")
	}
	small = r.Reallocate(200, small) // a small buffer: the parent's business
	r.Free(small)
	r.Free(moved)
	// Over the limit, buffers go back to the parent.
	for range 4 {
		r.Free(r.Allocate(1 << 20))
	}
	if r.total > 3<<20 {
		t.Errorf("kept %d bytes, limit %d", r.total, 3<<20)
	}
	r.Close()
	mem.AssertSize(t, 0)
}

// failWriter fails every write after the first n bytes.
type failWriter struct {
	buf bytes.Buffer
	n   int
}

func (f *failWriter) Write(p []byte) (int, error) {
	if f.buf.Len()+len(p) > f.n {
		return 0, errors.New("disk full")
	}
	return f.buf.Write(p)
}

func TestSpoolWriter(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 5*spoolBuffer)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var out bytes.Buffer
	s := newSpoolWriter(&out)
	// Writes of every size: tiny, around the buffer size, larger than it.
	for off, i := 0, 0; off < len(data); i++ {
		n := min(len(data)-off, []int{1, 7, 1000, spoolBuffer/2 - 1, spoolBuffer/2 + 1, spoolBuffer, 3 * spoolBuffer}[i%7])
		if k, err := s.Write(data[off : off+n]); err != nil || k != n {
			t.Fatalf("Write = %d, %v", k, err)
		}
		off += n
		if s.Size() != int64(off) {
			t.Fatalf("Size = %d, want %d", s.Size(), off)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(data)
	if !bytes.Equal(out.Bytes(), data) || s.Sum() != hex.EncodeToString(sum[:]) {
		t.Errorf("wrote %d bytes with sum %s, want %d bytes with %x", out.Len(), s.Sum(), len(data), sum)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	// A write error sticks: the writes behind the failed one (at the latest
	// Close) and every later Write report it.
	f := &failWriter{n: spoolBuffer}
	s = newSpoolWriter(f)
	for i := 0; i < 2*spoolChunks; i++ {
		if _, err := s.Write(data[:spoolBuffer]); err != nil {
			break
		}
	}
	if err := s.Close(); err == nil {
		t.Error("Close after a failure succeeded")
	}
	if _, err := s.Write([]byte{1}); err == nil {
		t.Error("Write after a failure succeeded")
	}
}

// TestWriteErrorBreaksShard closes the spool file behind the writer's back:
// the next batch fails to write, the shard stays unusable (Add and Commit
// fail) until Abort, and the writer then works again.
func TestWriteErrorBreaksShard(t *testing.T) {
	ctx := t.Context()
	b, err := blob.OpenBucket(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	w, err := NewWriter(Config{Bucket: b, BatchRows: 1, TempDir: tmp, Meta: Meta{Mode: ModeStep}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	row := Row{Run: "r", Images: []Image{{SHA256: "x", Bytes: make([]byte, 2*spoolBuffer)}}}
	if err := w.Add([]Row{row}); err != nil {
		t.Fatal(err)
	}
	w.cur.f.Close()
	// The file is written behind the writer (spoolWriter): the error comes
	// back once the writing goroutine has handed back the failed chunk, at
	// most spoolChunks chunks later.
	failed := false
	for range 2 * spoolChunks {
		if err := w.Add([]Row{row}); err != nil {
			failed = true
			break
		}
	}
	if !failed {
		t.Fatal("Add kept succeeding writing to a closed file")
	}
	if err := w.Add([]Row{row}); err == nil || !strings.Contains(err.Error(), "Abort") {
		t.Errorf("Add on a broken shard: %v", err)
	}
	if _, err := w.Commit(ctx); err == nil {
		t.Error("Commit of a broken shard succeeded")
	}
	if err := w.Abort(); err != nil {
		t.Fatal(err)
	}
	if err := w.Add([]Row{row}); err != nil {
		t.Fatal(err)
	}
	if f, err := w.Commit(ctx); err != nil || f.Rows != 1 {
		t.Errorf("Commit after Abort = %+v, %v", f, err)
	}
	if es, _ := os.ReadDir(tmp); len(es) != 0 {
		t.Errorf("temp dir holds %d files", len(es))
	}
}
