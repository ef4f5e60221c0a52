// Package errtext writes values into the error messages of the vmpool
// packages: durations rounded for people, long texts cut, and the line of
// a command's output that says what went wrong.
package errtext

import (
	"strings"
	"time"
)

// Duration rounds d for a message: to 10 ms from a second up, to 1 ms
// from a millisecond up, not at all below.
func Duration(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d
}

// Truncate cuts s to n bytes, marking the cut with "...".
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// FirstLine is the first line of s, trimmed and cut to 200 bytes.
func FirstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return Truncate(s, 200)
}

// LastLine is the last line of s, trimmed and cut to 200 bytes: a Python
// traceback, like most command output, ends with what went wrong.
func LastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return Truncate(s, 200)
}
