package advantage

import (
	"flag"
	"testing"

	"github.com/codapipe/codapipe/internal/docstest"
	"github.com/codapipe/codapipe/internal/service"
)

// TestOperationsDocsMatchHelp: docs/operations.md lists every flag of
// advantage with its environment variable and default, and nothing else.
func TestOperationsDocsMatchHelp(t *testing.T) {
	tables := docstest.Tables(t, "../../docs/operations.md")
	doc := map[string][2]string{}
	for _, name := range []string{"flags: common", "flags: consumer", "flags: advantage"} {
		rows, ok := tables[name]
		if !ok || len(rows) == 0 {
			t.Fatalf("docs/operations.md has no table after <!-- %s -->", name)
		}
		for _, r := range rows {
			doc[docstest.Unquote(r[0])] = [2]string{docstest.Unquote(r[1]), docstest.Unquote(r[2])}
		}
	}
	seen := map[string]bool{}
	Command().FlagSet().VisitAll(func(f *flag.Flag) {
		name := "--" + f.Name
		seen[name] = true
		env, def := service.EnvOf(f.Usage), f.DefValue
		if env == "" {
			env = "—"
		}
		if def == "" {
			def = "—"
		}
		if d, ok := doc[name]; !ok {
			t.Errorf("%s is not in the docs' table", name)
		} else if d != [2]string{env, def} {
			t.Errorf("%s: docs say %q; --help says env %q, default %q", name, d, env, def)
		}
	})
	for name := range doc {
		if !seen[name] {
			t.Errorf("the docs list %s, which advantage does not have", name)
		}
	}
}
