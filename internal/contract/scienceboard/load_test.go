package scienceboard

import (
	"encoding/json"
	"errors"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
)

// realTasks is the repository's copy of the benchmark's task files
// (testdata/scienceboard); the tests below count and check its files.
var realTasks = sbtest.Copy()

func needRealTasks(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(realTasks); err != nil {
		t.Fatalf("the repository's copy of the benchmark tasks is missing at %s: %v", realTasks, err)
	}
}

func TestLoadDirRealCounts(t *testing.T) {
	needRealTasks(t)
	all := map[string]int{"Celestia": 33, "ChimeraX": 29, "GrassGIS": 34, "KAlgebra": 31, "Lean": 26, "TeXstudio": 16}
	tests := []struct {
		name string
		path string
		want map[string]int
	}{
		{"tasks root", realTasks, all},
		{"sort folder", filepath.Join(realTasks, "VM"), all},
		{"app folder", filepath.Join(realTasks, "VM", "KAlgebra"), map[string]int{"KAlgebra": 31}},
		{"app folder with trailing slash", filepath.Join(realTasks, "VM", "TeXstudio") + "/", map[string]int{"TeXstudio": 16}},
		{"single file", filepath.Join(realTasks, "VM", "ChimeraX", "A-01.json"), map[string]int{"ChimeraX": 1}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			set, err := LoadDir(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if got := set.Counts(); !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Counts = %v, want %v", got, tc.want)
			}
			total := 0
			for _, n := range tc.want {
				total += n
			}
			if set.Len() != total {
				t.Errorf("Len = %d, want %d", set.Len(), total)
			}
			for i := 1; i < len(set.Tasks); i++ {
				if set.Tasks[i-1].ID >= set.Tasks[i].ID {
					t.Fatalf("tasks not sorted: %s before %s", set.Tasks[i-1].ID, set.Tasks[i].ID)
				}
			}
		})
	}
}

