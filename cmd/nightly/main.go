// Command nightly runs the nightly specialization job: for each app a
// rollout run judged and made into a shard set, then the SFT set of the
// night's runs and its export.
package main

import (
	"os"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/nightly"
)

func main() { os.Exit(service.Main(nightly.Command(), os.Args[1:], os.Stdout, os.Stderr)) }
