package shard

import (
	"crypto/sha256"
	"encoding/hex"
	"hash"
	"io"
	"sync"
)

// spoolBuffer is the size of spoolWriter's buffer for small writes.
const spoolBuffer = 1 << 20

// spoolWriter writes a stream to a file while hashing it (SHA-256). Small
// writes are gathered in a buffer; each buffer-full, and each large write
// directly (without a copy), is hashed on a second goroutine while it is
// written to the file, so that hashing costs no time of its own. It is not
// safe for concurrent use.
type spoolWriter struct {
	w   io.Writer
	h   hash.Hash
	n   int64 // bytes accepted
	buf []byte
	err error // the first write error: every later Write fails with it

	hashReq  chan []byte
	hashDone chan struct{}
	once     sync.Once
}

func newSpoolWriter(w io.Writer) *spoolWriter {
	s := &spoolWriter{
		w:        w,
		h:        sha256.New(),
		buf:      make([]byte, 0, spoolBuffer),
		hashReq:  make(chan []byte),
		hashDone: make(chan struct{}),
	}
	go func() {
		for p := range s.hashReq {
			s.h.Write(p)
			s.hashDone <- struct{}{}
		}
	}()
	return s
}

// emit hashes p on the hashing goroutine while writing it to w, and
// returns when both are done.
func (s *spoolWriter) emit(p []byte) error {
	if len(p) == 0 {
		return nil
	}
	s.hashReq <- p
	_, err := s.w.Write(p)
	<-s.hashDone
	return err
}

// Write implements io.Writer.
func (s *spoolWriter) Write(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n := len(p)
	if len(s.buf)+len(p) <= cap(s.buf) {
		s.buf = append(s.buf, p...)
		s.n += int64(n)
		return n, nil
	}
	if err := s.emit(s.buf); err != nil {
		s.err = err
		return 0, err
	}
	s.buf = s.buf[:0]
	if len(p) >= cap(s.buf)/2 {
		if err := s.emit(p); err != nil {
			s.err = err
			return 0, err
		}
	} else {
		s.buf = append(s.buf, p...)
	}
	s.n += int64(n)
	return n, nil
}

// Size returns the number of bytes written so far.
func (s *spoolWriter) Size() int64 { return s.n }

// Close writes what is buffered and stops the hashing goroutine; it does
// not close the underlying writer. It returns the first write error.
func (s *spoolWriter) Close() error {
	if s.err == nil {
		if err := s.emit(s.buf); err != nil {
			s.err = err
		}
		s.buf = s.buf[:0]
	}
	s.once.Do(func() { close(s.hashReq) })
	return s.err
}

// Sum returns the lower-case hex SHA-256 of everything written; valid after
// a successful Close.
func (s *spoolWriter) Sum() string { return hex.EncodeToString(s.h.Sum(nil)) }
