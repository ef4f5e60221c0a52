package rollout

import (
	"bytes"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/testkit/proctest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestHostileRunNameRefusedByTheProcess runs rollout as its own process
// with the run and app names issue 25 found unsafe: a 100 KB name (once
// "nats: connection closed" with the whole name echoed) and a newline with
// an ANSI escape. The process exits with the usage status at once, and its
// stderr is one short line naming the flag and the limit, with the value
// quoted, escaped and cut.
func TestHostileRunNameRefusedByTheProcess(t *testing.T) {
	long := strings.Repeat("r", 100<<10)
	tests := []struct {
		name, flag string
		args       []string
	}{
		{"100 KB run", "--run", []string{"--app", "ChimeraX", "--run", long}},
		{"100 KB app", "--app", []string{"--app", long}},
		{"newline and ANSI run", "--run", []string{"--app", "ChimeraX", "--run", "x\n\x1b[31mrun fake"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			data := filepath.Join(t.TempDir(), "data")
			cmd := proctest.Command(t, "", append([]string{"--sim", "--data", data}, tc.args...)...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.ExitCode() != 2 {
				t.Fatalf("exit: %v, want status 2 (usage)\n%.500s", err, stderr.String())
			}
			msg := stderr.String()
			if strings.Count(msg, "\n") != 1 || len(msg) > 600 || strings.ContainsAny(msg, "\x1b") ||
				!strings.Contains(msg, tc.flag+":") || !strings.Contains(msg, "1 to 64 bytes") || strings.Contains(msg, "nats") {
				t.Errorf("stderr %q: want one short line with the flag and the limit, no raw escape, no transport error", msg)
			}
		})
	}
}

// TestDefaultRunNameFits: the run name made from a long app name fits the
// run-name limit and follows the rule.
func TestDefaultRunNameFits(t *testing.T) {
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	for _, app := range []string{"ChimeraX", "GRASS GIS", strings.Repeat("a", traj.MaxAppNameBytes), strings.Repeat("Ω", traj.MaxAppNameBytes/2)} {
		run := DefaultRunName(app, now)
		if err := traj.CheckName(traj.RunName, run); err != nil || !strings.HasSuffix(run, "-20261126-060000") {
			t.Errorf("DefaultRunName(%s) = %q: %v", traj.QuoteName(app), run, err)
		}
	}
	if got := DefaultRunName("GRASS GIS", now); got != "grass_gis-20261126-060000" {
		t.Errorf("DefaultRunName(GRASS GIS) = %q", got)
	}
}
