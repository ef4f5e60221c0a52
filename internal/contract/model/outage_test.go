package model

import (
	"context"
	"errors"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"
)

// switchProbe is a probe whose endpoint is up or down as the test says.
type switchProbe struct{ down atomic.Bool }

func (p *switchProbe) probe(context.Context) error {
	if p.down.Load() {
		return errors.New("connection refused")
	}
	return nil
}

// TestOutages runs the breaker through its states: a failure while the
// endpoint's probe answers is no outage; one while it does not opens the
// breaker (Wait blocks, other reports join the outage), the breaker closes
// when the probe answers again (Wait returns nil); an outage beyond the
// budget ends Wait with an *OutageError wrapping ErrOutage; an endpoint
// without a probe is never down.
func TestOutages(t *testing.T) {
	ctx := context.Background()
	cause := errors.New("http://planner/v1: connection refused")
	newOutages := func(t *testing.T, p *switchProbe, budget time.Duration) *Outages {
		o := NewOutages(OutageConfig{Probes: map[string]func(context.Context) error{"http://planner/v1": p.probe},
			Budget: budget, ProbeEvery: 5 * time.Millisecond, MaxProbeEvery: 20 * time.Millisecond, Log: slog.New(slog.DiscardHandler)})
		t.Cleanup(o.Close)
		return o
	}
	t.Run("request failure, endpoint up", func(t *testing.T) {
		p := &switchProbe{}
		o := newOutages(t, p, time.Minute)
		if o.Report(ctx, "http://planner/v1", cause) {
			t.Fatal("an endpoint whose probe answers was taken for down")
		}
		if err := o.Wait(ctx); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("no probe", func(t *testing.T) {
		o := newOutages(t, &switchProbe{}, time.Minute)
		if o.Report(ctx, "http://other/v1", cause) {
			t.Fatal("an endpoint without a probe was taken for down")
		}
	})
	t.Run("down, then up", func(t *testing.T) {
		p := &switchProbe{}
		p.down.Store(true)
		o := newOutages(t, p, time.Minute)
		if !o.Report(ctx, "http://planner/v1", cause) || !o.Report(ctx, "http://planner/v1", cause) {
			t.Fatal("a down endpoint was not taken for down")
		}
		waited := make(chan error, 1)
		go func() { waited <- o.Wait(ctx) }()
		select {
		case err := <-waited:
			t.Fatalf("Wait returned (%v) while the endpoint is down", err)
		case <-time.After(50 * time.Millisecond):
		}
		p.down.Store(false)
		select {
		case err := <-waited:
			if err != nil {
				t.Fatalf("Wait after the endpoint came back: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Wait did not return after the endpoint came back")
		}
		if n, q := o.Stats(); n != 1 || q != 2 {
			t.Errorf("Stats: %d outages, %d interrupted; want 1, 2", n, q)
		}
	})
	t.Run("beyond the budget", func(t *testing.T) {
		p := &switchProbe{}
		p.down.Store(true)
		o := newOutages(t, p, 100*time.Millisecond)
		o.Report(ctx, "http://planner/v1", cause)
		wctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := o.Wait(wctx)
		var oe *OutageError
		if !errors.As(err, &oe) || !errors.Is(err, ErrOutage) || oe.Endpoint != "http://planner/v1" || oe.Down < 100*time.Millisecond {
			t.Fatalf("Wait: %v, want an OutageError of http://planner/v1 after the 100ms budget", err)
		}
		if !o.Report(ctx, "http://planner/v1", cause) {
			t.Error("a report after the budget was not taken for an outage")
		}
	})
	t.Run("nil breaker", func(t *testing.T) {
		var o *Outages
		if o.Report(ctx, "x", cause) || o.Wait(ctx) != nil {
			t.Fatal("a nil breaker must report no outage")
		}
		o.Close()
	})
}
