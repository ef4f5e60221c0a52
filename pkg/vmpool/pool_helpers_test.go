package vmpool_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
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

// testBackend is a Backend whose behaviour each test scripts.
type testBackend struct {
	specs []vmpool.VMSpec
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
		b.specs = append(b.specs, vmpool.VMSpec{ID: id, Key: keyPrefix + id, Label: "test " + id})
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

func (b *testBackend) Name() string                                     { return "test" }
func (b *testBackend) VMs(ctx context.Context) ([]vmpool.VMSpec, error) { return b.specs, nil }

func (b *testBackend) Start(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	return b.bringUp(ctx, "start", vm.ID, b.onStart)
}

func (b *testBackend) Reset(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	return b.bringUp(ctx, "reset", vm.ID, b.onReset)
}

// bringUp records op and runs the test's hook for it, if any.
func (b *testBackend) bringUp(ctx context.Context, op, id string, hook func(ctx context.Context, id string) error) (vmpool.Endpoint, error) {
	b.record(op, id)
	if hook != nil {
		if err := hook(ctx, id); err != nil {
			return vmpool.Endpoint{}, err
		}
	}
	return vmpool.Endpoint{GuestURL: b.url}, nil
}

func (b *testBackend) Health(ctx context.Context, vm vmpool.VMSpec, g *guest.Client) error {
	b.record("health", vm.ID)
	if b.onHealth != nil {
		return b.onHealth(ctx, vm.ID, g)
	}
	return nil
}

func (b *testBackend) Stop(ctx context.Context, vm vmpool.VMSpec) error {
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

// losableLocker is a Locker whose locks the test can take away, as a
// key-value lock with a TTL is lost when its holder cannot renew it: lose
// closes the lock's Lost channel and hands the key to "another host"
// until free.
type losableLocker struct {
	mu    sync.Mutex
	held  map[string]*losableLock
	other map[string]bool // keys another holder has
	takes map[string]int
	// gate, when set, is called (without mu) at the start of each
	// TryLock: a test holds a TryLock there, as a slow network does.
	gate func(key string)
}

type losableLock struct {
	l    *losableLocker
	key  string
	lost chan struct{}
	once sync.Once
}

func newLosableLocker() *losableLocker {
	return &losableLocker{held: map[string]*losableLock{}, other: map[string]bool{}, takes: map[string]int{}}
}

func (f *losableLocker) TryLock(key, note string) (vmpool.Lock, string, error) {
	if f.gate != nil {
		f.gate(key)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.other[key] {
		return nil, "another host", nil
	}
	if f.held[key] != nil {
		return nil, "this host", nil
	}
	l := &losableLock{l: f, key: key, lost: make(chan struct{})}
	f.held[key] = l
	f.takes[key]++
	return l, "", nil
}

func (l *losableLock) Unlock() error {
	l.l.mu.Lock()
	defer l.l.mu.Unlock()
	if l.l.held[l.key] == l {
		delete(l.l.held, l.key)
	}
	return nil
}

func (l *losableLock) Lost() <-chan struct{} { return l.lost }

// lose takes key's lock away from its holder and gives it to another.
func (f *losableLocker) lose(key string) {
	f.mu.Lock()
	l := f.held[key]
	delete(f.held, key)
	f.other[key] = true
	f.mu.Unlock()
	if l != nil {
		l.once.Do(func() { close(l.lost) })
	}
}

// free lets the other holder go.
func (f *losableLocker) free(key string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.other, key)
}

func (f *losableLocker) taken(key string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.takes[key]
}
