package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
)

// realTasks is the repository's copy of the benchmark's task files.
var realTasks = sbtest.Copy()

func TestTasksJSONCountsTheBenchmark(t *testing.T) {
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"tasks", "--tasks", realTasks, "--json"}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	var doc struct {
		Tasks []struct {
			ID, App, Instruction string
			Steps                int
			Unsupported          []string
		}
		Counts map[string]int
	}
	if err := json.Unmarshal(out.Bytes(), &doc); err != nil {
		t.Fatalf("not one JSON document: %v", err)
	}
	want := map[string]int{"ChimeraX": 29, "Celestia": 33, "GrassGIS": 34, "KAlgebra": 31, "Lean": 26, "TeXstudio": 16}
	for app, n := range want {
		if doc.Counts[app] != n {
			t.Errorf("counts[%s] = %d, want %d", app, doc.Counts[app], n)
		}
	}
	if len(doc.Counts) != len(want) || len(doc.Tasks) != 169 {
		t.Errorf("counts %v and %d tasks, want 6 apps and 169 tasks", doc.Counts, len(doc.Tasks))
	}
	for _, tk := range doc.Tasks {
		if tk.Unsupported == nil || tk.Steps <= 0 || !strings.HasPrefix(tk.ID, tk.App+"/") {
			t.Errorf("bad listing entry %+v", tk)
		}
		// Issue 21, acceptance 1: every setup step and check of the
		// benchmark's VM tasks can be run.
		if len(tk.Unsupported) > 0 {
			t.Errorf("%s: unsupported %q", tk.ID, tk.Unsupported)
		}
	}
}

func TestTasksErrors(t *testing.T) {
	bad := t.TempDir()
	if err := os.WriteFile(filepath.Join(bad, "X.json"), []byte("{\n  \"type\": \"ChimeraX\",,\n}"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		args []string
		code int
		want string
	}{
		{"no dir", []string{"tasks"}, 2, "give --tasks DIR"}, // a missing flag is a usage error
		{"unknown app", []string{"tasks", "--tasks", realTasks, "--app", "Photoshop"}, 1, "known apps: Celestia, ChimeraX, GrassGIS, KAlgebra, Lean, TeXstudio"},
		{"malformed", []string{"tasks", "--tasks", bad}, 1, "X.json: line 2, column"},
		{"stray arg", []string{"tasks", "--tasks", realTasks, "extra"}, 2, "unexpected argument"},
		{"nothing configured", []string{"--app", "ChimeraX"}, 2, "pass --sim to run on the built-in SIMULATOR"},
		{"help", []string{"--help"}, 0, "rollout tasks --tasks DIR"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("CODAPIPE_TASKS", "")
			var out, errb bytes.Buffer
			code := Main(context.Background(), tc.args, &out, &errb)
			if code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q does not contain %q", code, tc.code, errb.String(), tc.want)
			}
		})
	}
}

// TestHelpGroupsFlags: rollout --help lists its flags by concern, each
// flag exactly once; a mistyped flag prints the nearest flag and a
// pointer to --help, not the flag list.
func TestHelpGroupsFlags(t *testing.T) {
	var out, errb bytes.Buffer
	if code := Main(context.Background(), []string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	help := errb.String()
	var headers []string
	listed := map[string]int{}
	for _, line := range strings.Split(help, "\n") {
		if strings.HasPrefix(line, "  -") {
			listed[strings.TrimPrefix(strings.Fields(line)[0], "-")]++
		} else if strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " ") {
			headers = append(headers, line)
		}
	}
	want := []string{"Usage:", "Subcommands:", "Run control:", "Endpoints:", "Sampling:", "Pool:", "Simulator:", "Output:", "Bus and storage:"}
	if strings.Join(headers, "|") != strings.Join(want, "|") {
		t.Errorf("sections %q, want %q", headers, want)
	}
	n := 0
	Command().FlagSet().VisitAll(func(f *flag.Flag) {
		n++
		if listed[f.Name] != 1 {
			t.Errorf("--%s listed %d times, want once", f.Name, listed[f.Name])
		}
	})
	if len(listed) != n {
		t.Errorf("--help lists %d flags, the command has %d", len(listed), n)
	}

	errb.Reset()
	code := Main(context.Background(), []string{"--gorup", "8"}, &out, &errb)
	if msg := errb.String(); code != 2 || !strings.Contains(msg, "did you mean --group") || strings.Count(msg, "\n") >= 5 {
		t.Errorf("rollout --gorup 8: exit %d, stderr:\n%s", code, msg)
	}
}
