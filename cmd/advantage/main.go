// Command advantage computes group-relative advantages from judged
// trajectories and writes Arrow IPC / Parquet shards for the trainer.
package main

import (
	"os"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/advantage"
)

func main() { os.Exit(service.Main(advantage.Command(), os.Args[1:], os.Stdout, os.Stderr)) }
