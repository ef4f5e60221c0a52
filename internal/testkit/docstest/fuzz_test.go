package docstest

import (
	"bufio"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// fuzzFunc matches the declaration of a fuzz target.
var fuzzFunc = regexp.MustCompile(`^func (Fuzz[A-Za-z0-9_]*)\(`)

// fuzzTargets returns every fuzz target under root as "package-dir Target"
// (the dir slash-separated, relative to root), from the *_test.go files.
func fuzzTargets(t *testing.T, root string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		rel, err := filepath.Rel(root, filepath.Dir(p))
		if err != nil {
			return err
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if m := fuzzFunc.FindStringSubmatch(sc.Text()); m != nil {
				out = append(out, filepath.ToSlash(rel)+" "+m[1])
			}
		}
		return sc.Err()
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(out)
	return out
}

// The table of docs/fuzzing.md lists every fuzz target in the tree, and
// nothing else: a new target needs its row (parser, input, properties),
// and a row whose target is gone fails.
func TestFuzzTargetsDocumented(t *testing.T) {
	const doc = "../../../docs/fuzzing.md"
	rows := Tables(t, doc)["fuzz-targets"]
	if len(rows) == 0 {
		t.Fatalf("%s has no <!-- fuzz-targets --> table", doc)
	}
	var listed []string
	for _, r := range rows {
		if len(r) < 5 || Unquote(r[2]) == "" || r[3] == "" || r[4] == "" {
			t.Errorf("%s: row %q: want package, target, parser, input and properties", doc, r)
			continue
		}
		listed = append(listed, Unquote(r[0])+" "+Unquote(r[1]))
	}
	slices.Sort(listed)
	found := fuzzTargets(t, "../../..")
	for _, x := range found {
		if _, ok := slices.BinarySearch(listed, x); !ok {
			t.Errorf("fuzz target %s has no row in %s", x, doc)
		}
	}
	for i, x := range listed {
		if _, ok := slices.BinarySearch(found, x); !ok {
			t.Errorf("%s lists %s, which is no fuzz target in the tree", doc, x)
		}
		if i > 0 && listed[i-1] == x {
			t.Errorf("%s lists %s twice", doc, x)
		}
	}
	if len(found) == 0 {
		t.Fatal("no fuzz target found in the tree")
	}
}
