package advantage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/codapipe/codapipe/internal/service"
)

// envProcess makes the test binary run the advantage command instead of
// the tests: the kill -9 test starts it as a child process. Its arguments
// are a JSON list in envArgs.
const (
	envProcess = "CODAPIPE_ADVANTAGE_TEST_PROCESS"
	envArgs    = "CODAPIPE_ADVANTAGE_TEST_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(envProcess) == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(envArgs)), &args); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", envArgs, err)
			os.Exit(2)
		}
		os.Exit(service.MainContext(context.Background(), Command(), args, os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}
