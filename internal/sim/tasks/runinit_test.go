package tasks

import (
	"context"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/guest"
)

// parse loads a task file written for the test.
func parse(t *testing.T, app, initialize string) *scienceboard.Task {
	t.Helper()
	st, err := scienceboard.ParseTask("VM/"+app+"/T.json", []byte(`{"type": "`+app+`", "instruction": "test", "steps": 5,
		"initialize": `+initialize+`, "evaluate": [{"type": "stop", "value": "DONE"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestRunInit: a task's setup goes through the machine's guest and app
// servers as the real requests, with the harness's accept rules; a
// failing item is an error that names it.
func TestRunInit(t *testing.T) {
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog()})
	rec := &[]string{}
	c := guest.Local(m, guest.Config{Record: func(r guest.Recorded) { *rec = append(*rec, r.Server+" "+r.Method+" "+r.Path) }})
	task := parse(t, "ChimeraX", `[
		{"func": "execute", "command": ["rm", "/home/user/.local/share/ChimeraX/none"]},
		{"func": "execute", "command": "rm -f ~/.config/ChimeraX/ui-*", "shell": true},
		{"func": "touch", "path": "/home/user/Documents/notes.txt", "text": "hello"},
		{"func": "download", "url": "https://files.rcsb.org/download/3ppd.cif", "path": "/home/user/Downloads/prot.cif"},
		{"func": "launch", "command": ["chimerax", "--cmd", "remotecontrol rest start json true port «PORTLIKE»"]}
	]`)
	err := RunInitWith(context.Background(), c, task, InitOptions{Downloads: map[string][]byte{"https://files.rcsb.org/download/3ppd.cif": []byte("data_3PPD\n")}})
	if err != nil {
		t.Fatal(err)
	}
	want := "guest POST /setup/execute|guest POST /setup/execute|guest POST /write|guest POST /setup/upload|guest POST /setup/launch"
	if got := strings.Join(*rec, "|"); got != want {
		t.Errorf("requests\n%s\nwant\n%s", got, want)
	}
	for p, want := range map[string]string{"/home/user/Documents/notes.txt": "hello", "/home/user/Downloads/prot.cif": "data_3PPD\n"} {
		if b, err := m.ReadFile(p); string(b) != want || err != nil {
			t.Errorf("%s: %q, %v", p, b, err)
		}
	}
	if app := m.State().App; app != "ChimeraX" {
		t.Errorf("app %q after the launch", app)
	}

	// A download without content.
	err = RunInitWith(context.Background(), c, parse(t, "ChimeraX", `[{"func": "download", "url": "https://x/y.cif", "path": "/home/user/y.cif"}]`), InitOptions{})
	if err == nil || !strings.Contains(err.Error(), "initialize[0] download") || !strings.Contains(err.Error(), "InitOptions.Downloads") {
		t.Errorf("download without content: %v", err)
	}
	// A touch into a missing folder: /write answers 500, no folder is made.
	err = RunInit(m, parse(t, "TeXstudio", `[{"func": "touch", "path": "/home/user/nodir/main.tex", "text": "x"}]`), nil)
	if err == nil || !strings.Contains(err.Error(), "initialize[0] touch") || scienceboard.StatusOf(err) != 500 {
		t.Errorf("touch into a missing folder: %v", err)
	}
	// An argv launch of a program that does not exist.
	err = RunInit(m, parse(t, "ChimeraX", `[{"func": "launch", "command": ["nope"]}]`), nil)
	if err == nil || !strings.Contains(err.Error(), "No such file or directory: 'nope'") {
		t.Errorf("launching a missing program: %v", err)
	}
	// Lean: the buffered lines are appended to the project's file.
	lean := parse(t, "Lean", `[{"func": "import", "libs": ["Mathlib"]}, {"func": "query", "expr": "theorem t : 1 = 1 := by sorry"},
		{"func": "launch", "command": "code /home/user/sci /home/user/sci/Sci/Basic.lean", "shell": true}]`)
	if err := RunInit(m, lean, nil); err != nil {
		t.Fatal(err)
	}
	if b, _ := m.ReadFile(desktop.LeanFile); !strings.Contains(string(b), "import Mathlib\n") || !strings.Contains(string(b), "theorem t : 1 = 1 := by\n  sorry\n") {
		t.Errorf("Basic.lean after the setup:\n%s", b)
	}
}