func TestRealFilesRoundTrip(t *testing.T) {
	needRealTasks(t)
	var files []string
	err := filepath.WalkDir(realTasks, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".json") {
			files = append(files, p)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != 169 {
		t.Fatalf("found %d files, want 169", len(files))
	}
	unsupported := map[string][]string{}
	for _, f := range files {
		t.Run(strings.TrimPrefix(f, realTasks+"/"), func(t *testing.T) {
			data, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			task, err := ParseTask(f, data)
			if err != nil {
				t.Fatal(err)
			}
			wantID := filepath.Base(filepath.Dir(f)) + "/" + strings.TrimSuffix(filepath.Base(f), ".json")
			if task.ID != wantID || task.Path != f {
				t.Errorf("ID %q Path %q, want %q %q", task.ID, task.Path, wantID, f)
			}
			if task.Steps <= 0 || task.Instruction == "" || task.Sort != "VM" || (task.Snapshot == "" && task.App != appname.Lean) { // Lean files leave the default snapshot implicit
				t.Errorf("top-level fields: %+v", task)
			}
			assertRoundTrip(t, data, task)
			if len(task.Unsupported) > 0 {
				unsupported[task.ID] = task.Unsupported
			}
		})
	}
	// Everything in the benchmark is typed and every check can run.
	want := map[string][]string{}
	if !reflect.DeepEqual(unsupported, want) {
		t.Errorf("unsupported items in the benchmark:\n got  %q\n want %q", unsupported, want)
	}
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

const goodTask = `{"type": "%s", "steps": 5, "instruction": "Do it.", "initialize": [], "evaluate": []}`

func task(app string) string { return strings.Replace(goodTask, "%s", app, 1) }

func TestLoadDirErrors(t *testing.T) {
	t.Run("malformed JSON names file, line and column", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "VM", "App", "A-01.json"), task("App"))
		bad := filepath.Join(dir, "VM", "App", "A-02.json")
		writeFile(t, bad, "{\n  \"type\": \"App\",\n  \"steps\": 5\n  \"instruction\": \"x\"\n}\n")
		set, err := LoadDir(dir)
		if err == nil {
			t.Fatal("no error")
		}
		want := bad + ": line 4, column 3: invalid character"
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not contain %q", err, want)
		}
		var fe *FileError
		if !errors.As(err, &fe) || fe.Path != bad || fe.Line != 4 || fe.Col != 3 {
			t.Errorf("FileError = %+v", fe)
		}
		if set == nil || set.Len() != 1 {
			t.Errorf("the good task should still load; set = %+v", set)
		}
	})
	t.Run("every bad file is reported", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "a.json"), "{")
		writeFile(t, filepath.Join(dir, "b.json"), `{"type": "App", "steps": 0, "instruction": "x"}`)
		writeFile(t, filepath.Join(dir, "sub", "c.json"), `{"steps": 5}`)
		_, err := LoadDir(dir)
		fes := fileErrors(err)
		var got []string
		for _, fe := range fes {
			got = append(got, filepath.Base(fe.Path)+":"+fe.Field)
		}
		want := []string{"a.json:", "b.json:steps", "c.json:type", "c.json:instruction"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("got errors %q, want %q\n%v", got, want, err)
		}
	})
	t.Run("duplicate id in two folders names both files", func(t *testing.T) {
		dir := t.TempDir()
		first := filepath.Join(dir, "VM", "App", "A-01.json")
		second := filepath.Join(dir, "VM", "Other", "A-01.json") // type decides the id, not the folder
		writeFile(t, first, task("App"))
		writeFile(t, second, task("App"))
		set, err := LoadDir(dir)
		var de *DuplicateIDError
		if !errors.As(err, &de) {
			t.Fatalf("want *DuplicateIDError, got %v", err)
		}
		if de.ID != "App/A-01" || de.First != first || de.Second != second {
			t.Errorf("got %+v", de)
		}
		if !strings.Contains(err.Error(), first) || !strings.Contains(err.Error(), second) {
			t.Errorf("error %q does not name both files", err)
		}
		if set.Len() != 1 {
			t.Errorf("set has %d tasks, want 1", set.Len())
		}
	})
	t.Run("empty directory", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, filepath.Join(dir, "README.md"), "no tasks here")
		writeFile(t, filepath.Join(dir, ".hidden", "x.json"), task("App"))
		set, err := LoadDir(dir)
		if !errors.Is(err, ErrNoTasks) || set != nil {
			t.Fatalf("got %v, %v", set, err)
		}
		if !strings.Contains(err.Error(), dir) {
			t.Errorf("error %q does not name the directory", err)
		}
	})
	t.Run("missing path", func(t *testing.T) {
		_, err := LoadDir(filepath.Join(t.TempDir(), "nope"))
		if !errors.Is(err, os.ErrNotExist) {
			t.Errorf("got %v", err)
		}
	})
}

func TestSetQueries(t *testing.T) {
	set, err := LoadDir("testdata/synth")
	if err != nil {
		t.Fatal(err)
	}
	if got := set.Apps(); !reflect.DeepEqual(got, []string{"ChimeraX", "KAlgebra", "Lab"}) {
		t.Errorf("Apps = %q", got)
	}
	tests := []struct {
		name    string
		app     string
		wantIDs []string
		wantErr string
	}{
		{"exact", "ChimeraX", []string{"ChimeraX/X-01", "ChimeraX/X-02"}, ""},
		{"case-insensitive", "kalgebra", []string{"KAlgebra/Y-01"}, ""},
		{"empty keeps all", "", []string{"ChimeraX/X-01", "ChimeraX/X-02", "KAlgebra/Y-01", "Lab/Z-01"}, ""},
		{"unknown", "GRASS", nil, `unknown app "GRASS" (known apps: ChimeraX, KAlgebra, Lab)`},
		{"upper case", "LAB", []string{"Lab/Z-01"}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			sub, err := set.Filter(tc.app)
			if checkErr(t, err, tc.wantErr) {
				return
			}
			var ids []string
			for _, tk := range sub.Tasks {
				ids = append(ids, tk.ID)
			}
			if !reflect.DeepEqual(ids, tc.wantIDs) {
				t.Errorf("ids %q, want %q", ids, tc.wantIDs)
			}
		})
	}
	for _, id := range []string{"KAlgebra/Y-01", "kalgebra/y-01"} {
		if tk, ok := set.ByID(id); !ok || tk.ID != "KAlgebra/Y-01" {
			t.Errorf("ByID(%q) = %v, %v", id, tk, ok)
		}
	}
	if _, ok := set.ByID("KAlgebra/Y-02"); ok {
		t.Error("ByID found a missing task")
	}
}

