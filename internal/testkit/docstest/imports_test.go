package docstest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// module is the module path; the rules name packages relative to it.
const module = "github.com/codapipe/codapipe/"

// architectureDoc holds the import rules: the tables "package groups",
// "imports" and "binaries" of docs/architecture.md.
const architectureDoc = "../../../docs/architecture.md"

// listed is what `go list -json` says of one package.
type listed struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// goList lists the module's packages with their imports and dependencies.
func goList(t *testing.T, patterns ...string) []listed {
	t.Helper()
	// The go command that built this test; under -trimpath (make test)
	// runtime.GOROOT is empty, and the go on PATH is the one make runs.
	goBin := "go"
	if root := runtime.GOROOT(); root != "" {
		goBin = filepath.Join(root, "bin", "go")
	}
	cmd := exec.Command(goBin, append([]string{"list", "-json=ImportPath,Imports,Deps"}, patterns...)...)
	cmd.Dir = "../../.."
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	dec := json.NewDecoder(bytes.NewReader(out))
	for {
		var p listed
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// pattern matches a package path relative to the module: "a/b" is that
// package, "a/b/..." it and every package below it.
func match(pattern, pkg string) bool {
	if base, ok := strings.CutSuffix(pattern, "/..."); ok {
		return pkg == base || strings.HasPrefix(pkg, base+"/")
	}
	return pkg == pattern
}

// names splits a cell of package patterns and group names: "`a`, group".
func names(cell string) []string {
	var out []string
	for _, f := range strings.Split(cell, ",") {
		if f = Unquote(strings.TrimSpace(f)); f != "" && f != "—" {
			out = append(out, f)
		}
	}
	return out
}

// rules are the import rules of docs/architecture.md.
type rules struct {
	// folders: the groups of internal/ and what each may import; a
	// package in a folder obeys both its folder's row and its own.
	folders []rule
	imports []rule
	// binaries: binary → forbidden package patterns.
	binaries map[string][]string
}

// rule is one row of the imports table.
type rule struct {
	pattern string
	allowed []string // package patterns, groups expanded
}

// readRules reads the rules from the tables of the architecture doc.
func readRules(t *testing.T, path string) rules {
	t.Helper()
	tables := Tables(t, path)
	groups := map[string][]string{}
	for _, r := range tables["package groups"] {
		groups[Unquote(r[0])] = names(r[1])
	}
	expand := func(cell string) []string {
		var out []string
		for _, n := range names(cell) {
			if g, ok := groups[n]; ok {
				out = append(out, g...)
			} else {
				out = append(out, n)
			}
		}
		return out
	}
	rs := rules{binaries: map[string][]string{}}
	for _, r := range tables["imports"] {
		rs.imports = append(rs.imports, rule{pattern: Unquote(r[0]), allowed: expand(r[1])})
	}
	for _, r := range tables["binaries"] {
		rs.binaries[Unquote(r[0])] = expand(r[1])
	}
	for _, r := range tables["folders"] {
		ru := rule{pattern: Unquote(r[0])}
		if r[2] != "anything" {
			ru.allowed = expand(r[2])
		} else {
			ru.allowed = []string{"..."}
		}
		rs.folders = append(rs.folders, ru)
	}
	if len(rs.folders) == 0 {
		t.Fatalf("%s: the folders table must be there", path)
	}
	if len(groups) == 0 || len(rs.imports) == 0 || len(rs.binaries) == 0 {
		t.Fatalf("%s: the package groups, imports and binaries tables must all be there", path)
	}
	return rs
}

// importViolations lists what breaks the imports rules among pkgs (their
// non-test imports).
func (rs rules) importViolations(pkgs []listed) []string {
	var out []string
	for _, p := range pkgs {
		pkg := strings.TrimPrefix(p.ImportPath, module)
		var mine []rule
		for _, ru := range rs.imports {
			if match(ru.pattern, pkg) {
				mine = append(mine, ru)
			}
		}
		if len(mine) != 1 {
			out = append(out, fmt.Sprintf("%s is covered by %d rows of the imports table, want 1: add it there", pkg, len(mine)))
			continue
		}
		ru := mine[0]
		for _, f := range rs.folders {
			if !match(f.pattern, pkg) || slices.Contains(f.allowed, "...") {
				continue
			}
			for _, imp := range p.Imports {
				dep, ok := strings.CutPrefix(imp, module)
				if ok && !match(f.pattern, dep) && !slices.ContainsFunc(f.allowed, func(a string) bool { return match(a, dep) }) {
					out = append(out, fmt.Sprintf("%s imports %s, which its folder (%s) does not allow", pkg, dep, f.pattern))
				}
			}
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, module)
			if !ok || strings.HasSuffix(ru.pattern, "/...") && match(ru.pattern, dep) {
				continue // outside the module, or within the row's own tree
			}
			if !slices.ContainsFunc(ru.allowed, func(a string) bool { return match(a, dep) }) {
				out = append(out, fmt.Sprintf("%s imports %s, which its row (%s) does not allow", pkg, dep, ru.pattern))
			}
		}
	}
	return out
}

// linkViolations lists the forbidden packages among the dependencies of
// binary bin.
func (rs rules) linkViolations(bin string, deps []string) []string {
	var out []string
	for _, d := range deps {
		dep, ok := strings.CutPrefix(d, module)
		if !ok {
			continue
		}
		for _, f := range rs.binaries[bin] {
			if match(f, dep) {
				out = append(out, fmt.Sprintf("%s links %s", bin, dep))
			}
		}
	}
	return out
}

// TestImportRules holds the tree to the import rules of
// docs/architecture.md: every package of the module is covered by exactly
// one row of the "imports" table, imports (outside its tests) only the
// module packages its row and its folder's row of the "folders" table
// allow, and no binary links what the "binaries" table forbids it.
func TestImportRules(t *testing.T) {
	rs := readRules(t, architectureDoc)
	for _, v := range rs.importViolations(goList(t, "./...")) {
		t.Errorf("%s (%s)", v, architectureDoc)
	}
	for bin := range rs.binaries {
		deps := goList(t, "./"+bin)
		if len(deps) != 1 {
			t.Fatalf("go list ./%s: %d packages", bin, len(deps))
		}
		for _, v := range rs.linkViolations(bin, deps[0].Deps) {
			t.Errorf("%s, which %s forbids", v, architectureDoc)
		}
	}
}

// TestImportRulesCatchForbiddenImports: the checks find a forbidden
// import, a package without a row and a forbidden dependency of a binary.
func TestImportRulesCatchForbiddenImports(t *testing.T) {
	rs := readRules(t, architectureDoc)
	got := rs.importViolations([]listed{
		{ImportPath: module + "internal/stage/advantage", Imports: []string{module + "internal/stage/rollout", "fmt"}},
		{ImportPath: module + "internal/nowhere"},
		{ImportPath: module + "internal/sim/models", Imports: []string{module + "internal/sim/tasks"}},
		{ImportPath: module + "internal/contract/prompt", Imports: []string{module + "internal/stage/judge"}},
	})
	want := []string{
		"internal/stage/advantage imports internal/stage/rollout, which its row (internal/stage/advantage) does not allow",
		"internal/nowhere is covered by 0 rows of the imports table, want 1: add it there",
		"internal/contract/prompt imports internal/stage/judge, which its folder (internal/contract/...) does not allow",
		"internal/contract/prompt imports internal/stage/judge, which its row (internal/contract/prompt) does not allow",
	}
	if !slices.Equal(got, want) {
		t.Errorf("violations %q, want %q", got, want)
	}
	if got := rs.linkViolations("cmd/advantage", []string{module + "internal/sim/desktop", "fmt", module + "internal/contract/shard"}); !slices.Equal(got, []string{"cmd/advantage links internal/sim/desktop"}) {
		t.Errorf("link violations %q", got)
	}
}

// TestMatch: the patterns of the rules.
func TestMatch(t *testing.T) {
	for _, c := range []struct {
		pattern, pkg string
		want         bool
	}{
		{"internal/sim/...", "internal/sim", true},
		{"internal/sim/...", "internal/sim/models", true},
		{"internal/sim/...", "internal/simx", false},
		{"internal/sim", "internal/sim/models", false},
		{"pkg/traj", "pkg/traj", true},
	} {
		if got := match(c.pattern, c.pkg); got != c.want {
			t.Errorf("match(%q, %q) = %v", c.pattern, c.pkg, got)
		}
	}
}
