// Package proctest runs a command of the package under test as a child
// process of the test binary, for the tests that kill it with SIGKILL and
// the benchmarks that measure its memory: TestMain calls Main, and a test
// starts the child with Command.
package proctest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/metrics"
	"github.com/codapipe/codapipe/internal/infra/service"
)

// The environment of a child: it is one (envChild), its arguments (a JSON
// list) and where it writes its Report (optional).
const (
	envChild  = "CODAPIPE_TEST_CHILD"
	envArgs   = "CODAPIPE_TEST_CHILD_ARGS"
	envReport = "CODAPIPE_TEST_CHILD_REPORT"
)

// Report is what a child reports when its command returns.
type Report struct {
	Exit    int     `json:"exit"`
	Seconds float64 `json:"seconds"`  // the command's wall time
	PeakRSS int64   `json:"peak_rss"` // bytes, -1 when unknown
}

// Main is the TestMain of a package whose tests start cmd as a child: in a
// child it runs cmd with the arguments its parent gave, writes its Report
// when asked, and exits with the command's status; otherwise it runs the
// tests, then cleanup (nil: none), and exits.
func Main(m *testing.M, cmd service.Command, cleanup func()) {
	if os.Getenv(envChild) != "1" {
		code := m.Run()
		if cleanup != nil {
			cleanup()
		}
		os.Exit(code)
	}
	var args []string
	if err := json.Unmarshal([]byte(os.Getenv(envArgs)), &args); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", envArgs, err)
		os.Exit(2)
	}
	start := time.Now()
	code := service.MainContext(context.Background(), cmd, args, os.Stdout, os.Stderr)
	if path := os.Getenv(envReport); path != "" {
		body, _ := json.Marshal(Report{Exit: code, Seconds: time.Since(start).Seconds(), PeakRSS: metrics.PeakRSS()})
		if err := os.WriteFile(path, body, 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "%s: %v\n", envReport, err)
			os.Exit(2)
		}
	}
	os.Exit(code)
}

// Command returns the test binary set up to run the package's command
// (the one given to Main) with args, not started. With report set, the
// child writes its Report to that file (ReadReport). A child still running
// when the test ends is killed then, and on Linux when the test binary
// dies, so that none is left holding a data directory or a server.
func Command(t testing.TB, report string, args ...string) *exec.Cmd {
	t.Helper()
	js, err := json.Marshal(args)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(os.Args[0], "-test.run=^$", "-test.bench=^$")
	dieWithParent(cmd)
	t.Cleanup(func() {
		if cmd.Process != nil {
			_ = cmd.Process.Kill() // an error: it has ended already
		}
	})
	cmd.Env = append(os.Environ(), envChild+"=1", envArgs+"="+string(js))
	if report != "" {
		cmd.Env = append(cmd.Env, envReport+"="+report)
	}
	return cmd
}

// ReadReport reads the Report a child wrote to path.
func ReadReport(path string) (Report, error) {
	var r Report
	body, err := os.ReadFile(path)
	if err != nil {
		return r, fmt.Errorf("the child wrote no report: %w", err)
	}
	if err := json.Unmarshal(body, &r); err != nil {
		return r, fmt.Errorf("the child's report %s: %w", path, err)
	}
	return r, nil
}
