package pylambda

import (
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
)

// taskLambda is one lambda of a task file.
type taskLambda struct {
	where string // App/ID evaluate[i].path
	field string // the last key: key, pred, find, value
	src   string
}

// isLambdaSource reports whether s is Python lambda source.
func isLambdaSource(s string) bool {
	s = strings.TrimLeft(s, " \t")
	if !strings.HasPrefix(s, "lambda") {
		return false
	}
	rest := s[len("lambda"):]
	return rest == "" || strings.ContainsAny(rest[:1], " \t:*")
}

// taskLambdas returns every string that is lambda source, at any depth of
// the evaluate items of every task file under root, and the number of
// files read.
func taskLambdas(t testing.TB, root string) ([]taskLambda, int) {
	t.Helper()
	var out []taskLambda
	files := 0
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Ext(path) != ".json" {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		var task map[string]any
		if err := json.Unmarshal(data, &task); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		files++
		name := filepath.Base(filepath.Dir(path)) + "/" + strings.TrimSuffix(filepath.Base(path), ".json")
		var walk func(v any, where, field string)
		walk = func(v any, where, field string) {
			switch v := v.(type) {
			case map[string]any:
				keys := make([]string, 0, len(v))
				for k := range v {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				for _, k := range keys {
					walk(v[k], where+"."+k, k)
				}
			case []any:
				for i, x := range v {
					walk(x, fmt.Sprintf("%s[%d]", where, i), field)
				}
			case string:
				if isLambdaSource(v) {
					out = append(out, taskLambda{where: where, field: field, src: v})
				}
			}
		}
		walk(task["evaluate"], name+" evaluate", "")
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, files
}

// wantParams is how many arguments ScienceBoard passes to a lambda in
// each field: key(dump) or key(state key), pred(key, value),
// find(key, value), value().
var wantParams = map[string]int{"key": 1, "pred": 2, "find": 2, "value": 0}

// TestTaskFileLambdasCompile compiles every lambda of every task file
// (CODAPIPE_SCIENCEBOARD_TASKS or the repository's copy) and checks that
// it takes the arguments ScienceBoard calls it with.
func TestTaskFileLambdasCompile(t *testing.T) {
	root := sbtest.Tasks()
	lambdas, files := taskLambdas(t, root)
	if root == sbtest.Copy() {
		// The repository's copy: 169 files of six apps, 158 lambdas.
		if files != 169 || len(lambdas) != 158 {
			t.Errorf("read %d files and %d lambdas, want 169 and 158", files, len(lambdas))
		}
	}
	compiled := 0
	for _, tl := range lambdas {
		t.Run(tl.where, func(t *testing.T) {
			l, err := Compile(tl.src)
			if err != nil {
				t.Fatalf("%s\n%v", tl.src, err)
			}
			compiled++
			if n, ok := wantParams[tl.field]; ok && l.Params() != n {
				t.Errorf("%s takes %d parameters, ScienceBoard passes %d", tl.src, l.Params(), n)
			}
		})
	}
	t.Logf("%d files, %d lambdas, %d compiled", files, len(lambdas), compiled)
}

// TestGoldenCoversTaskFiles checks that golden.json holds at least one
// call of every task-file lambda, so that a new task file makes the
// goldens stale instead of untested.
func TestGoldenCoversTaskFiles(t *testing.T) {
	doc := readGolden(t)
	have := map[string]bool{}
	for _, c := range doc.Cases {
		have[c.Src] = true
	}
	lambdas, _ := taskLambdas(t, sbtest.Copy())
	for _, tl := range lambdas {
		if !have[tl.src] {
			t.Errorf("%s: %q has no golden case: run go test -run TestGolden -update", tl.where, tl.src)
		}
	}
}
