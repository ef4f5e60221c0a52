package nightly

import (
	"github.com/codapipe/codapipe/internal/sim/serve"
	"github.com/codapipe/codapipe/internal/simproc"
)

// The tests run --sim on the simulator in their own process (the same
// servers on loopback as codasim's; internal/simproc's tests start the
// codasim process itself).
func init() { simproc.SetInProcess(serve.Start) }
