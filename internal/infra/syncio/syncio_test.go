package syncio

import (
	"bytes"
	"fmt"
	"strings"
	"sync"
	"testing"
)

// Writes from many goroutines at once arrive whole, through a Writer and into a Buffer, and a
// Buffer may be read while they write (run with -race).
func TestConcurrentWrites(t *testing.T) {
	var out bytes.Buffer
	w := &Writer{W: &out}
	var b Buffer
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 100 {
				line := fmt.Sprintf("%d.%d\n", i, j)
				if n, err := w.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Writer.Write = %d, %v", n, err)
				}
				if n, err := b.Write([]byte(line)); n != len(line) || err != nil {
					t.Errorf("Buffer.Write = %d, %v", n, err)
				}
				_ = b.String()
			}
		})
	}
	wg.Wait()
	for name, s := range map[string]string{"Writer": out.String(), "Buffer": b.String()} {
		if got := strings.Count(s, "\n"); got != 800 {
			t.Errorf("%s: %d lines, want 800", name, got)
		}
	}
}

func TestTail(t *testing.T) {
	var b Buffer
	if got := b.Tail(4); got != "" {
		t.Errorf("Tail of an empty buffer = %q", got)
	}
	b.Write([]byte("abcdef"))
	if got := b.Tail(6); got != "abcdef" {
		t.Errorf("Tail(6) = %q, want all of it", got)
	}
	if got := b.Tail(2); got != "…ef" {
		t.Errorf("Tail(2) = %q, want …ef", got)
	}
}

// TestRing: a Ring keeps the last Max bytes, and its Tail starts at a line.
func TestRing(t *testing.T) {
	r := &Ring{Max: 16}
	for _, s := range []string{"first line\n", "second line\n", "third\n"} {
		if _, err := r.Write([]byte(s)); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.Tail(100); got != "cond line\nthird" {
		t.Errorf("Tail(100) = %q: want the 16 kept bytes, trimmed", got)
	}
	if got := r.Tail(8); got != "third" { // "e\nthird\n", from the next line
		t.Errorf("Tail(8) = %q, want %q", got, "third")
	}
}
