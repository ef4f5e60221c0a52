package rollout

import (
	"testing"

	"github.com/codapipe/codapipe/internal/testkit/proctest"
)

// TestMain lets tests start the rollout command as a child process
// (proctest.Command): two hosts sharing a run, a host killed with SIGKILL.
func TestMain(m *testing.M) { proctest.Main(m, Command(), nil) }
