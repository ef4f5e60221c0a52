package sft

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/testkit/tmpfs"
)

// TestExportFailureIsNotLoggedAsExported (issue 40): an export whose
// upload fails (here: a destination folder on a full 16 KB tmpfs) exits
// non-zero and logs that it failed, never "sftpack: exported".
func TestExportFailureIsNotLoggedAsExported(t *testing.T) {
	c := smallCorpus(t) // the race pass's corpus
	local := filepath.Join(t.TempDir(), "sft")
	buildCLI(t, c.StoreDir(), local)
	dst := t.TempDir()
	tmpfs.Mount(t, dst, "16k")
	_, stderr, code := runCLI(t, "export", local, filepath.Join(dst, "set"))
	if code == 0 {
		t.Fatalf("export onto a full disk: exit 0\n%s", stderr)
	}
	if strings.Contains(stderr, "sftpack: exported") || !strings.Contains(stderr, "sftpack: export failed") {
		t.Errorf("the log of a failed export:\n%s", stderr)
	}
}
