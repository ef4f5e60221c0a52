package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"sync"
)

// spoolBuffer is the size of one of spoolWriter's chunks.
const spoolBuffer = 1 << 20

// spoolChunks is how many chunks a spoolWriter has: one being filled, the
// others queued for (or being) hashed and written.
const spoolChunks = 4

// errSpoolClosed is returned by spoolWriter.Write after Close.
var errSpoolClosed = errors.New("spool writer is closed")

// spoolWriter writes a stream to a file while hashing it (SHA-256), behind
// the writer: Write copies the bytes into a chunk, and a second goroutine
// hashes and writes each full chunk while the caller goes on encoding the
// next ones. Hashing (~0.6 s/GB) and the write system calls thus cost the
// caller only a copy (~0.1 s/GB). A write error is reported by a later
// Write, and at the latest by Close. It is not safe for concurrent use.
type spoolWriter struct {
	w   io.Writer
	h   hash.Hash
	n   int64  // bytes accepted
	buf []byte // the chunk being filled
	err error  // the first error seen: every later Write fails with it

	full   chan []byte   // filled chunks, to the writing goroutine
	free   chan []byte   // written chunks (nil: not allocated yet), back
	done   chan struct{} // closed when the writing goroutine has ended
	closed bool

	mu   sync.Mutex
	werr error // the writing goroutine's first error
}

func newSpoolWriter(w io.Writer) *spoolWriter {
	s := &spoolWriter{
		w:    w,
		h:    sha256.New(),
		buf:  make([]byte, 0, spoolBuffer),
		full: make(chan []byte, spoolChunks),
		free: make(chan []byte, spoolChunks),
		done: make(chan struct{}),
	}
	for range spoolChunks - 1 {
		s.free <- nil
	}
	go s.run()
	return s
}

// run hashes and writes the chunks sent on full, until Close closes it.
// After a write error it only hands the chunks back.
func (s *spoolWriter) run() {
	defer close(s.done)
	failed := false
	for p := range s.full {
		if !failed {
			s.h.Write(p)
			if _, err := s.w.Write(p); err != nil {
				failed = true
				s.mu.Lock()
				s.werr = err
				s.mu.Unlock()
			}
		}
		s.free <- p[:0] // after werr is set: whoever gets this chunk sees the error
	}
}

// writeErr returns the writing goroutine's error, if any.
func (s *spoolWriter) writeErr() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.werr
}

// Write implements io.Writer: it copies p into the chunks.
func (s *spoolWriter) Write(p []byte) (int, error) {
	if s.err == nil {
		s.err = s.writeErr()
	}
	if s.err != nil {
		return 0, s.err
	}
	if s.closed {
		return 0, errSpoolClosed
	}
	n := len(p)
	for len(p) > 0 {
		if len(s.buf) == cap(s.buf) {
			s.full <- s.buf
			s.buf = <-s.free
			if s.buf == nil {
				s.buf = make([]byte, 0, spoolBuffer)
			}
		}
		k := copy(s.buf[len(s.buf):cap(s.buf)], p)
		s.buf = s.buf[:len(s.buf)+k]
		p = p[k:]
	}
	s.n += int64(n)
	return n, nil
}

// Size returns the number of bytes written so far.
func (s *spoolWriter) Size() int64 { return s.n }

// Close writes what is buffered, waits for the writing goroutine to end and
// returns the first write error; it does not close the underlying writer.
func (s *spoolWriter) Close() error {
	if !s.closed {
		s.closed = true
		if len(s.buf) > 0 && s.err == nil {
			s.full <- s.buf
		}
		s.buf = nil
		close(s.full)
		<-s.done
		if s.err == nil {
			s.err = s.writeErr()
		}
	}
	return s.err
}

// Sum returns the lower-case hex SHA-256 of everything written; valid after
// a successful Close.
func (s *spoolWriter) Sum() string { return hex.EncodeToString(s.h.Sum(nil)) }
