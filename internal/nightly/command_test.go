package nightly

import (
	"bytes"
	"context"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/service"
)

// TestUsageErrors: a night without apps, with a bad name or a bad export
// URL is refused with exit status 2 before anything starts.
func TestUsageErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "no apps"},
		{[]string{"--apps", "ChimeraX", "--night", "../x"}, "--night"},
		{[]string{"--apps", "ChimeraX", "--export", "/tmp/x"}, "--export"},
		{[]string{"--apps", "ChimeraX", "--samples", "0"}, "--samples"},
	} {
		var stderr bytes.Buffer
		args := append([]string{"--data", t.TempDir()}, c.args...)
		if code := service.MainContext(context.Background(), Command(), args, io.Discard, &stderr); code != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Errorf("nightly %v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr.String(), c.want)
		}
	}
}

func TestRunName(t *testing.T) {
	if got := RunName("2026-11-26", "ChimeraX"); got != "2026-11-26-chimerax" {
		t.Errorf("RunName = %q", got)
	}
}

// TestAppsSpelledAsTheBenchmark: --apps names ScienceBoard apps in any
// case as the benchmark spells them, once each (a night is one run per
// app); another name is an app of the user's task folders, kept.
func TestAppsSpelledAsTheBenchmark(t *testing.T) {
	o := Options{Apps: []string{"chimerax", "ChimeraX", "GRASSGIS", "Lab"}, Night: "n", Samples: 1}
	if err := o.check(); err != nil {
		t.Fatal(err)
	}
	if want := []string{"ChimeraX", "GrassGIS", "Lab"}; !slices.Equal(o.Apps, want) {
		t.Errorf("apps %q, want %q", o.Apps, want)
	}
}
