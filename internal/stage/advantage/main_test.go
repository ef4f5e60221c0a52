package advantage

import (
	"testing"

	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/proctest"
)

// TestMain: the kill -9 test and BenchmarkAdvantageService start the
// advantage command as a child of the test binary (proctest).
func TestMain(m *testing.M) { proctest.Main(m, Command(), pipetest.Cleanup) }
