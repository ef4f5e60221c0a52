// Package syncio has the writers several goroutines may share: Writer serializes their writes to
// one stream (stages running at once, printing to one terminal), Buffer keeps what they write for
// a reader that reads while they write (a server's or a logger's output a test inspects), Ring
// keeps only the end of it (a child process's output, for the error that says why it failed).
package syncio

import (
	"bytes"
	"io"
	"sync"
)

// Writer serializes the writes to W.
type Writer struct {
	mu sync.Mutex
	W  io.Writer
}

// Write writes p to W, after any write in progress.
func (w *Writer) Write(p []byte) (int, error) { return write(&w.mu, w.W, p) }

// write writes p to w holding mu: the one locked write of Writer and Buffer.
func write(mu *sync.Mutex, w io.Writer, p []byte) (int, error) {
	mu.Lock()
	defer mu.Unlock()
	return w.Write(p)
}

// Buffer is a bytes.Buffer that goroutines may write to while others read it. The zero value is
// an empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (b *Buffer) Write(p []byte) (int, error) { return write(&b.mu, &b.b, p) }

// String is everything written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// Tail is the last n bytes written, after "…" when there was more: the end of a long log, for a
// failing test's message.
func (b *Buffer) Tail(n int) string {
	s := b.String()
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

// Ring keeps the last Max bytes written to it. The zero value keeps nothing; set Max.
type Ring struct {
	Max int
	mu  sync.Mutex
	buf []byte
}

// Write appends p, dropping what is more than Max bytes old.
func (r *Ring) Write(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, p...)
	if over := len(r.buf) - r.Max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
	}
	return len(p), nil
}

// Tail returns about the last n bytes kept, from the start of a line, without surrounding
// white space.
func (r *Ring) Tail(n int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buf
	if len(b) > n {
		b = b[len(b)-n:]
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			b = b[i+1:]
		}
	}
	return string(bytes.TrimSpace(b))
}
