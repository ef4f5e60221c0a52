package sft

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/testkit/filefuzz"
)

// FuzzReadManifest feeds arbitrary bytes as a dataset's manifest.json to
// ReadManifest (the nightly summary and the chaos accounting read it): an
// error names the file; an accepted manifest is of ManifestKind, and
// written back it reads the same.
func FuzzReadManifest(f *testing.F) {
	good, err := json.MarshalIndent(Manifest{Kind: ManifestKind, Producer: "sftpack", Layout: Layout,
		Selection: Selection{Runs: []string{"nightly-1"}, Apps: []string{"ChimeraX"}, Rules: Rules{ValFraction: 0.1, Seed: 7, ShardBytes: 1 << 28}},
		Counts:    Counts{Records: 3, Trajectories: 3, Decisions: map[string]int{"clean_success": 2, "failure": 1}, Kept: 2, Samples: 9, Images: 9},
		Splits:    map[string]SplitInfo{"train": {Tasks: 2, Count: Count{Trajectories: 2, Samples: 9}, JSONL: TrainName, Parquet: []string{"parquet/train-00000.parquet"}}},
		Apps:      map[string]Count{"ChimeraX": {Trajectories: 2, Samples: 9}},
		Tasks:     map[string]TaskCount{"ChimeraX/A-01": {App: "ChimeraX", Split: "train", Count: Count{Trajectories: 2, Samples: 9}}},
		Skipped:   []Skipped{{Key: "judged/r/a/x.v.json", Reason: "does not decode"}},
		Files:     []File{{Path: TrainName, Bytes: 100, SHA256: strings.Repeat("ab", 32)}},
	}, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"kind":"codapipe.sft/v0"}`))
	f.Add([]byte(`{"kind":"codapipe.sft/v1","counts":{"records":"3"}}`))
	f.Add([]byte(`{"kind":"codapipe.sft/v1","judge_versions":{"v":{"prompt_sha256":"x","trajectories":1}}}`))
	dir := f.TempDir()
	path := filepath.Join(dir, ManifestName)
	f.Fuzz(func(t *testing.T, data []byte) {
		filefuzz.RoundTrip(t, path, data, func() (*Manifest, error) { return ReadManifest(dir) }, "sft: "+path+": ", func(m *Manifest) {
			if m.Kind != ManifestKind {
				t.Fatalf("accepted kind %q", m.Kind)
			}
		})
	})
}
