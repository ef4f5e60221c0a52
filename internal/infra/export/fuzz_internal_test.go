package export

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// FuzzReadManifest feeds arbitrary bytes as the manifest.json of a folder
// holding a.jsonl (3 bytes) and images/b.png (2 bytes) to readManifest,
// the parser sftpack export and the shard exporters trust to say what to
// upload. Every problem of a rejected manifest is an "export: " line; an
// accepted manifest lists existing files inside the folder, each once,
// sorted, with a key under the prefix that is a valid object key.
func FuzzReadManifest(f *testing.F) {
	dir := f.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "images"), 0o755); err != nil {
		f.Fatal(err)
	}
	for p, body := range map[string]string{"a.jsonl": "{}\n", "images/b.png": "PN"} {
		if err := os.WriteFile(filepath.Join(dir, filepath.FromSlash(p)), []byte(body), 0o644); err != nil {
			f.Fatal(err)
		}
	}
	sum := strings.Repeat("0123456789abcdef", 4)
	f.Add("sft/night-1", []byte(`{"kind":"codapipe.sft/v1","files":[{"path":"a.jsonl","bytes":3,"sha256":"`+sum+`"},{"path":"images/b.png","bytes":2,"sha256":"`+strings.ToUpper(sum)+`"}]}`))
	f.Add("", []byte(`{"files":[{"path":"a.jsonl","bytes":3,"sha256":"`+sum+`"}]}`))
	f.Add("p", []byte(`{"files":[{"path":"../a.jsonl","bytes":3,"sha256":"x"},{"path":"a.jsonl"},{"path":"a.jsonl","bytes":-1},{"path":"manifest.json"}]}`))
	f.Add("p", []byte(`{"files":[{"path":"images","bytes":4096,"sha256":"`+sum+`"},{"path":"c","bytes":1,"sha256":"`+sum+`"}]}`))
	f.Add("p", []byte(`{"files":[{"path":"x\ny: listed","bytes":1,"sha256":"`+sum+`"}]}`))
	f.Add("p", []byte(`{"files":null}`))
	f.Add("p", []byte(`[1,2]`))
	f.Fuzz(func(t *testing.T, prefix string, data []byte) {
		if err := os.WriteFile(filepath.Join(dir, ManifestName), data, 0o644); err != nil {
			t.Fatal(err)
		}
		raw, files, err := readManifest(dir, prefix)
		if err != nil {
			for _, line := range strings.Split(err.Error(), "\n") {
				if !strings.HasPrefix(line, "export: ") {
					t.Fatalf("problem %q does not start with \"export: \" in\n%v", line, err)
				}
			}
			return
		}
		if string(raw) != string(data) {
			t.Fatalf("raw manifest differs from the file")
		}
		if !slices.IsSortedFunc(files, func(a, b file) int { return strings.Compare(a.path, b.path) }) {
			t.Fatalf("files not sorted by path")
		}
		for i, fl := range files {
			if i > 0 && files[i-1].path == fl.path {
				t.Fatalf("%q listed twice", fl.path)
			}
			rel, err := filepath.Rel(dir, fl.local)
			if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || fl.path == ManifestName {
				t.Fatalf("file %q resolves to %q, outside %s or the manifest", fl.path, fl.local, dir)
			}
			if fl.key != objectKey(prefix, fl.path) || blob.ValidateKey(fl.key) != nil {
				t.Fatalf("file %q: key %q", fl.path, fl.key)
			}
			if fi, err := os.Stat(fl.local); err != nil || !fi.Mode().IsRegular() || fi.Size() != fl.size || len(fl.sha256) != 64 {
				t.Fatalf("file %q accepted: %v, size %d, sha256 %q", fl.path, err, fl.size, fl.sha256)
			}
		}
	})
}
