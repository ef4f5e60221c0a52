package sft

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestExportFailureIsNotLoggedAsExported (issue 40): an export whose
// upload fails (here: a destination folder on a full 16 KB tmpfs) exits
// non-zero and logs that it failed, never "sftpack: exported".
func TestExportFailureIsNotLoggedAsExported(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs (a full destination) needs root")
	}
	c := sharedCorpus(t)
	local := filepath.Join(t.TempDir(), "sft")
	buildCLI(t, c.StoreDir(), local)
	dst := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", dst).CombinedOutput(); err != nil {
		t.Fatalf("mount a 16 KB tmpfs as root: %v: %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", dst).Run() })
	_, stderr, code := runCLI(t, "export", local, filepath.Join(dst, "set"))
	if code == 0 {
		t.Fatalf("export onto a full disk: exit 0\n%s", stderr)
	}
	if strings.Contains(stderr, "sftpack: exported") || !strings.Contains(stderr, "sftpack: export failed") {
		t.Errorf("the log of a failed export:\n%s", stderr)
	}
}
