package vmpool

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"image"
	"image/png"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/lockfile"
)

// TestMain doubles as the child process of the cross-process lock test:
// with VMPOOL_TEST_HOLD_LOCK_DIR set, the test binary takes that lock,
// says "locked", and holds it until its stdin closes.
func TestMain(m *testing.M) {
	if dir := os.Getenv("VMPOOL_TEST_HOLD_LOCK_DIR"); dir != "" {
		os.Exit(holdLock(dir, os.Getenv("VMPOOL_TEST_HOLD_LOCK_KEY")))
	}
	os.Exit(m.Run())
}

func holdLock(dir, key string) int {
	l, holder, err := lockfile.TryLock(dir, key, "test-child")
	switch {
	case err != nil:
		fmt.Println("error:", err)
		return 2
	case l == nil:
		fmt.Println("held:", holder)
		return 3
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin) // until the parent closes our stdin
	_ = l.Unlock()
	return 0
}

// testPNG is a small real PNG.
var testPNG = func() []byte {
	var b bytes.Buffer
	_ = png.Encode(&b, image.NewRGBA(image.Rect(0, 0, 8, 5)))
	return b.Bytes()
}()

// fakeGuest is a guest server for tests: the OSWorld calls the pool uses
// (/screenshot, /setup/execute, /screen_size) and the simulator's /sim/
// control endpoints.
type fakeGuest struct {
	srv *httptest.Server

	mu          sync.Mutex
	resetDelay  time.Duration
	status      string // /sim/health status; "" is "ok"
	execs       []string
	execFail    bool
	shotFail    bool // /screenshot answers 500
	noSim       bool // /sim/* answers 404 (a real guest)
	resets      int
	screenshots int
	sizes       int
}

func newFakeGuest(t *testing.T) *fakeGuest {
	t.Helper()
	g := &fakeGuest{}
	g.srv = httptest.NewServer(g)
	t.Cleanup(g.srv.Close)
	return g
}

func (g *fakeGuest) URL() string { return g.srv.URL }

