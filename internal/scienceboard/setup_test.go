package scienceboard

import (
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/scienceboard/sbtest"
)

func TestSetupStepsOfTheBenchmark(t *testing.T) {
	set, err := LoadDir(sbtest.Tasks())
	if err != nil {
		t.Fatal(err)
	}
	failed := 0
	for i := range set.Tasks {
		task := &set.Tasks[i]
		exp, err := task.ExpandPlaceholders(map[string]string{"PORTLIKE": "8000"})
		if err != nil {
			t.Fatalf("%s: %v", task.ID, err)
		}
		steps, err := SetupSteps(exp)
		if err != nil {
			failed++
			if !strings.Contains(err.Error(), "alphafold_match") {
				t.Errorf("%s: %v", task.ID, err)
			}
			continue
		}
		for _, s := range steps {
			if strings.Contains(s.Command, "«") {
				t.Errorf("%s: placeholder left in %q", task.ID, s.Command)
			}
		}
	}
	// The two AlphaFold tasks use an item the loader does not type.
	if failed != 2 {
		t.Errorf("%d tasks could not be mapped, want 2 (the alphafold_match ones)", failed)
	}
}

func TestSetupStepsShapes(t *testing.T) {
	task, err := ParseTask("x/ChimeraX/T.json", []byte(`{"type":"ChimeraX","steps":5,"instruction":"i","initialize":[
		{"func":"execute","command":["rm","-f","a b"]},
		{"func":"launch","command":"chimerax --cmd 'x'","shell":true,"wait":2},
		{"func":"touch","path":"/tmp/it's","text":"a'b"},
		{"func":"open","name":"2olx"},{"func":"turn","axis":"y","angle":1.5},{"func":"clear_log"},
		{"func":"tab","index":2},{"func":"opt","depth":6}]}`))
	if err != nil {
		t.Fatal(err)
	}
	steps, err := SetupSteps(task)
	if err != nil {
		t.Fatal(err)
	}
	want := []struct{ kind, cmd, path, body string }{
		{SetupExecute, "rm -f 'a b'", "", ""},
		{SetupLaunch, "chimerax --cmd 'x'", "", ""},
		{SetupExecute, `printf '%s' 'a'\''b' > '/tmp/it'\''s'`, "", ""},
		{SetupApp, "", "/chimerax/run", "open 2olx"},
		{SetupApp, "", "/chimerax/run", "turn y 1.5"},
		{SetupApp, "", "/chimerax/run", "log clear"},
		{SetupApp, "", "/tab", `{"index":2}`},
	}
	if len(steps) != len(want) {
		t.Fatalf("%d steps, want %d (opt skipped): %+v", len(steps), len(want), steps)
	}
	for i, w := range want {
		s := steps[i]
		if s.Kind != w.kind || s.Command != w.cmd || s.Path != w.path || string(s.Body) != w.body {
			t.Errorf("step %d = %+v, want %+v", i, s, w)
		}
	}
	if steps[1].Wait.Seconds() != 2 {
		t.Errorf("launch wait = %v", steps[1].Wait)
	}
}
