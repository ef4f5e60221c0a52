package sim_test

import (
	"context"
	"net"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
)

// TestWorldWaitsForItsGoroutines: once the world's Done is closed, no
// goroutine runs code of the simulator — no guest server, no model
// endpoint — even with a guest connection that never sends a request
// (which keeps that guest's Shutdown waiting until its grace ends).
func TestWorldWaitsForItsGoroutines(t *testing.T) {
	before := goroutineIDs()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := sim.DefaultWorldConfig()
	cfg.VMs, cfg.Clock = 2, fault.Clock{Scale: 0}
	w, err := sim.StartWorld(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", strings.TrimPrefix(w.GuestURLs[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// Two goroutines per guest server, three per model endpoint and one
	// more each for the endpoints and the world.
	if n := len(simGoroutines(before)); n < 2*2+3*2+2 {
		t.Fatalf("%d goroutines of the simulator while the world runs, want at least %d", n, 2*2+3*2+2)
	}
	select {
	case <-w.Done():
		t.Fatal("Done before the context ended")
	default:
	}
	cancel()
	waited := make(chan struct{})
	go func() { w.Wait(); close(waited) }()
	select {
	case <-waited:
	case <-time.After(15 * time.Second):
		t.Fatal("the world did not stop within 15 s of its context ending")
	}
	select {
	case <-w.Done():
	default:
		t.Fatal("Wait returned before Done was closed")
	}
	noSimGoroutines(t, before, "after Done")
}

// TestStartWorldFailureStopsWhatItStarted: when StartWorld fails after
// starting some guest servers, they have stopped when it returns, though
// its context goes on.
func TestStartWorldFailureStopsWhatItStarted(t *testing.T) {
	before := goroutineIDs()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := sim.DefaultWorldConfig()
	cfg.VMs, cfg.Clock = 3, fault.Clock{Scale: 0}
	cfg.PerVM = map[int]guest.Config{2: {DieProb: 2}} // invalid: the third guest fails to start
	if w, err := sim.StartWorld(ctx, cfg); err == nil {
		t.Fatalf("StartWorld accepted die_prob 2 (world %v)", w.GuestURLs)
	}
	noSimGoroutines(t, before, "after StartWorld failed")
}

// noSimGoroutines fails unless, within a second (a goroutine may still
// be returning from the function that signalled its end), no goroutine
// but those in before runs code of the simulator.
func noSimGoroutines(t *testing.T, before map[int]bool, when string) {
	t.Helper()
	deadline := time.Now().Add(time.Second)
	for {
		left := simGoroutines(before)
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s, %d goroutines still run code of the simulator:\n\n%s", when, len(left), strings.Join(left, "\n\n"))
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

// goroutineIDs returns the ids of the goroutines now (an id is never
// reused, but ids are not handed out in order).
func goroutineIDs() map[int]bool {
	ids := map[int]bool{}
	for _, s := range allStacks() {
		ids[goroutineID(s)] = true
	}
	return ids
}

// simGoroutines returns the stacks of the goroutines, other than those in
// before, that have a frame in a non-test file of the simulator (this
// package and its sub-packages) or were created by one.
func simGoroutines(before map[int]bool) []string {
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Dir(self) + string(filepath.Separator)
	var out []string
	for _, s := range allStacks() {
		if before[goroutineID(s)] {
			continue
		}
		for _, line := range strings.Split(s, "\n") {
			file, _, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && strings.HasPrefix(file, dir) && !strings.HasSuffix(file, "_test.go") {
				out = append(out, s)
				break
			}
		}
	}
	return out
}
