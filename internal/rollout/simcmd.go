package rollout

import (
	"cmp"
	"context"
	"flag"
	"fmt"

	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// simCommand is "rollout sim": start the simulated world alone, print its
// addresses, and serve until interrupted — so any client (our services, a
// notebook, curl) can use it.
func simCommand() service.Command {
	wc := sim.DefaultWorldConfig()
	var file string
	var scale float64
	var fs *service.Flags
	return service.Command{
		Name: "rollout sim", Summary: "start the SIMULATOR alone and print its addresses",
		Usage: "Usage: rollout sim [--vms N] [--seed S] [--time-scale F] [--sim-config FILE]\n\n" +
			"Starts the SIMULATOR — N simulated VMs speaking the OSWorld guest protocol and the simulated\n" +
			"planner, executor and judge endpoints (OpenAI-compatible) — on loopback, prints their\n" +
			"addresses and serves until interrupted.",
		Flags: func(f *service.Flags) {
			fs = f
			f.Int(&wc.VMs, "vms", "CODAPIPE_VMS", 4, "number of simulated VMs (guest servers)")
			f.Int64(&wc.Seed, "seed", "CODAPIPE_SEED", 1, "seed of the simulator")
			f.Float64(&scale, "time-scale", "CODAPIPE_TIME_SCALE", DefaultTimeScale, "wall time per simulated second (0.01: 100x faster than real time)")
			f.String(&file, "sim-config", "CODAPIPE_SIM_CONFIG", "", "JSON file with the simulator's configuration (docs/simulator.md)")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			vms, seed := wc.VMs, wc.Seed
			if file != "" {
				if err := readJSON(file, &wc); err != nil {
					return service.Usage(fmt.Errorf("--sim-config: %w", err))
				}
				if !flagSet(fs, "vms") {
					vms = wc.VMs
				}
				if !flagSet(fs, "seed") {
					seed = wc.Seed
				}
			}
			wc.VMs, wc.Seed, wc.Clock = vms, seed, fault.Clock{Scale: scale}
			w, err := sim.StartWorld(ctx, wc)
			if err != nil {
				return err
			}
			defer w.Wait() // the servers stop when ctx ends
			out := env.Stdout
			fmt.Fprintf(out, "codapipe SIMULATOR (simulated VMs and models, seed %d, time scale %g)\n", wc.Seed, scale)
			pc, ec := wc.Models.Planner.Coords, wc.Models.Executor.Coords
			if pc == (traj.Coords{}) {
				pc = uitars.Grid()
			}
			if ec == (traj.Coords{}) {
				ec = uitars.Resized()
			}
			fmt.Fprintf(out, "planner   %s  (model %s, points in %s)\n", w.Models.PlannerURL, simmodels.DefaultPlannerModel, uitars.CoordsString(pc))
			fmt.Fprintf(out, "executor  %s  (model %s, points in %s)\n", w.Models.ExecutorURL, simmodels.DefaultExecutorModel, uitars.CoordsString(ec))
			if jc := wc.Models.Judge; jc.Second != nil {
				first := cmp.Or(jc.Model, simmodels.DefaultJudgeModel)
				fmt.Fprintf(out, "judge     %s  (models %s and %s: judge --judge %s=%s --judge %s=%s)\n", w.Models.JudgeURL,
					first, jc.Second.Model, w.Models.JudgeURL, first, w.Models.JudgeURL, jc.Second.Model)
			} else {
				fmt.Fprintf(out, "judge     %s  (model %s)\n", w.Models.JudgeURL, cmp.Or(jc.Model, simmodels.DefaultJudgeModel))
			}
			for i, u := range w.GuestURLs {
				fmt.Fprintf(out, "vm %-4d   %s\n", i, u)
			}
			fmt.Fprintln(out, "serving until interrupted")
			<-ctx.Done()
			return nil
		},
	}
}

func flagSet(fs *service.Flags, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}
