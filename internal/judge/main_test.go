package judge

import (
	"testing"

	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/proctest"
)

// TestMain: the kill -9 test starts the judge command as a child of the
// test binary (proctest).
func TestMain(m *testing.M) { proctest.Main(m, Command(), pipetest.Cleanup) }
