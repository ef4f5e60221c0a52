package sft

import (
	"flag"
	"testing"

	"github.com/codapipe/codapipe/internal/testkit/docstest"
)

// TestOperationsDocsMatchHelp: the sftpack build tables of
// docs/operations.md and docs/sft.md (with the common flags of
// docs/operations.md) list every flag with its environment variable and
// default, and nothing else; sftpack and sftpack export have no flags.
func TestOperationsDocsMatchHelp(t *testing.T) {
	ops := docstest.Tables(t, "../../../docs/operations.md")
	for _, doc := range []string{"../../../docs/operations.md", "../../../docs/sft.md"} {
		t.Run(doc, func(t *testing.T) {
			tables := docstest.Tables(t, doc)
			tables["flags: common"] = ops["flags: common"]
			docstest.CheckFlags(t, tables, buildCommand(), "flags: common", "flags: sftpack build")
		})
	}
	for _, c := range append(Command().Sub[1:], Command()) {
		c.FlagSet().VisitAll(func(f *flag.Flag) { t.Errorf("%s has the flag --%s, which the docs do not list", c.Name, f.Name) })
	}
}
