package service

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestBuildOf: the Build is what the binary records, "unknown" for what
// it does not, and the revision says when the checkout had changes.
func TestBuildOf(t *testing.T) {
	platform := " " + runtime.GOOS + "/" + runtime.GOARCH
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name string
		bi   *debug.BuildInfo
		want Build
		str  string
	}{
		{"no build info", nil,
			Build{Module: Module, Version: Unknown, Revision: Unknown, Go: runtime.Version() + platform},
			Module + " unknown, revision unknown, " + runtime.Version() + platform},
		{"test binary (no VCS)", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "(devel)"},
			Settings: vcs("-trimpath", "true")},
			Build{Module: Module, Version: "(devel)", Revision: Unknown, Go: "go1.26.0" + platform},
			Module + " (devel), revision unknown, go1.26.0" + platform},
		{"clean checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "v0.5.0"},
			Settings: vcs("vcs", "git", "vcs.revision", "4158a1efb3b2", "vcs.time", "2026-11-28T12:00:00Z", "vcs.modified", "false")},
			Build{Module: Module, Version: "v0.5.0", Revision: "4158a1efb3b2", Committed: "2026-11-28T12:00:00Z", Go: "go1.26.0" + platform},
			Module + " v0.5.0, revision 4158a1efb3b2 committed 2026-11-28T12:00:00Z, go1.26.0" + platform},
		{"changed checkout", &debug.BuildInfo{GoVersion: "go1.26.0", Main: debug.Module{Path: Module, Version: "(devel)"},
			Settings: vcs("vcs.revision", "4158a1efb3b2", "vcs.modified", "true")},
			Build{Module: Module, Version: "(devel)", Revision: "4158a1efb3b2+dirty", Go: "go1.26.0" + platform},
			Module + " (devel), revision 4158a1efb3b2+dirty, go1.26.0" + platform},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := buildOf(tc.bi)
			if got != tc.want {
				t.Errorf("buildOf = %+v, want %+v", got, tc.want)
			}
			if s := got.String(); s != tc.str {
				t.Errorf("String = %q, want %q", s, tc.str)
			}
		})
	}
}

// TestVersionFlag: --version on a command or a subcommand prints the
// command's name and the build on stdout and exits 0 without running it;
// after "--" it is an argument.
func TestVersionFlag(t *testing.T) {
	ran := false
	run := func(context.Context, *Env) error { ran = true; return nil }
	cmd := Command{Name: "t", Common: true, Run: run, Args: 1,
		Sub: []Command{{Name: "t sub", Run: run}}}
	for _, tc := range []struct {
		name string
		args []string
		code int
		want string // the start of stdout; "" none
	}{
		{"command", []string{"--version"}, 0, "t " + Module + " "},
		{"single dash", []string{"-version"}, 0, "t " + Module + " "},
		{"after flags", []string{"--log-level", "debug", "--version"}, 0, "t " + Module + " "},
		{"with a bad flag", []string{"--no-such-flag", "--version"}, 0, "t " + Module + " "},
		{"subcommand", []string{"sub", "--version"}, 0, "t sub " + Module + " "},
		{"after --", []string{"--data", t.TempDir(), "--", "--version"}, 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ran = false
			var out, errb bytes.Buffer
			code := MainContext(context.Background(), cmd, tc.args, &out, &errb)
			if code != tc.code {
				t.Fatalf("exit %d, want %d: %s", code, tc.code, errb.String())
			}
			if tc.want == "" {
				if !ran || out.Len() != 0 {
					t.Errorf("ran %v, printed %q; want the command run, nothing printed", ran, out.String())
				}
				return
			}
			if ran || errb.Len() != 0 {
				t.Errorf("ran %v, stderr %q; want neither", ran, errb.String())
			}
			if s := out.String(); !strings.HasPrefix(s, tc.want) || !strings.Contains(s, " go1.") || strings.Count(s, "\n") != 1 {
				t.Errorf("printed %q, want one line %q… with the Go version", s, tc.want)
			}
		})
	}
}

// TestWriteSummary: the summary is v as indented JSON (HTML characters
// as they are), written whole: no temporary file is left, a file there
// before is replaced, a missing folder is made, and a value JSON cannot
// encode leaves nothing.
func TestWriteSummary(t *testing.T) {
	dir := t.TempDir()
	type doc struct {
		CodapipeVersion string `json:"codapipe_version"`
		Note            string `json:"note"`
	}
	path := filepath.Join(dir, "sub", "summary.json")
	for _, tc := range []struct {
		name string
		v    any
		want string // "" an error
	}{
		{"new file, new folder", doc{"v1", "<a & b>"}, "{\n  \"codapipe_version\": \"v1\",\n  \"note\": \"<a & b>\"\n}\n"},
		{"replaced", &doc{CodapipeVersion: "v2"}, "{\n  \"codapipe_version\": \"v2\",\n  \"note\": \"\"\n}\n"},
		{"not encodable", map[string]any{"f": func() {}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before, _ := os.ReadFile(path)
			err := WriteSummary(path, tc.v)
			body, rerr := os.ReadFile(path)
			if tc.want == "" {
				if err == nil || string(body) != string(before) {
					t.Errorf("error %v, file %q; want an error and the file as it was (%q)", err, body, before)
				}
			} else if err != nil || rerr != nil || string(body) != tc.want {
				t.Errorf("error %v, wrote %q (%v); want %q", err, body, rerr, tc.want)
			}
			if left, _ := filepath.Glob(filepath.Join(dir, "sub", ".summary-*")); len(left) > 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}
