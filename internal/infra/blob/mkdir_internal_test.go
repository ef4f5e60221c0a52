package blob

import (
	"os"
	"path/filepath"
	"testing"
)

func TestMkdirAllSync(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "sha256", "ab", "cd")
	for range 2 { // a second call finds it there
		if err := mkdirAllSync(dir); err != nil {
			t.Fatal(err)
		}
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			t.Fatalf("%s: %v, %v: want a directory", dir, fi, err)
		}
	}
	file := filepath.Join(root, "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := mkdirAllSync(filepath.Join(file, "sub")); err == nil {
		t.Fatal("a directory under a file was made")
	}
}
