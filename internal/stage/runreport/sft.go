package runreport

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/codapipe/codapipe/internal/stage/sft/dataset"
)

// sftSamples finds the SFT sets under dir (folders holding an sftpack
// manifest, at any depth) and gives each of runs its figures in the set
// that took the most of its trajectories (the first such set in path
// order); a run no set takes has none.
func sftSamples(dir string, runs []string) (map[string]*SFTFigures, error) {
	out := map[string]*SFTFigures{}
	if dir == "" {
		return out, nil
	}
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || d.Name() != dataset.ManifestName {
			return nil
		}
		set := filepath.Dir(path)
		m, err := dataset.ReadManifest(set)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, set)
		if err != nil {
			rel = set
		}
		for _, run := range runs {
			c, ok := m.Runs[run]
			if f := out[run]; ok && (f == nil || c.Trajectories > f.Trajectories) {
				out[run] = &SFTFigures{Set: filepath.ToSlash(rel), Trajectories: c.Trajectories, Samples: c.Samples}
			}
		}
		return filepath.SkipDir // a set holds no other set
	})
	if err != nil {
		return nil, fmt.Errorf("SFT sets under %s: %w", dir, err)
	}
	return out, nil
}
