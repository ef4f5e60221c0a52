// Package leaktest is part of codapipe's SIMULATOR (see package sim):
// test support that finds the goroutines running the code of a folder, so
// that a test can prove a server has waited for every goroutine it
// started (every goroutine has an owner).
package leaktest

import (
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Snapshot is the set of goroutines (by id) that ran at some moment. Ids
// are never reused, but not handed out in order.
type Snapshot map[int]bool

// Take returns the goroutines running now.
func Take() Snapshot {
	ids := Snapshot{}
	for _, s := range allStacks() {
		ids[goroutineID(s)] = true
	}
	return ids
}

// Dir returns the folder of the caller's source file.
func Dir() string {
	_, file, _, _ := runtime.Caller(1)
	return filepath.Dir(file)
}

// Running returns the stacks of the goroutines, other than those in s,
// that have a frame in a non-test file of dir (with sub, of its
// sub-folders too) or were created by one.
func (s Snapshot) Running(dir string, sub bool) []string {
	dir += string(filepath.Separator)
	var out []string
	for _, st := range allStacks() {
		if s[goroutineID(st)] {
			continue
		}
		for _, line := range strings.Split(st, "\n") {
			file, _, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && strings.HasPrefix(file, dir) && (sub || !strings.Contains(file[len(dir):], string(filepath.Separator))) && !strings.HasSuffix(file, "_test.go") {
				out = append(out, st)
				break
			}
		}
	}
	return out
}

// WaitGone fails t unless, within a second (a goroutine may still be
// returning from the function that signalled its end), no goroutine but
// those in s runs code of dir (see Running); when says when, for the
// message.
func (s Snapshot) WaitGone(t testing.TB, dir string, sub bool, when string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		left := s.Running(dir, sub)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, %d goroutines still run code of %s:\n\n%s", when, len(left), dir, strings.Join(left, "\n\n"))
		}
		runtime.Gosched()
	}
}

var goroutineHeader = regexp.MustCompile(`^goroutine (\d+) `)

// allStacks returns the stacks of every goroutine.
func allStacks() []string {
	buf := make([]byte, 1<<16)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			return strings.Split(string(buf[:n]), "\n\n")
		}
		buf = make([]byte, 2*len(buf))
	}
}

func goroutineID(stack string) int {
	m := goroutineHeader.FindStringSubmatch(stack)
	if m == nil {
		return 0
	}
	id, _ := strconv.Atoi(m[1])
	return id
}
