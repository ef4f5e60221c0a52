package vmpool

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// simConfig is the sim backend's configuration of guests.
func simConfig(guests ...*fakeGuest) SimConfig {
	var urls []string
	for _, g := range guests {
		urls = append(urls, g.URL())
	}
	sc := SimURLs(urls...)
	sc.PollInterval = 5 * time.Millisecond
	return sc
}

// newSimPool makes a pool under cfg over the sim backend of sc.
func newSimPool(t *testing.T, cfg Config, sc SimConfig) *testPool {
	t.Helper()
	return newLoggedPool(t, cfg, func(*slog.Logger) (Backend, error) { return NewSimBackend(sc) })
}

func TestSimBackend(t *testing.T) {
	g0, g1 := newFakeGuest(t), newFakeGuest(t)
	g0.set(func(g *fakeGuest) { g.resetDelay = 20 * time.Millisecond })
	p := newSimPool(t, testConfig(t), simConfig(g0, g1))
	l := p.lease(t)
	g := map[string]*fakeGuest{"sim-0": g0, "sim-1": g1}[l.ID()]
	if g == nil || l.Guest().BaseURL() != g.URL() || l.Endpoint().StateURL != g.URL() {
		t.Fatalf("lease %s: guest %s, state %s", l.ID(), l.Guest().BaseURL(), l.Endpoint().StateURL)
	}
	if _, err := l.Guest().Screenshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := g.get().resets; n != 1 {
		t.Fatalf("%d /sim/reset calls at start, want 1", n)
	}
	_ = l.End(Healthy)
	p.ev.waitCount(t, EventReady, l.ID(), 2)
	if n := g.get().resets; n != 2 {
		t.Fatalf("%d /sim/reset calls after a release, want 2", n)
	}
}

// A simulated guest that died (its /sim/health says so) is reset by the
// pool's idle check and comes back.
func TestSimBackendDeadGuestRevived(t *testing.T) {
	g0 := newFakeGuest(t)
	cfg := testConfig(t)
	cfg.IdleCheck = 20 * time.Millisecond
	p := newSimPool(t, cfg, simConfig(g0))
	p.ev.waitCount(t, EventReady, "sim-0", 1)
	g0.set(func(g *fakeGuest) { g.status = "dead" })
	p.ev.waitCount(t, EventFailed, "sim-0", 1)
	p.ev.waitCount(t, EventReady, "sim-0", 2)
	if n := g0.get().resets; n < 2 {
		t.Fatalf("%d resets, want a reset after the failed check", n)
	}
	if len(p.Quarantined()) != 0 {
		t.Fatal("quarantined")
	}
	var failed Event
	for _, ev := range p.ev.events() {
		if ev.Kind == EventFailed {
			failed = ev
		}
	}
	if !strings.Contains(failed.Err.Error(), "is dead (HTTP 503)") {
		t.Fatalf("failure %v", failed.Err)
	}
	p.lease(t)
}

// A real guest server is not a simulator: the error says which backend to
// use.
func TestSimBackendNotASimulator(t *testing.T) {
	g0 := newFakeGuest(t)
	g0.set(func(g *fakeGuest) { g.noSim = true })
	p := newSimPool(t, testConfig(t), simConfig(g0))
	_, err := p.Lease(context.Background())
	if !errors.Is(err, ErrNoVMs) || !strings.Contains(err.Error(), "not a codapipe simulator guest; use backend: guest") {
		t.Fatalf("Lease: %v", err)
	}
}

func TestSimBackendHealthScreenshot(t *testing.T) {
	g0 := newFakeGuest(t)
	sc := simConfig(g0)
	sc.Health = SimHealthScreenshot
	p := newSimPool(t, testConfig(t), sc)
	p.lease(t)
	if n := g0.get().screenshots; n < 2 {
		t.Fatalf("%d screenshots, want readiness and health by screenshot", n)
	}
}

func TestSimConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  SimConfig
		want string
	}{
		{SimConfig{}, "sim.vms: empty"},
		{SimURLs("ftp://x"), "sim.vms[0].url"},
		{SimConfig{VMs: []SimVM{{ID: "-x", URL: "http://a"}}}, "sim.vms[0].id"},
		{SimConfig{VMs: []SimVM{{URL: "http://a"}}, Health: "ping"}, "sim.health"},
	} {
		if _, err := NewSimBackend(tc.cfg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
