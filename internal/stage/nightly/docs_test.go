package nightly

import (
	"testing"

	"github.com/codapipe/codapipe/internal/testkit/docstest"
)

// TestOperationsDocsMatchHelp: the nightly flag table of
// docs/operations.md is the command's flags, with their environment
// variables and defaults.
func TestOperationsDocsMatchHelp(t *testing.T) {
	tables := docstest.Tables(t, "../../../docs/operations.md")
	docstest.CheckFlags(t, tables, Command(), "flags: common", "flags: nightly")
}
