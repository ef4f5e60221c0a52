// Package serve starts the SIMULATOR for a codasim.Request: the codasim
// command (the simulator as its own process, which rollout, judge and
// nightly start for --sim) and Start, the same in the caller's process
// (the tests' fixtures: codasim.SetInProcess(serve.Start)). The seed rule
// and the world's addresses are defined here once.
package serve

import (
	"cmp"
	"context"
	"fmt"
	"os"

	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// Start starts the simulator in this process: a codasim.Starter. With
// r.Tasks its task files go to a temporary folder removed by Close.
func Start(ctx context.Context, r codasim.Request) (*codasim.World, error) {
	dir := ""
	if r.Tasks {
		var err error
		if dir, err = os.MkdirTemp("", "codasim-tasks-"); err != nil {
			return nil, fmt.Errorf("sim: %w", err)
		}
	}
	w, err := start(ctx, r, dir)
	if err != nil && dir != "" {
		_ = os.RemoveAll(dir)
	}
	if err != nil || dir == "" {
		return w, err
	}
	stop := w.Close
	return codasim.NewWorld(*w, func() error {
		err := stop()
		_ = os.RemoveAll(dir)
		return err
	}), nil
}

// start starts the world of r, writing its task files to tasksDir when
// r.Tasks.
func start(ctx context.Context, r codasim.Request, tasksDir string) (*codasim.World, error) {
	wc := sim.DefaultWorldConfig()
	if r.Config != "" {
		if err := readConfig(r.Config, &wc); err != nil {
			return nil, err
		}
	}
	// The one seed rule: the request's, else the config's, else 1.
	switch {
	case r.Seed != nil:
		wc.Seed = *r.Seed
	case wc.Seed == 0:
		wc.Seed = 1
	}
	scale := r.TimeScaleOrDefault()
	wc.Clock = fault.Clock{Scale: scale}
	for _, c := range []struct {
		spec string
		dst  *traj.Coords
		name string
	}{{r.PlannerCoords, &wc.Models.Planner.Coords, "planner"}, {r.ExecutorCoords, &wc.Models.Executor.Coords, "executor"}} {
		if c.spec == "" || *c.dst != (traj.Coords{}) {
			continue // the config's own (a deliberately misconfigured model) wins
		}
		pc, err := uitars.ParseCoords(c.spec)
		if err != nil {
			return nil, &codasim.ConfigError{Err: fmt.Errorf("sim: %s coordinates: %w", c.name, err)}
		}
		*c.dst = pc
	}
	wc.Models.OnRequest = r.OnRequest
	mc := wc.Models
	mc.Seed, mc.Clock = wc.Seed, wc.Clock
	eps, err := models.New(mc)
	if err != nil {
		return nil, &codasim.ConfigError{Err: fmt.Errorf("--sim-config %s: %w", cmp.Or(r.Config, "(defaults)"), err)}
	}
	if tasksDir != "" && r.Tasks {
		if err := tasks.Write(tasksDir); err != nil {
			return nil, err
		}
	}
	// The world runs until Close, not until ctx ends (codasim.Starter).
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	var servers *models.Servers
	var guests []string
	var wait func()
	if r.VMs <= 0 {
		if servers, err = eps.Start(ctx); err != nil {
			cancel()
			return nil, err
		}
		wait = servers.Wait
	} else {
		wc.VMs = r.VMs
		world, err := sim.StartWorld(ctx, wc)
		if err != nil {
			cancel()
			return nil, err
		}
		servers, guests, wait = world.Models, world.GuestURLs, world.Wait
	}
	mcfg := eps.Config()
	pc, ec := mcfg.Planner.Coords, mcfg.Executor.Coords
	if pc == (traj.Coords{}) {
		pc = uitars.Grid()
	}
	if ec == (traj.Coords{}) {
		ec = uitars.Resized()
	}
	w := codasim.World{
		Seed: wc.Seed, TimeScale: scale, Guests: guests, Tasks: tasksDir,
		Planner:  codasim.Endpoint{URL: servers.PlannerURL, Model: models.DefaultPlannerModel, Coords: uitars.CoordsString(pc)},
		Executor: codasim.Endpoint{URL: servers.ExecutorURL, Model: models.DefaultExecutorModel, Coords: uitars.CoordsString(ec)},
		Judges:   []codasim.Endpoint{{URL: servers.JudgeURL, Model: cmp.Or(mcfg.Judge.Model, models.DefaultJudgeModel)}},
	}
	if s := mcfg.Judge.Second; s != nil { // the simulated ensemble's second model
		w.Judges = append(w.Judges, codasim.Endpoint{URL: servers.JudgeURL, Model: s.Model})
	}
	if !r.Tasks {
		w.Tasks = ""
	}
	return codasim.NewWorld(w, func() error {
		cancel()
		wait() // every guest and model server has stopped
		return nil
	}), nil
}

// readConfig decodes the simulator's JSON configuration strictly, naming
// the file, line and column of an error.
func readConfig(path string, v any) error {
	if err := service.ReadJSON(path, v); err != nil {
		return &codasim.ConfigError{Err: fmt.Errorf("--sim-config: %w", err)}
	}
	return nil
}
