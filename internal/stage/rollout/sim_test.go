package rollout

import (
	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/sim/serve"
)

// The tests run --sim on the simulator in their own process (the same
// servers on loopback as codasim's; internal/infra/codasim's tests start the
// codasim process itself).
func init() { codasim.SetInProcess(serve.Start) }
