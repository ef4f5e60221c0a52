package toolbin

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestFind(t *testing.T) {
	root := t.TempDir()
	sub := filepath.Join(root, "a", "b")
	if err := os.MkdirAll(filepath.Join(root, ".bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "go.mod"), []byte("module x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tool := filepath.Join(root, ".bin", "tool")
	if err := os.WriteFile(tool, nil, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Chdir(sub)
	t.Setenv("TOOLBIN_TEST", "")
	if got, err := Find("TOOLBIN_TEST", "tool"); err != nil || got != tool {
		t.Errorf("Find from a sub-folder = %q, %v; want %q", got, err, tool)
	}
	if _, err := Find("TOOLBIN_TEST", "missing"); err == nil || !strings.Contains(err.Error(), "make tools") {
		t.Errorf("Find of a missing tool: %v; want an error naming make tools", err)
	}
	t.Setenv("TOOLBIN_TEST", filepath.Join(root, "elsewhere"))
	if _, err := Find("TOOLBIN_TEST", "tool"); err == nil || !strings.Contains(err.Error(), "TOOLBIN_TEST=") {
		t.Errorf("Find with a wrong override: %v; want an error naming the variable", err)
	}
}
