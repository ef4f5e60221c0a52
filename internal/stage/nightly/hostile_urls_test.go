package nightly

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/advantage"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/internal/stage/sft"
)

// TestHostileURLSecrets (issue 40, "secrets in URLs that fail to parse"):
// a password holding an unencoded '#', '/' or '?' makes a URL that does
// not parse, or parses with the password outside its user information.
// Every command refuses such a URL at start, naming the flag, and prints
// no part of the password: not in its parse error, not in any log line.
func TestHostileURLSecrets(t *testing.T) {
	tasks := t.TempDir()
	pool := filepath.Join(t.TempDir(), "pool.yaml")
	for _, tc := range []struct {
		name string
		cmd  service.Command
		args []string
		flag string // named in the error
	}{
		{"judge --nats with # in the password", judge.Command(), []string{"--drain", "--sim", "--app", "ChimeraX", "--nats", "nats://u:ab#SECRET@127.0.0.1:4222"}, "NATS"},
		{"judge --nats list with / in the password", judge.Command(), []string{"--drain", "--sim", "--app", "ChimeraX", "--nats", "nats://127.0.0.1:4222,nats://u:ab/SECRET@127.0.0.1:4223"}, "NATS"},
		{"judge --nats without a scheme, / in the password", judge.Command(), []string{"--drain", "--sim", "--app", "ChimeraX", "--nats", "u:4222/SECRET@127.0.0.1:4222"}, "NATS"},
		{"judge --nats without a scheme, # in the password", judge.Command(), []string{"--drain", "--sim", "--app", "ChimeraX", "--nats", "u:ab#SECRET@127.0.0.1:4222"}, "NATS"},
		{"judge --judge with / in the password", judge.Command(), []string{"--drain", "--app", "ChimeraX", "--judge", "http://u:ab/SECRET@127.0.0.1:1/v1=m"}, "--judge"},
		{"judge --judge with # in the password", judge.Command(), []string{"--drain", "--app", "ChimeraX", "--judge", "http://u:ab#SECRET@127.0.0.1:1/v1=m"}, "--judge"},
		{"rollout --planner-url with # in the password", rollout.Command(), []string{"--app", "ChimeraX", "--pool", pool, "--tasks", tasks,
			"--planner-url", "http://u:ab#SECRET@127.0.0.1:1/v1", "--planner-model", "p", "--executor-url", "http://127.0.0.1:1/v1", "--executor-model", "e"}, "--planner-url"},
		{"rollout --executor-url with ? in the password", rollout.Command(), []string{"--app", "ChimeraX", "--pool", pool, "--tasks", tasks,
			"--planner-url", "http://127.0.0.1:1/v1", "--planner-model", "p", "--executor-url", "http://u:ab?SECRET@127.0.0.1:1/v1", "--executor-model", "e"}, "--executor-url"},
		{"rollout --planner-url with the password after the host", rollout.Command(), []string{"--app", "ChimeraX", "--pool", pool, "--tasks", tasks,
			"--planner-url", "http://u/ab:SECRET@127.0.0.1:1/v1", "--planner-model", "p", "--executor-url", "http://127.0.0.1:1/v1", "--executor-model", "e"}, "--planner-url"},
		{"advantage reward-server --executor-url with # in the password", advantage.Command(), []string{"reward-server", "--set", t.TempDir(),
			"--executor-url", "http://u:ab#SECRET@127.0.0.1:1/v1", "--executor-model", "e"}, "--executor-url"},
		{"sftpack --store with # in the password", sft.Command(), []string{"build", "--runs", "r1", "--out", t.TempDir(), "--store", "s3://u:ab#SECRET@bucket/x"}, "store URL"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			args := tc.args
			if !strings.HasPrefix(args[0], "-") { // a subcommand first
				args = append([]string{args[0], "--data", filepath.Join(t.TempDir(), "data")}, args[1:]...)
			} else {
				args = append([]string{"--data", filepath.Join(t.TempDir(), "data")}, args...)
			}
			code, out := run(t.Context(), tc.cmd, args...)
			text := string(out)
			t.Logf("exit %d: %s", code, text)
			if code == 0 {
				t.Fatalf("exit 0, want a refusal; output:\n%s", text)
			}
			for _, secret := range []string{"SECRET", "u:ab", "ab#", "ab/", "ab?"} {
				if strings.Contains(text, secret) {
					t.Errorf("the output shows %q:\n%s", secret, text)
				}
			}
			if !strings.Contains(text, tc.flag) {
				t.Errorf("the output does not name %s:\n%s", tc.flag, text)
			}
		})
	}
}
