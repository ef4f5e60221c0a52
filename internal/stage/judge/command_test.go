package judge

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestRunsChecksEachName: --runs is a list; each name is checked on its
// own, so several long names (each within the limit, together far above
// it) are accepted and a bad one is refused by name.
func TestRunsChecksEachName(t *testing.T) {
	long := func(app string) string { // 64 bytes: at the limit
		s := "chaos-" + app + "-2725-"
		return s + strings.Repeat("x", traj.MaxRunNameBytes-len(s))
	}
	names := []string{long("kalgebra"), long("chimerax"), long("celestia")}
	tooLong := "chaos-grass-2725-" + strings.Repeat("y", traj.MaxRunNameBytes)
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // in stderr
	}{
		{"several long names", []string{"--sim", "--runs", strings.Join(names, ",")}, 0, ""},
		{"repeated with spaces", []string{"--sim", "--runs", names[0] + " , " + names[1], "--runs", names[2] + ","}, 0, ""},
		{"one too long", []string{"--sim", "--runs", names[0] + "," + tooLong}, 2, `--runs: run name "chaos-grass-2725-y`},
		{"an empty name is dropped, a space is not a name", []string{"--sim", "--runs", names[0] + ",, ,"}, 0, ""},
		{"apps", []string{"--sim", "--app", "ChimeraX, bad/app"}, 2, `--app: app name "bad/app"`},
		{"a bad character", []string{"--judge", "http://127.0.0.1:1/v1=m", "--runs", names[0] + ",a\x1bb"}, 2, `--runs: run name "a\x1bb"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--data", filepath.Join(dir, "data"), "--drain", "--log-level", "error"}, tc.args...)
			var out, errb bytes.Buffer
			code := service.MainContext(t.Context(), Command(), args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
		})
	}
}

// TestAppSpelledAsTheBenchmark: --app chimerax consumes ChimeraX's
// subject (the one rollout publishes on), not a subject of its own.
func TestAppSpelledAsTheBenchmark(t *testing.T) {
	args := []string{"--data", t.TempDir(), "--drain", "--sim", "--log-format", "json", "--app", "chimerax,KALGEBRA,Lab"}
	var out, errb bytes.Buffer
	if code := service.MainContext(t.Context(), Command(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, errb.String())
	}
	var apps []string
	for _, line := range strings.Split(errb.String(), "\n") {
		var rec struct{ Msg, Apps string }
		if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "judge: consuming trajectories" {
			apps = append(apps, rec.Apps)
		}
	}
	if want := []string{"ChimeraX,KAlgebra,Lab"}; !slices.Equal(apps, want) {
		t.Errorf("consuming the apps %q, want %q; stderr:\n%s", apps, want, errb.String())
	}
}
