package scienceboard

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

var update = flag.Bool("update", false, "rewrite golden files in testdata/")

func TestWriteListTextGolden(t *testing.T) {
	set, err := LoadDir(filepath.Join("testdata", "synth"))
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteList(&buf, set, false); err != nil {
		t.Fatal(err)
	}
	golden := filepath.Join("testdata", "list.golden")
	if *update {
		if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -run TestWriteListTextGolden -update to create it)", err)
	}
	if !bytes.Equal(buf.Bytes(), want) {
		t.Errorf("text listing differs from %s (rerun with -update if intended):\n got:\n%s\nwant:\n%s", golden, buf.Bytes(), want)
	}
}

type listJSON struct {
	Tasks []struct {
		ID          string    `json:"id"`
		App         string    `json:"app"`
		Steps       int       `json:"steps"`
		Instruction string    `json:"instruction"`
		Unsupported *[]string `json:"unsupported"`
	} `json:"tasks"`
	Counts map[string]int `json:"counts"`
}

func decodeList(t *testing.T, b []byte) listJSON {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var doc listJSON
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("decode: %v\n%s", err, b)
	}
	if dec.More() {
		t.Fatal("more than one JSON document")
	}
	return doc
}

// listOf loads the tasks under dir and lists them as JSON (WriteList).
func listOf(t *testing.T, dir string) (*Set, listJSON) {
	t.Helper()
	set, err := LoadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := WriteList(&buf, set, true); err != nil {
		t.Fatal(err)
	}
	return set, decodeList(t, buf.Bytes())
}

func TestWriteListJSON(t *testing.T) {
	t.Run("synthetic", func(t *testing.T) {
		set, doc := listOf(t, filepath.Join("testdata", "synth"))
		if want := map[string]int{"ChimeraX": 2, "KAlgebra": 1, "Lab": 1}; !reflect.DeepEqual(doc.Counts, want) {
			t.Errorf("counts %v, want %v", doc.Counts, want)
		}
		if len(doc.Tasks) != 4 {
			t.Fatalf("%d tasks", len(doc.Tasks))
		}
		for i, tk := range doc.Tasks {
			if tk.Unsupported == nil {
				t.Errorf("task %s: unsupported is null or missing", tk.ID)
				continue
			}
			if !reflect.DeepEqual(*tk.Unsupported, set.Tasks[i].Unsupported) || tk.Instruction != set.Tasks[i].Instruction {
				t.Errorf("task %d = %+v", i, tk)
			}
		}
		x2 := doc.Tasks[1]
		want := []string{
			`initialize[0]: func "alphafold_predict" not supported by ChimeraX`,
			`initialize[1]: func "turn": unknown field "speed" kept raw`,
			`evaluate[1]: type "pixel" not supported by ChimeraX`,
		}
		if x2.ID != "ChimeraX/X-02" || x2.Steps != 10 || !reflect.DeepEqual(*x2.Unsupported, want) {
			t.Errorf("X-02 = %+v", x2)
		}
	})
	t.Run("real tasks", func(t *testing.T) {
		needRealTasks(t)
		_, doc := listOf(t, realTasks)
		if want := map[string]int{"Celestia": 33, "ChimeraX": 29, "GrassGIS": 34, "KAlgebra": 31, "Lean": 26, "TeXstudio": 16}; !reflect.DeepEqual(doc.Counts, want) {
			t.Errorf("counts %v, want %v", doc.Counts, want)
		}
		if len(doc.Tasks) != 169 {
			t.Errorf("%d tasks", len(doc.Tasks))
		}
	})
	t.Run("empty set", func(t *testing.T) {
		var buf bytes.Buffer
		if err := WriteList(&buf, nil, true); err != nil {
			t.Fatal(err)
		}
		if got := buf.String(); got != "{\n  \"tasks\": [],\n  \"counts\": {}\n}\n" {
			t.Errorf("got %q", got)
		}
	})
}
