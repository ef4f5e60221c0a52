package export

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// maxProblems is how many problems of a manifest one error lists.
const maxProblems = 10

// entry is one element of the manifest's "files" list as written; pointers tell a missing field
// from a zero one.
type entry struct {
	Path   *string `json:"path"`
	Bytes  *int64  `json:"bytes"`
	SHA256 *string `json:"sha256"`
}

// problems collects what is wrong with a manifest, to report it all at once.
type problems []error

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Errorf(format, args...)) }

func (p problems) err() error {
	if len(p) == 0 {
		return nil
	}
	list := p
	if len(list) > maxProblems {
		list = append(list[:maxProblems:maxProblems], fmt.Errorf("export: ... and %d more problems", len(p)-maxProblems))
	}
	return errors.Join(list...)
}

// readManifest reads dir/manifest.json and returns its bytes and its files sorted by path, with
// their keys under prefix. It checks the list itself (fields present, paths relative, clean,
// valid as keys, no duplicates, not the manifest) and that each file exists in dir as a regular
// file of the listed size; every problem found is reported, each naming its file.
func readManifest(dir, prefix string) ([]byte, []file, error) {
	mpath := filepath.Join(dir, ManifestName)
	raw, err := os.ReadFile(mpath)
	if err != nil {
		return nil, nil, fmt.Errorf("export: %s: %w", ManifestName, err)
	}
	var m struct {
		Files *[]entry `json:"files"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		return nil, nil, fmt.Errorf("export: %s: %s is not a JSON object with a \"files\" list: %w", ManifestName, mpath, err)
	}
	if m.Files == nil {
		return nil, nil, fmt.Errorf("export: %s: %s has no \"files\" list", ManifestName, mpath)
	}
	var bad problems
	seen := make(map[string]int, len(*m.Files))
	files := make([]file, 0, len(*m.Files))
	for i, e := range *m.Files {
		if e.Path == nil {
			bad.add("export: %s: files[%d] has no \"path\"", ManifestName, i)
			continue
		}
		p := *e.Path
		name := fmt.Sprintf("%q (%s files[%d])", p, ManifestName, i)
		if msg := checkPath(p); msg != "" {
			bad.add("export: %s: %s", name, msg)
			continue
		}
		key := objectKey(prefix, p)
		if err := blob.ValidateKey(key); err != nil {
			bad.add("export: %s: not usable as an object name: %w", name, err)
			continue
		}
		if j, dup := seen[p]; dup {
			bad.add("export: %s: listed twice (also files[%d])", name, j)
			continue
		}
		seen[p] = i
		switch {
		case e.Bytes == nil:
			bad.add("export: %s: no \"bytes\"", name)
			continue
		case *e.Bytes < 0:
			bad.add("export: %s: \"bytes\" is %d", name, *e.Bytes)
			continue
		case e.SHA256 == nil:
			bad.add("export: %s: no \"sha256\"", name)
			continue
		}
		sum := strings.ToLower(*e.SHA256)
		if _, err := hex.DecodeString(sum); err != nil || len(sum) != 64 {
			bad.add("export: %s: \"sha256\" %q is not 64 hex digits", name, *e.SHA256)
			continue
		}
		f := file{path: p, local: localPath(dir, p), key: key, size: *e.Bytes, sha256: sum}
		fi, err := os.Stat(f.local)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			bad.add("export: %s: listed in the manifest (%d bytes) but missing from %s", p, f.size, dir)
		case err != nil:
			bad.add("export: %s: %w", p, err)
		case !fi.Mode().IsRegular():
			bad.add("export: %s: %s is not a regular file (%s)", p, f.local, fi.Mode().Type())
		case fi.Size() != f.size:
			bad.add("export: %s: %s has %d bytes, the manifest says %d", p, f.local, fi.Size(), f.size)
		default:
			files = append(files, f)
		}
	}
	if err := bad.err(); err != nil {
		return nil, nil, err
	}
	slices.SortFunc(files, func(a, b file) int { return strings.Compare(a.path, b.path) })
	return raw, files, nil
}

// checkPath returns what is wrong with a manifest path, or "".
func checkPath(p string) string {
	switch {
	case p == "":
		return "empty path"
	case strings.HasPrefix(p, "/") || filepath.IsAbs(p):
		return "absolute path; paths are relative to the folder"
	case strings.Contains(p, "\\"):
		return "backslash in path; paths are slash-separated"
	case slices.Contains(strings.Split(p, "/"), ".."):
		return "\"..\" in path; every file must be inside the folder"
	case !fs.ValidPath(p) || p == ".":
		return "not a clean path (empty, \".\" or trailing segments)"
	case p == ManifestName:
		return "the manifest cannot list itself"
	}
	return ""
}

// checkLocal hashes every file when hash is set and reports those whose SHA-256 differs from the
// manifest's.
func checkLocal(ctx context.Context, files []file, hash bool, parallel int) error {
	if !hash {
		return nil
	}
	var mu sync.Mutex
	var bad problems
	err := forEach(ctx, len(files), parallel, func(ctx context.Context, i int) error {
		f := files[i]
		sum, n, err := hashFile(ctx, f.local)
		if err != nil {
			return fmt.Errorf("export: %s: %w", f.path, err)
		}
		mu.Lock()
		defer mu.Unlock()
		switch {
		case n != f.size:
			bad.add("export: %s: %s has %d bytes, the manifest says %d", f.path, f.local, n, f.size)
		case sum != f.sha256:
			bad.add("export: %s: %s has sha256 %s, the manifest says %s: %w", f.path, f.local, sum, f.sha256, blob.ErrChecksumMismatch)
		}
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortFunc(bad, func(a, b error) int { return strings.Compare(a.Error(), b.Error()) })
	return bad.err()
}
