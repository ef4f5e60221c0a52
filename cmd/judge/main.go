// Command judge scores trajectories with VLM judges under a voting policy,
// publishes the judgements and archives the judged trajectories.
package main

import (
	"os"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/judge"
)

func main() { os.Exit(service.Main(judge.Command(), os.Args[1:], os.Stdout, os.Stderr)) }
