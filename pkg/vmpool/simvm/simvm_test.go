package simvm

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/pooltest"
)

// simConfig is the sim backend's configuration of guests.
func simConfig(guests ...*pooltest.FakeGuest) Config {
	var urls []string
	for _, g := range guests {
		urls = append(urls, g.URL())
	}
	sc := URLs(urls...)
	sc.PollInterval = 5 * time.Millisecond
	return sc
}

// newSimPool makes a pool under cfg over the sim backend of sc.
func newSimPool(t *testing.T, cfg vmpool.Config, sc Config) *pooltest.Pool {
	t.Helper()
	return pooltest.NewLoggedPool(t, cfg, func(*slog.Logger) (vmpool.Backend, error) { return New(sc) })
}

func TestSimBackend(t *testing.T) {
	g0, g1 := pooltest.NewFakeGuest(t), pooltest.NewFakeGuest(t)
	g0.Set(func(g *pooltest.FakeGuest) { g.ResetDelay = 20 * time.Millisecond })
	p := newSimPool(t, pooltest.Config(t), simConfig(g0, g1))
	l := p.MustLease(t)
	g := map[string]*pooltest.FakeGuest{"sim-0": g0, "sim-1": g1}[l.ID()]
	if g == nil || l.Guest().BaseURL() != g.URL() || l.Endpoint().StateURL != g.URL() {
		t.Fatalf("lease %s: guest %s, state %s", l.ID(), l.Guest().BaseURL(), l.Endpoint().StateURL)
	}
	if _, err := l.Guest().Screenshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := g.Calls().Resets; n != 1 {
		t.Fatalf("%d /sim/reset calls at start, want 1", n)
	}
	_ = l.End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventReady, l.ID(), 2)
	if n := g.Calls().Resets; n != 2 {
		t.Fatalf("%d /sim/reset calls after a release, want 2", n)
	}
}

// A simulated guest that died (its /sim/health says so) is reset by the
// pool's idle check and comes back.
func TestSimBackendDeadGuestRevived(t *testing.T) {
	g0 := pooltest.NewFakeGuest(t)
	cfg := pooltest.Config(t)
	cfg.IdleCheck = 20 * time.Millisecond
	p := newSimPool(t, cfg, simConfig(g0))
	p.Events.WaitCount(t, vmpool.EventReady, "sim-0", 1)
	g0.Set(func(g *pooltest.FakeGuest) { g.Status = "dead" })
	p.Events.WaitCount(t, vmpool.EventFailed, "sim-0", 1)
	p.Events.WaitCount(t, vmpool.EventReady, "sim-0", 2)
	if n := g0.Calls().Resets; n < 2 {
		t.Fatalf("%d resets, want a reset after the failed check", n)
	}
	if len(p.Quarantined()) != 0 {
		t.Fatal("quarantined")
	}
	if failed, _ := p.Events.Last(vmpool.EventFailed, ""); !strings.Contains(failed.Err.Error(), "is dead (HTTP 503)") {
		t.Fatalf("failure %v", failed.Err)
	}
	p.MustLease(t)
}

// A real guest server is not a simulator: the error says which backend to
// use.
func TestSimBackendNotASimulator(t *testing.T) {
	g0 := pooltest.NewFakeGuest(t)
	g0.Set(func(g *pooltest.FakeGuest) { g.NoSim = true })
	p := newSimPool(t, pooltest.Config(t), simConfig(g0))
	_, err := p.Lease(context.Background())
	if !errors.Is(err, vmpool.ErrNoVMs) || !strings.Contains(err.Error(), "not a codapipe simulator guest; use backend: guest") {
		t.Fatalf("Lease: %v", err)
	}
}

func TestSimBackendHealthScreenshot(t *testing.T) {
	g0 := pooltest.NewFakeGuest(t)
	sc := simConfig(g0)
	sc.Health = HealthScreenshot
	p := newSimPool(t, pooltest.Config(t), sc)
	p.MustLease(t)
	if n := g0.Calls().Screenshots; n < 2 {
		t.Fatalf("%d screenshots, want readiness and health by screenshot", n)
	}
}

func TestSimConfigErrors(t *testing.T) {
	pooltest.WantConfigErrors(t, []pooltest.ConfigCase[Config]{
		{Name: "no VMs", Cfg: Config{}, Want: "sim.vms: empty"},
		{Name: "bad URL", Cfg: URLs("ftp://x"), Want: "sim.vms[0].url"},
		{Name: "bad id", Cfg: Config{VMs: []VM{{ID: "-x", URL: "http://a"}}}, Want: "sim.vms[0].id"},
		{Name: "bad health", Cfg: Config{VMs: []VM{{URL: "http://a"}}, Health: "ping"}, Want: "sim.health"},
		{Name: "bad state URL", Cfg: Config{VMs: []VM{{URL: "http://a", StateURL: "gopher://a"}}}, Want: "sim.vms[0].state_url"},
	}, func(c Config) error { _, err := New(c); return err })
}
