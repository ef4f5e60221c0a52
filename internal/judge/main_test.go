package judge

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"

	"github.com/codapipe/codapipe/internal/pipetest"
)

// envProcess makes the test binary run the judge command instead of the
// tests: the kill -9 test starts it as a child process. Its arguments are
// a JSON list in envArgs.
const (
	envProcess = "CODAPIPE_JUDGE_TEST_PROCESS"
	envArgs    = "CODAPIPE_JUDGE_TEST_ARGS"
)

func TestMain(m *testing.M) {
	if os.Getenv(envProcess) == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(envArgs)), &args); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", envArgs, err)
			os.Exit(2)
		}
		os.Exit(Main(context.Background(), args, os.Stdout, os.Stderr))
	}
	code := m.Run()
	pipetest.Cleanup()
	os.Exit(code)
}
