package advantage

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestRunsChecksEachName: --runs is a list; each name is checked on its
// own, so several long names (each within the limit, together far above
// it) are accepted — as make chaos gives them — and a bad one is refused
// by name.
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
		{"several long names", []string{"--runs", strings.Join(names, ",")}, 0, ""},
		{"repeated with spaces", []string{"--runs", names[0] + ", " + names[1], "--runs", names[2]}, 0, ""},
		{"one too long", []string{"--runs", names[0] + "," + tooLong + "," + names[1]}, 2, `--runs: run name "chaos-grass-2725-y`},
		{"a bad character", []string{"--runs", names[0] + ",a\x1bb"}, 2, `--runs: run name "a\x1bb"`},
		{"apps", []string{"--runs", names[0], "--app", "ChimeraX,bad/app"}, 2, `--app: app name "bad/app"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			args := append([]string{"--data", filepath.Join(dir, "data"), "--out", filepath.Join(dir, "shards"), "--drain", "--log-level", "warn"}, tc.args...)
			var out, errb bytes.Buffer
			code := service.MainContext(t.Context(), Command(), args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d; stderr:\n%s", code, tc.code, errb.String())
			}
			if !strings.Contains(errb.String(), tc.want) {
				t.Errorf("stderr %q lacks %q", errb.String(), tc.want)
			}
			if tc.code == 0 && strings.Contains(errb.String(), "too long") {
				t.Errorf("a name refused: %s", errb.String())
			}
		})
	}
}

// TestCheckSpellsApps: --app names a ScienceBoard app in any case as the
// benchmark spells it (the subject rollout publishes on); another name
// is an app of the user's task folders, kept as it is.
func TestCheckSpellsApps(t *testing.T) {
	o := Options{Apps: []string{"chimerax", "KALGEBRA", "Lab"}}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ChimeraX", "KAlgebra", "Lab"}; !slices.Equal(o.Apps, want) {
		t.Errorf("apps %q, want %q", o.Apps, want)
	}
}
