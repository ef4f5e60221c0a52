// Package tmpfs is a test helper: a small tmpfs mounted over a folder, a
// disk that fills up (ENOSPC) after a few kilobytes.
package tmpfs

import (
	"os"
	"os/exec"
	"testing"
)

// Mount mounts a tmpfs of size ("64k") over dir, which it creates, and
// returns the function that unmounts it (at most once; the test's cleanup
// calls it too). Mounting needs root: a test run by another user skips,
// saying so; as root a mount that fails fails the test.
func Mount(t testing.TB, dir, size string) (unmount func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs (a full disk) needs root")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a %s tmpfs on %s as root: %v: %s", size, dir, err, out)
	}
	mounted := true
	unmount = func() {
		if !mounted {
			return
		}
		mounted = false
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	}
	t.Cleanup(unmount)
	return unmount
}
