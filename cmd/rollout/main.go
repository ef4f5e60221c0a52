// Command rollout runs the planner→executor agent on an application's tasks
// over a pool of VMs and publishes the trajectories on NATS JetStream.
package main

import (
	"os"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/rollout"
)

func main() { os.Exit(service.Main(rollout.Command(), os.Args[1:], os.Stdout, os.Stderr)) }
