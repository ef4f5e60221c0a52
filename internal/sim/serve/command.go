package serve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/infra/service"
)

const usage = `codasim — the SIMULATOR: simulated VMs and planner, executor and judge models, on loopback.

Usage:
  codasim [--vms N] [--seed S] [--time-scale F] [--sim-config FILE] [--json]

Starts N simulated VMs, each speaking ScienceBoard's two servers (the OSWorld guest server and the
running app's own server), and the simulated planner, executor and judge endpoints
(OpenAI-compatible), prints their addresses and serves until interrupted. --vms 0 serves the
models only. rollout, judge and nightly start it for --sim and use it like real VMs and models:
a pool of its guest URLs (backend sim) and its endpoints. The seed: --seed, else the
configuration's "seed", else 1. With --json the addresses are one JSON line (codasim.World), and
codasim also stops when its standard input closes (its parent gone). The simulator is for
checking a pipeline, never for training data (docs/simulator.md).`

// Command is codasim: the simulator alone, serving until interrupted.
func Command() service.Command {
	r := codasim.Request{}
	var seed int64
	var asJSON bool
	var tasksOut string
	return service.Command{
		Name: codasim.Name, Summary: "start the SIMULATOR and print its addresses",
		Usage: usage,
		Flags: func(f *service.Flags) {
			codasim.Flags(f, &r.Config, &r.TimeScale, &r.VMs, "")
			f.Int64(&seed, "seed", "CODAPIPE_SEED", 0, "seed of the simulator (0: the --sim-config's seed, else 1)")
			f.String(&r.PlannerCoords, "planner-coords", "", "", "coordinate space the simulated planner writes points in, unless the --sim-config sets one (default grid1000)")
			f.String(&r.ExecutorCoords, "executor-coords", "", "", "coordinate space the simulated executor answers in, unless the --sim-config sets one (default pixels-resized)")
			f.String(&tasksOut, "tasks-out", "", "", "write the simulator's task files (ScienceBoard's layout) into this folder")
			f.Bool(&asJSON, "json", "", false, "print the addresses as one JSON line, and stop when standard input closes")
		},
		Run: func(ctx context.Context, env *service.Env) error {
			if seed != 0 {
				r.Seed = &seed
			}
			r.Tasks = tasksOut != ""
			if asJSON {
				// A child of a command: it stops when its parent closes its
				// stdin (or dies), not on the signal that stops its parent
				// (a terminal's Ctrl-C, systemd's SIGTERM to the group): the
				// parent's in-flight work still needs it.
				ctx = context.WithoutCancel(ctx)
			}
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			if asJSON {
				go func() { // owned by the process: its parent's end is ours
					_, _ = io.Copy(io.Discard, os.Stdin)
					cancel()
				}()
			}
			w, err := start(ctx, r, tasksOut) // stopped by Close below
			if err != nil {
				if ce := (*codasim.ConfigError)(nil); errors.As(err, &ce) {
					if asJSON { // said on the line the parent reads
						line, _ := json.Marshal(codasim.World{ConfigError: err.Error()})
						fmt.Fprintf(env.Stdout, "%s\n", line)
					}
					return service.Usage(err)
				}
				return err
			}
			defer w.Close()
			if asJSON {
				line, err := json.Marshal(w)
				if err != nil {
					return err
				}
				if _, err := fmt.Fprintf(env.Stdout, "%s\n", line); err != nil {
					return err
				}
			} else {
				Print(env.Stdout, w)
			}
			env.Log.Info("SIMULATOR serving", "vms", len(w.Guests), "seed", w.Seed, "time_scale", w.TimeScale)
			<-ctx.Done()
			return nil
		},
	}
}

// Print writes a world's addresses for a person.
func Print(out io.Writer, w *codasim.World) {
	fmt.Fprintf(out, "codapipe SIMULATOR (simulated VMs and models, seed %d, time scale %g)\n", w.Seed, w.TimeScale)
	fmt.Fprintf(out, "planner   %s  (model %s, points in %s)\n", w.Planner.URL, w.Planner.Model, w.Planner.Coords)
	fmt.Fprintf(out, "executor  %s  (model %s, points in %s)\n", w.Executor.URL, w.Executor.Model, w.Executor.Coords)
	var judges []string
	for _, j := range w.Judges {
		judges = append(judges, "--judge "+j.URL+"="+j.Model)
	}
	names := make([]string, len(w.Judges))
	for i, j := range w.Judges {
		names[i] = j.Model
	}
	if len(w.Judges) > 0 {
		fmt.Fprintf(out, "judge     %s  (models %s: judge %s)\n", w.Judges[0].URL, strings.Join(names, " and "), strings.Join(judges, " "))
	}
	for i, u := range w.Guests {
		fmt.Fprintf(out, "vm %-4d   %s\n", i, u)
	}
	if w.Tasks != "" {
		fmt.Fprintf(out, "tasks     %s\n", w.Tasks)
	}
	fmt.Fprintln(out, "serving until interrupted")
}
