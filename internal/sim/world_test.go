package sim_test

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/leaktest"
)

// TestWorldWaitsForItsGoroutines: once the world's Done is closed, no
// goroutine runs code of the simulator — no guest server, no model
// endpoint — even with a guest connection that never sends a request
// (which keeps that guest's Shutdown waiting until its grace ends).
func TestWorldWaitsForItsGoroutines(t *testing.T) {
	before, dir := leaktest.Take(), leaktest.Dir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	w, err := sim.StartWorld(ctx, instantWorld(2))
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
	if n := len(before.Running(dir, true)); n < 2*2+3*2+2 {
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
	before.WaitGone(t, dir, true, "after Done")
}

// TestStartWorldFailureStopsWhatItStarted: when StartWorld fails after
// starting some guest servers, they have stopped when it returns, though
// its context goes on.
func TestStartWorldFailureStopsWhatItStarted(t *testing.T) {
	before := leaktest.Take()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cfg := instantWorld(3)
	cfg.PerVM = map[int]guest.Config{2: {DieProb: 2}} // invalid: the third guest fails to start
	if w, err := sim.StartWorld(ctx, cfg); err == nil {
		t.Fatalf("StartWorld accepted die_prob 2 (world %v)", w.GuestURLs)
	}
	before.WaitGone(t, leaktest.Dir(), true, "after StartWorld failed")
}

// instantWorld is the default world with vms VMs and no simulated delays.
func instantWorld(vms int) sim.WorldConfig {
	cfg := sim.DefaultWorldConfig()
	cfg.VMs, cfg.Clock = vms, fault.Clock{Scale: 0}
	return cfg
}
