// Package pooltest holds the fixtures that the tests of the vmpool
// packages share: a fake guest server, a pool whose events and log a test
// can read, and helpers that poll for a condition instead of sleeping.
package pooltest

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/png"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/pkg/vmpool"
)

// PNG is a small real PNG.
var PNG = func() []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 8, 5)))
	return b.Bytes()
}()

// EventLog records pool events (give its Add to vmpool.WithEvents).
type EventLog struct {
	mu   sync.Mutex
	list []vmpool.Event
}

// Add records ev.
func (e *EventLog) Add(ev vmpool.Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
}

// Events are the events so far, oldest first.
func (e *EventLog) Events() []vmpool.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]vmpool.Event(nil), e.list...)
}

// Count is the number of events of kind for vm ("" for any VM).
func (e *EventLog) Count(kind vmpool.EventKind, vm string) int {
	n := 0
	for _, ev := range e.Events() {
		if ev.Kind == kind && (vm == "" || ev.VM == vm) {
			n++
		}
	}
	return n
}

// Index is the position of the n-th (1-based) event of kind for vm, or -1.
func (e *EventLog) Index(kind vmpool.EventKind, vm string, n int) int {
	for i, ev := range e.Events() {
		if ev.Kind == kind && (vm == "" || ev.VM == vm) {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}

// Last is the last event of kind for vm ("" for any VM); ok is false when
// there is none.
func (e *EventLog) Last(kind vmpool.EventKind, vm string) (ev vmpool.Event, ok bool) {
	for _, x := range e.Events() {
		if x.Kind == kind && (vm == "" || x.VM == vm) {
			ev, ok = x, true
		}
	}
	return ev, ok
}

// WaitCount waits until there are at least n events of kind for vm.
func (e *EventLog) WaitCount(t testing.TB, kind vmpool.EventKind, vm string, n int) {
	t.Helper()
	poll.Until(t, fmt.Sprintf("%d %s events of %q", n, kind, vm), 10*time.Second, func() bool { return e.Count(kind, vm) >= n })
}

// String lists the events, one a line, for a failing test's log.
func (e *EventLog) String() string {
	var b strings.Builder
	for _, ev := range e.Events() {
		fmt.Fprintf(&b, "%s %s", ev.VM, ev.Kind)
		if ev.Err != nil {
			fmt.Fprintf(&b, " (%v)", ev.Err)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// Config is a pool configuration with short times for tests and a lock
// directory of the test's own.
func Config(t testing.TB) vmpool.Config {
	return vmpool.Config{
		ID:        "test",
		LockDir:   t.TempDir(),
		LockRetry: 20 * time.Millisecond,
		IdleCheck: -1,
		RetryWait: 5 * time.Millisecond,
		Timeouts:  vmpool.Timeouts{Start: 5 * time.Second, Reset: 5 * time.Second, Health: 2 * time.Second, Stop: 2 * time.Second},
	}
}

// Pool is a pool whose events and log the test reads.
type Pool struct {
	*vmpool.Pool
	Events *EventLog      // every event of the pool
	Log    *syncio.Buffer // the pool's and its backend's log, at debug level
}

// NewPool makes a pool under cfg over b, with opts, and closes it when
// the test ends.
func NewPool(t testing.TB, cfg vmpool.Config, b vmpool.Backend, opts ...vmpool.Option) *Pool {
	t.Helper()
	return NewLoggedPool(t, cfg, func(*slog.Logger) (vmpool.Backend, error) { return b, nil }, opts...)
}

// NewLoggedPool is NewPool over the backend that newBackend makes with the
// pool's logger, so that the test sees what the backend logs too.
func NewLoggedPool(t testing.TB, cfg vmpool.Config, newBackend func(*slog.Logger) (vmpool.Backend, error), opts ...vmpool.Option) *Pool {
	t.Helper()
	tp := &Pool{Events: &EventLog{}, Log: &syncio.Buffer{}}
	log := slog.New(slog.NewTextHandler(tp.Log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := newBackend(log)
	if err != nil {
		t.Fatalf("backend: %v", err)
	}
	p, err := vmpool.NewPool(context.Background(), cfg, b, append([]vmpool.Option{vmpool.WithEvents(tp.Events.Add), vmpool.WithLogger(log)}, opts...)...)
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	tp.Pool = p
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
		if t.Failed() {
			t.Logf("events:\n%s\nlog:\n%s", tp.Events, tp.Log)
		}
	})
	return tp
}

// MustLease leases a VM with a deadline of 10 s and fails the test if
// none comes.
func (p *Pool) MustLease(t testing.TB) *vmpool.Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.Lease(ctx)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	return l
}

// WantQuarantine waits until vm is quarantined and returns its record. The
// test fails unless vm is the only VM quarantined, for reason ("" for any
// reason), with an error whose text contains each of texts.
func (p *Pool) WantQuarantine(t testing.TB, vm, reason string, texts ...string) vmpool.Quarantine {
	t.Helper()
	p.Events.WaitCount(t, vmpool.EventQuarantined, vm, 1)
	q := p.Quarantined()
	if len(q) != 1 || q[0].VM != vm || (reason != "" && q[0].Reason != reason) || q[0].Err == nil {
		t.Fatalf("quarantine = %+v, want %s's alone, for %q", q, vm, reason)
	}
	for _, text := range texts {
		if !strings.Contains(q[0].Err.Error(), text) {
			t.Errorf("quarantine error %q does not say %q", q[0].Err, text)
		}
	}
	return q[0]
}

// CloseWithin closes p and fails the test if that takes longer than d
// (a command's children that outlive their deadline hold Close up).
func (p *Pool) CloseWithin(t testing.TB, d time.Duration) {
	t.Helper()
	begin := time.Now()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(begin); took > d {
		t.Fatalf("Close took %v, want at most %v", took, d)
	}
}

// GoroutineBaseline returns a check that the goroutine count comes back
// to what it is now (polling: goroutines take a moment to end).
func GoroutineBaseline(t testing.TB) func() {
	t.Helper()
	before := runtime.NumGoroutine()
	return func() {
		t.Helper()
		deadline := time.Now().Add(5 * time.Second)
		for runtime.NumGoroutine() > before {
			if time.Now().After(deadline) {
				buf := make([]byte, 1<<20)
				n := runtime.Stack(buf, true)
				t.Fatalf("goroutines: %d before, %d after Close:\n%s", before, runtime.NumGoroutine(), buf[:n])
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
}

// FakeExec copies the fake executable testdata/name (of the test's
// package) into a temporary directory with the execute bit set, and
// returns its path.
func FakeExec(t testing.TB, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// ConfigCase is a backend configuration that its constructor must refuse
// with an error containing Want.
type ConfigCase[C any] struct {
	Name string // the subtest's name
	Cfg  C      // the configuration to refuse
	Want string // what the error must say
}

// WantConfigErrors runs each case as a subtest: newBackend(c.Cfg) must
// fail with an error that contains c.Want.
func WantConfigErrors[C any](t *testing.T, cases []ConfigCase[C], newBackend func(C) error) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.Name, func(t *testing.T) {
			if err := newBackend(c.Cfg); err == nil || !strings.Contains(err.Error(), c.Want) {
				t.Errorf("%+v: error %v, want %q", c.Cfg, err, c.Want)
			}
		})
	}
}
