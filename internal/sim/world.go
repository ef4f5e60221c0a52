package sim

import (
	"context"
	"errors"
	"fmt"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/models"
)

// WorldConfig configures a whole simulated world: N VMs, each behind a
// guest server and an app server, and the three model endpoints.
type WorldConfig struct {
	// VMs is the number of simulated machines (default 1).
	VMs int `json:"vms"`
	// Seed seeds everything: the looks of every machine (all machines of a
	// world look the same, as real VMs reverted to one snapshot do, so an
	// episode's screenshots and the seeded model answers do not depend on
	// which VM runs it), the fault draws of guest server i (Seed+i), the
	// model endpoints (Seed).
	Seed int64 `json:"seed"`
	// Clock scales all simulated time (latencies, boot, revert, sleeps).
	Clock fault.Clock `json:"clock"`
	// Guest configures every guest server (faults, boot/revert time);
	// its Seed and Clock are set from the world's.
	Guest guest.Config `json:"guest"`
	// PerVM overrides Guest for single machines, by index (e.g. to make
	// one VM hang on screenshots).
	PerVM map[int]guest.Config `json:"per_vm,omitempty"`
	// Models configures the endpoints; its Seed and Clock are set from the
	// world's.
	Models models.Config `json:"models"`
}

// DefaultWorldConfig is one VM in real time with the default models.
func DefaultWorldConfig() WorldConfig {
	return WorldConfig{VMs: 1, Seed: 1, Clock: fault.Clock{Scale: 1}, Models: models.DefaultConfig()}
}

// World is a running simulated world. Everything stops when the context
// given to StartWorld ends; Done is closed then, once every guest server
// and model endpoint has stopped.
type World struct {
	// GuestURLs are the guest servers' base URLs (port 5000 of a real
	// VM), one per machine.
	GuestURLs []string
	// AppURLs are the app servers' base URLs (port 8000 of a real VM), in
	// the order of GuestURLs. A guest's GET /sim/health reports its app
	// server too (app_url), which is how the pool's sim backend finds it.
	AppURLs []string
	// Machines are the simulated machines, in the order of GuestURLs.
	Machines []desktop.Machine
	// Models are the planner, executor and judge endpoints.
	Models *models.Servers

	guests []*guest.Server
	done   chan struct{}
}

// Done is closed when the world has stopped (after StartWorld's context
// ended): every guest server and model endpoint has stopped and every
// goroutine StartWorld created has returned.
func (w *World) Done() <-chan struct{} { return w.done }

// Wait blocks until the world has stopped (Done is closed).
func (w *World) Wait() { <-w.done }

// wait waits for the servers started so far.
func (w *World) wait() {
	for _, g := range w.guests {
		g.Wait()
	}
	if w.Models != nil {
		w.Models.Wait()
	}
}

// StartWorld starts the machines, their guest servers and the model
// endpoints on loopback. When it fails, the servers it started have
// stopped before it returns.
func StartWorld(ctx context.Context, cfg WorldConfig) (*World, error) {
	if cfg.VMs <= 0 {
		cfg.VMs = 1
	}
	if cfg.VMs > 1024 {
		return nil, fmt.Errorf("sim: world: %d VMs; at most 1024", cfg.VMs)
	}
	cfg.Models.Seed, cfg.Models.Clock = cfg.Seed, cfg.Clock
	eps, err := models.New(cfg.Models)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &World{done: make(chan struct{})}
	fail := func(err error) (*World, error) {
		cancel()
		w.wait()
		return nil, err
	}
	for i := range cfg.VMs {
		id := fmt.Sprintf("sim-%02d", i)
		m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: cfg.Seed})
		gc := cfg.Guest
		if o, ok := cfg.PerVM[i]; ok {
			gc = o
		}
		gc.Seed, gc.Clock = uint64(cfg.Seed)+uint64(i), cfg.Clock
		g, err := guest.Start(ctx, m, gc)
		if err != nil {
			return fail(fmt.Errorf("sim: world: guest %s: %w", id, err))
		}
		w.guests = append(w.guests, g)
		w.Machines = append(w.Machines, m)
		w.GuestURLs = append(w.GuestURLs, g.URL)
		w.AppURLs = append(w.AppURLs, g.AppURL)
	}
	if w.Models, err = eps.Start(ctx); err != nil {
		return fail(fmt.Errorf("sim: world: models: %w", err))
	}
	if len(w.GuestURLs) != cfg.VMs {
		return fail(errors.New("sim: world: not every guest started"))
	}
	go func() {
		defer close(w.done)
		w.wait()
		cancel()
	}()
	return w, nil
}