func (g *fakeGuest) set(f func(g *fakeGuest)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

func (g *fakeGuest) get() fakeGuest {
	g.mu.Lock()
	defer g.mu.Unlock()
	return fakeGuest{resets: g.resets, screenshots: g.screenshots, sizes: g.sizes, execs: append([]string(nil), g.execs...)}
}

func (g *fakeGuest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	noSim, shotFail, execFail, delay, status := g.noSim, g.shotFail, g.execFail, g.resetDelay, g.status
	g.mu.Unlock()
	writeJSON := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if noSim && strings.HasPrefix(r.URL.Path, "/sim/") {
		http.NotFound(w, r)
		return
	}
	switch r.URL.Path {
	case "/screenshot":
		g.set(func(g *fakeGuest) { g.screenshots++ })
		if shotFail {
			writeJSON(500, map[string]string{"status": "error", "message": "screenshot failed"})
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(testPNG)
	case "/screen_size":
		g.set(func(g *fakeGuest) { g.sizes++ })
		writeJSON(200, map[string]int{"width": 1280, "height": 800})
	case "/setup/execute", "/execute":
		var body struct {
			Command any  `json:"command"`
			Shell   bool `json:"shell"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		g.set(func(g *fakeGuest) { g.execs = append(g.execs, fmt.Sprint(body.Command)) })
		if execFail {
			writeJSON(500, map[string]any{"status": "error", "message": "nmcli: command not found"})
			return
		}
		writeJSON(200, map[string]any{"status": "success", "output": "", "error": "", "returncode": 0})
	case "/sim/reset":
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		g.set(func(g *fakeGuest) { g.resets++; g.status = "" })
		writeJSON(200, map[string]string{"status": "success"})
	case "/sim/health":
		if status == "" {
			writeJSON(200, map[string]any{"status": "ok", "simulator": true})
			return
		}
		writeJSON(503, map[string]any{"status": status, "simulator": true})
	default:
		http.NotFound(w, r)
	}
}

// testBackend is a Backend whose behaviour each test scripts.
type testBackend struct {
	specs []VMSpec
	url   string // guest URL of every VM; default a closed port

	onStart  func(ctx context.Context, id string) error
	onReset  func(ctx context.Context, id string) error
	onHealth func(ctx context.Context, id string, g *guest.Client) error

	mu     sync.Mutex
	calls  []string
	counts map[string]int // "reset vm-0" → n
}

func newTestBackend(n int, keyPrefix string) *testBackend {
	b := &testBackend{url: "http://127.0.0.1:9", counts: map[string]int{}}
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("vm-%d", i)
		b.specs = append(b.specs, VMSpec{ID: id, Key: keyPrefix + id, Label: "test " + id})
	}
	return b
}

func (b *testBackend) record(op, id string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.calls = append(b.calls, op+" "+id)
	b.counts[op+" "+id]++
}

func (b *testBackend) count(op, id string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.counts[op+" "+id]
}

func (b *testBackend) Name() string                              { return "test" }
func (b *testBackend) VMs(ctx context.Context) ([]VMSpec, error) { return b.specs, nil }

func (b *testBackend) Start(ctx context.Context, vm VMSpec) (Endpoint, error) {
	b.record("start", vm.ID)
	if b.onStart != nil {
		if err := b.onStart(ctx, vm.ID); err != nil {
			return Endpoint{}, err
		}
	}
	return Endpoint{GuestURL: b.url}, nil
}

func (b *testBackend) Reset(ctx context.Context, vm VMSpec) (Endpoint, error) {
	b.record("reset", vm.ID)
	if b.onReset != nil {
		if err := b.onReset(ctx, vm.ID); err != nil {
			return Endpoint{}, err
		}
	}
	return Endpoint{GuestURL: b.url}, nil
}

func (b *testBackend) Health(ctx context.Context, vm VMSpec, g *guest.Client) error {
	b.record("health", vm.ID)
	if b.onHealth != nil {
		return b.onHealth(ctx, vm.ID, g)
	}
	return nil
}

func (b *testBackend) Stop(ctx context.Context, vm VMSpec) error {
	b.record("stop", vm.ID)
	return nil
}

func (b *testBackend) Close(ctx context.Context) error {
	b.record("close", "")
	return nil
}

// hang blocks until ctx ends, as a wedged VM does.
func hang(ctx context.Context) error {
	<-ctx.Done()
	return ctx.Err()
}

// eventLog records pool events.
type eventLog struct {
	mu   sync.Mutex
	list []Event
}

func (e *eventLog) add(ev Event) {
	e.mu.Lock()
	e.list = append(e.list, ev)
	e.mu.Unlock()
}

func (e *eventLog) events() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.list...)
}

// count is the number of events of kind for vm ("" for any VM).
func (e *eventLog) count(kind EventKind, vm string) int {
	n := 0
	for _, ev := range e.events() {
		if ev.Kind == kind && (vm == "" || ev.VM == vm) {
			n++
		}
	}
	return n
}

// index is the position of the n-th (1-based) event of kind for vm, or -1.
func (e *eventLog) index(kind EventKind, vm string, n int) int {
	for i, ev := range e.events() {
		if ev.Kind == kind && (vm == "" || ev.VM == vm) {
			n--
			if n == 0 {
				return i
			}
		}
	}
	return -1
}

// waitCount waits until there are at least n events of kind for vm.
func (e *eventLog) waitCount(t *testing.T, kind EventKind, vm string, n int) {
	t.Helper()
	waitFor(t, fmt.Sprintf("%d %s events of %q", n, kind, vm), func() bool { return e.count(kind, vm) >= n })
}

func (e *eventLog) String() string {
	var b strings.Builder
	for _, ev := range e.events() {
		fmt.Fprintf(&b, "%s %s", ev.VM, ev.Kind)
		if ev.Err != nil {
			fmt.Fprintf(&b, " (%v)", ev.Err)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// waitFor polls cond for up to 10 s.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// syncBuffer is a log sink safe for concurrent writes.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// testConfig is a pool configuration with short times for tests.
func testConfig(t *testing.T) Config {
	return Config{
		ID:        "test",
		LockDir:   t.TempDir(),
		LockRetry: 20 * time.Millisecond,
		IdleCheck: -1,
		RetryWait: 5 * time.Millisecond,
		Timeouts:  Timeouts{Start: 5 * time.Second, Reset: 5 * time.Second, Health: 2 * time.Second, Stop: 2 * time.Second},
	}
}

type testPool struct {
	*Pool
	ev  *eventLog
	log *syncBuffer
}

// newTestPool makes a pool under cfg over b and closes it when the test
// ends.
func newTestPool(t *testing.T, cfg Config, b Backend) *testPool {
	t.Helper()
	return newLoggedPool(t, cfg, func(*slog.Logger) (Backend, error) { return b, nil })
}

// newLoggedPool is newTestPool over the backend that newBackend makes; its
// logger is the pool's, so the test sees what the backend logs.
func newLoggedPool(t *testing.T, cfg Config, newBackend func(*slog.Logger) (Backend, error)) *testPool {
	t.Helper()
	tp := &testPool{ev: &eventLog{}, log: &syncBuffer{}}
	log := slog.New(slog.NewTextHandler(tp.log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b, err := newBackend(log)
	if err != nil {
		t.Fatalf("backend: %v", err)
	}
	p, err := NewPool(context.Background(), cfg, b, WithEvents(tp.ev.add), WithLogger(log))
	if err != nil {
		t.Fatalf("NewPool: %v", err)
	}
	tp.Pool = p
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = p.Close(ctx)
		if t.Failed() {
			t.Logf("events:\n%s\nlog:\n%s", tp.ev, tp.log)
		}
	})
	return tp
}

// lease leases with a deadline of a few seconds.
func (p *testPool) lease(t *testing.T) *Lease {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	l, err := p.Lease(ctx)
	if err != nil {
		t.Fatalf("Lease: %v", err)
	}
	return l
}

// goroutineBaseline returns a check that the goroutine count comes back
// to what it is now (polling: goroutines take a moment to end).
func goroutineBaseline(t *testing.T) func() {
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

// readLine reads one line from r with a deadline.
func readLine(t *testing.T, r io.Reader) string {
	t.Helper()
	ch := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(r).ReadString('\n')
		ch <- strings.TrimSpace(line)
	}()
	select {
	case l := <-ch:
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("no line from the child process")
	}
	return ""
}

func discardLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }
