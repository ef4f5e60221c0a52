package shard

import (
	"slices"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow/memory"
)

// recycler is a memory.Allocator that keeps large freed buffers and hands
// them out again. Every batch of a shard allocates buffers of about the same
// sizes (tens of MB for embedded images) and frees them once written; fresh
// memory for each would cost a page fault per 4 KB and garbage for the
// collector, which made allocation the writer's largest cost. The recycler
// keeps at most limit bytes; Close returns them to the parent allocator.
type recycler struct {
	parent memory.Allocator
	limit  int

	mu    sync.Mutex
	sizes map[*byte]int // length of every large buffer from parent, by its first byte
	free  [][]byte      // kept buffers at their parent length, sorted by length
	total int           // sum of their lengths
}

// recycleMin is the smallest buffer worth keeping.
const recycleMin = 64 << 10

func newRecycler(parent memory.Allocator, limit int) *recycler {
	return &recycler{parent: parent, limit: limit, sizes: map[*byte]int{}}
}

// Allocate returns a zeroed buffer of size bytes, a kept one when one is
// large enough.
func (r *recycler) Allocate(size int) []byte {
	if size >= recycleMin {
		r.mu.Lock()
		i, _ := slices.BinarySearchFunc(r.free, size, func(b []byte, n int) int { return len(b) - n })
		if i < len(r.free) && len(r.free[i]) <= 2*size {
			b := r.free[i]
			r.free = slices.Delete(r.free, i, i+1)
			r.total -= len(b)
			r.mu.Unlock()
			b = b[:size]
			clear(b)
			return b
		}
		r.mu.Unlock()
		b := r.parent.Allocate(size)
		r.mu.Lock()
		r.sizes[unsafe.SliceData(b)] = len(b)
		r.mu.Unlock()
		return b
	}
	return r.parent.Allocate(size)
}

// Reallocate grows or shrinks b to size bytes, keeping its content.
func (r *recycler) Reallocate(size int, b []byte) []byte {
	if len(b) == 0 {
		return r.Allocate(size)
	}
	r.mu.Lock()
	n, ok := r.sizes[unsafe.SliceData(b)]
	r.mu.Unlock()
	if !ok { // a small buffer: the parent's
		return r.parent.Reallocate(size, b)
	}
	if n >= size {
		return b[:size]
	}
	nb := r.Allocate(size)
	copy(nb, b)
	r.Free(b)
	return nb
}

// Free keeps b for reuse when it is large and there is room, or frees it.
func (r *recycler) Free(b []byte) {
	if len(b) == 0 {
		r.parent.Free(b)
		return
	}
	r.mu.Lock()
	n, ok := r.sizes[unsafe.SliceData(b)]
	if !ok { // a small buffer
		r.mu.Unlock()
		r.parent.Free(b)
		return
	}
	b = b[:n]
	if r.total+n <= r.limit {
		i, _ := slices.BinarySearchFunc(r.free, n, func(x []byte, n int) int { return len(x) - n })
		r.free = slices.Insert(r.free, i, b)
		r.total += n
		r.mu.Unlock()
		return
	}
	delete(r.sizes, unsafe.SliceData(b))
	r.mu.Unlock()
	r.parent.Free(b)
}

// Close frees every kept buffer.
func (r *recycler) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.free {
		delete(r.sizes, unsafe.SliceData(b))
		r.parent.Free(b)
	}
	r.free, r.total = nil, 0
}
