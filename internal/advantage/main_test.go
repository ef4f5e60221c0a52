package advantage

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/metrics"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/service"
)

// envProcess makes the test binary run the advantage command instead of
// the tests: the kill -9 test and BenchmarkAdvantage start it as a child
// process. Its arguments are a JSON list in envArgs. With envReport set to
// a file name, the child writes a childReport there when the command
// returns (BenchmarkAdvantage reads its wall time and peak RSS).
const (
	envProcess = "CODAPIPE_ADVANTAGE_TEST_PROCESS"
	envArgs    = "CODAPIPE_ADVANTAGE_TEST_ARGS"
	envReport  = "CODAPIPE_ADVANTAGE_TEST_REPORT"
)

// childReport is what a child process run with envReport reports.
type childReport struct {
	Exit    int     `json:"exit"`
	Seconds float64 `json:"seconds"`  // the command's wall time
	PeakRSS int64   `json:"peak_rss"` // VmHWM in bytes, -1 when unknown
}

func TestMain(m *testing.M) {
	if os.Getenv(envProcess) == "1" {
		var args []string
		if err := json.Unmarshal([]byte(os.Getenv(envArgs)), &args); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", envArgs, err)
			os.Exit(2)
		}
		start := time.Now()
		code := service.MainContext(context.Background(), Command(), args, os.Stdout, os.Stderr)
		if path := os.Getenv(envReport); path != "" {
			body, _ := json.Marshal(childReport{Exit: code, Seconds: time.Since(start).Seconds(), PeakRSS: metrics.PeakRSS()})
			if err := os.WriteFile(path, body, 0o644); err != nil {
				fmt.Fprintf(os.Stderr, "%s: %v\n", envReport, err)
				os.Exit(2)
			}
		}
		os.Exit(code)
	}
	code := m.Run()
	pipetest.Cleanup()
	os.Exit(code)
}
