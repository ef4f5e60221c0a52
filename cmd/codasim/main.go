// Command codasim is the SIMULATOR as its own process: simulated VMs
// (ScienceBoard's guest and app servers) and simulated planner, executor
// and judge models on loopback, for checking a pipeline. rollout, judge
// and nightly start it for --sim.
package main

import (
	"os"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/sim/serve"
)

func main() { os.Exit(service.Main(serve.Command(), os.Args[1:], os.Stdout, os.Stderr)) }
