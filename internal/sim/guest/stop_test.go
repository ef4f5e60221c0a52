package guest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
)

// TestStartWaitsForItsGoroutines: once Done is closed no goroutine runs
// code of this package — not the server's own goroutines, not a handler —
// even with a hung call in flight, an idle keep-alive connection and a
// connection that never sends a request (which keeps Shutdown waiting
// until its grace ends and the server closes it).
func TestStartWaitsForItsGoroutines(t *testing.T) {
	before := goroutineIDs()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := guest.Start(ctx, desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1}), guest.Config{Faults: fault.Faults{HangProb: 1}})
	if err != nil {
		t.Fatal(err)
	}

	// A call that hangs in the handler until the context ends.
	hung := make(chan error, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/platform")
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	// An idle keep-alive connection (control calls are never faulted).
	keepAlive := &http.Client{Transport: &http.Transport{}}
	defer keepAlive.CloseIdleConnections()
	var stats struct{ Hangs int }
	deadline := time.Now().Add(5 * time.Second)
	for stats.Hangs == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the hung call never reached the server")
		}
		resp, err := keepAlive.Get(srv.URL + "/sim/stats")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(b, &stats); err != nil {
			t.Fatalf("/sim/stats: %s: %v", b, err)
		}
	}
	// A connection that never sends a request.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The check sees the server while it runs (its goroutines and the
	// hung handler), so an empty answer below means they have ended.
	if n := len(packageGoroutines(before)); n < 3 {
		t.Fatalf("%d goroutines of the guest server while it runs, want at least 3 (serve, shutdown, the hung handler)", n)
	}

	select {
	case <-srv.Done():
		t.Fatal("Done before the context ended")
	default:
	}
	cancel()
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop within 10 s of its context ending")
	}
	if err := <-hung; err == nil {
		t.Error("the hung call got an answer; want the connection dropped")
	}
	// A goroutine may still be returning from the function that closed
	// Done; nothing may be left after that.
	deadline = time.Now().Add(time.Second)
	for {
		left := packageGoroutines(before)
		if len(left) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after Done, %d goroutines still run code of the guest server:\n\n%s", len(left), strings.Join(left, "\n\n"))
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

// packageGoroutines returns the stacks of the goroutines, other than
// those in before, that have a frame in a non-test file of this package
// or were created by one.
func packageGoroutines(before map[int]bool) []string {
	_, self, _, _ := runtime.Caller(0)
	dir := filepath.Dir(self) + string(filepath.Separator)
	var out []string
	for _, s := range allStacks() {
		if before[goroutineID(s)] {
			continue
		}
		for _, line := range strings.Split(s, "\n") {
			file, _, ok := strings.Cut(strings.TrimSpace(line), ":")
			if ok && strings.HasPrefix(file, dir) && !strings.Contains(file[len(dir):], string(filepath.Separator)) && !strings.HasSuffix(file, "_test.go") {
				out = append(out, s)
				break
			}
		}
	}
	return out
}
