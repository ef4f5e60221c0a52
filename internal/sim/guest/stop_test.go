package guest_test

import (
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/leaktest"
)

// TestStartWaitsForItsGoroutines: once Done is closed no goroutine runs
// code of this package — not the server's own goroutines, not a handler —
// even with a hung call in flight, an idle keep-alive connection and a
// connection that never sends a request (which keeps Shutdown waiting
// until its grace ends and the server closes it).
func TestStartWaitsForItsGoroutines(t *testing.T) {
	before, dir := leaktest.Take(), leaktest.Dir()
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
	if n := len(before.Running(dir, false)); n < 3 {
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
	before.WaitGone(t, dir, false, "after Done")
}
