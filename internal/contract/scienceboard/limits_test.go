package scienceboard

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestTaskLimits (issue 40, "images that explode": a 200 MB task file,
// "steps": 1000000000): a task file larger than Limits.Bytes is not read
// whole, and one asking for more steps than Limits.Steps is refused; each
// error names the file, the limit and the flag that raises it, and the
// good files beside them still load.
func TestTaskLimits(t *testing.T) {
	dir := t.TempDir()
	good, err := os.ReadFile("../../../testdata/scienceboard/tasks/VM/ChimeraX/A-01.json")
	if err != nil {
		t.Fatal(err)
	}
	write := func(name string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("A-01.json", good)
	write("A-02.json", []byte(strings.Replace(string(good), `"steps"`, `"padding": "`+strings.Repeat("x", 3<<20)+`", "steps"`, 1)))
	write("A-03.json", []byte(strings.Replace(string(good), `"steps": `, `"steps": 1000000000, "old_steps": `, 1)))
	set, err := LoadDirLimits(dir, Limits{})
	if set == nil || len(set.Tasks) != 1 {
		t.Fatalf("LoadDirLimits: %v, %v; want the one good task", set, err)
	}
	msg := err.Error()
	for _, want := range []string{"A-02.json", "larger than the limit of 1048576 bytes for a task file; --max-task-bytes raises it",
		"A-03.json", "1000000000 is more than the limit of 500 steps; --max-steps raises it"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the error does not say %q:\n%s", want, msg)
		}
	}
	var fe *FileError
	if !errors.As(err, &fe) {
		t.Errorf("not a FileError: %v", err)
	}
	if set, err := LoadDirLimits(dir, Limits{Bytes: 4 << 20, Steps: 1_000_000_000}); err != nil || len(set.Tasks) != 3 {
		t.Errorf("with the limits raised: %v tasks, %v", set, err)
	}
}
