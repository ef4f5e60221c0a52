// Command sftpack builds the generalization SFT dataset from the clean
// successes of expert runs (the judge's archive) and exports it to a
// bucket.
package main

import (
	"os"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/sft"
)

func main() { os.Exit(service.Main(sft.Command(), os.Args[1:], os.Stdout, os.Stderr)) }
