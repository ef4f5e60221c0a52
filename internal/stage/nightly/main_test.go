package nightly

import (
	"testing"

	"github.com/codapipe/codapipe/internal/testkit/proctest"
)

// TestMain: the kill test starts the nightly command as a child of the
// test binary (proctest).
func TestMain(m *testing.M) { proctest.Main(m, Command(), nil) }