// FuzzParseTask feeds arbitrary bytes to the single-file parser. It must
// never panic; every error must be a *FileError (or several joined) naming
// the file; and a parsed task must re-encode (FileJSON) to the same JSON
// value as its input and survive placeholder expansion.
func FuzzParseTask(f *testing.F) {
	seeds := []string{
		``, `{}`, `null`, `[]`, `{"type": "A"}`,
		`{"type": "A", "steps": 5, "instruction": "x"}`,
		`{"type": "A", "steps": 5, "instruction": "x", "initialize": [{"func": "execute", "command": ["a", "«P»"], "shell": false}], "evaluate": [{"type": "stop", "value": "ANS", "args": []}]}`,
		`{"type": "A", "steps": 1, "instruction": "x", "initialize": [1, {"func": "launch", "wait": 1e2, "command": "x «PORTLIKE»"}, {"func": "zz"}], "evaluate": [{"type": "states", "key": "lambda k: k", "value": null}, {"type": "file", "key": "/p", "value": 3}]}`,
		`{"type": "A", "steps": 3, "instruction": "x", "ans": "", "penalty": null, "query": [{"name": "Sol", "type": 1}], "x": {"y": [1, 2]}}`,
		"{\n  \"type\": \"A\",\n  \"steps\": \"5\"\n}",
		"\xef\xbb\xbf{\"type\": \"A\", \"steps\": 2, \"instruction\": \"\xff\"}",
	}
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	if files, _ := filepath.Glob(filepath.Join(realTasks, "VM", "*", "*.json")); len(files) > 0 {
		for _, p := range files {
			if data, err := os.ReadFile(p); err == nil {
				f.Add(data)
			}
		}
	}
	const path = "fuzz/VM/App/F-01.json"
	f.Fuzz(func(t *testing.T, data []byte) {
		task, err := ParseTask(path, data)
		if err != nil {
			if task != nil {
				t.Fatal("task and error both returned")
			}
			checkNamesFile(t, err, path)
			return
		}
		if task.Path != path || task.ID != task.App+"/F-01" || task.Steps <= 0 || task.Unsupported == nil {
			t.Fatalf("bad task: %+v", task)
		}
		for _, u := range task.Unsupported {
			if !strings.HasPrefix(u, "initialize[") && !strings.HasPrefix(u, "evaluate[") {
				t.Fatalf("unsupported entry %q does not name its item", u)
			}
		}
		enc, err := task.FileJSON()
		if err != nil {
			t.Fatalf("FileJSON: %v", err)
		}
		var want, got any
		if json.Unmarshal(data, &want) == nil { // skip inputs the generic decoder rejects (e.g. 1e999)
			if err := json.Unmarshal(enc, &got); err != nil {
				t.Fatalf("FileJSON output invalid: %v\n%s", err, enc)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("round trip differs:\n in  %q\n out %s", data, enc)
			}
		}
		vals := map[string]string{}
		for _, n := range task.Placeholders() {
			vals[n] = "8000"
		}
		exp, err := task.ExpandPlaceholders(vals)
		if err != nil {
			t.Fatalf("expanding known placeholders: %v", err)
		}
		if len(exp.Initialize) != len(task.Initialize) || len(exp.Placeholders()) != 0 {
			t.Fatalf("expansion: %d items, placeholders left %q", len(exp.Initialize), exp.Placeholders())
		}
	})
}

// checkNamesFile asserts that err and every error joined in it is a
// *FileError for path whose message names the file.
func checkNamesFile(t *testing.T, err error, path string) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), path+": ") {
		t.Fatalf("error does not start with the file name: %q", err)
	}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		for _, e := range j.Unwrap() {
			checkNamesFile(t, e, path)
		}
		return
	}
	var fe *FileError
	if !errors.As(err, &fe) || fe.Path != path {
		t.Fatalf("error %T is not a *FileError for %s: %v", err, path, err)
	}
}

// checkErr checks err against want, the error text a case expects (""
// for none), and reports whether the case expected an error (and so ends
// there); an unexpected error fails the test.
func checkErr(t *testing.T, err error, want string) bool {
	t.Helper()
	if want != "" {
		if err == nil || err.Error() != want {
			t.Fatalf("got %v, want %q", err, want)
		}
		return true
	}
	if err != nil {
		t.Fatal(err)
	}
	return false
}
