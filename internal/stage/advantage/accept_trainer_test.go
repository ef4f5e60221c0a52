package advantage

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/trainexport"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

var update = flag.Bool("update", false, "rewrite trainer/tests/testdata from the simulated corpus")

// trainerTestdata is the reference trainer's fixture: an advantage export
// --format jsonl of the simulated corpus, read by trainer/tests.
var trainerTestdata = filepath.Join("..", "..", "..", "trainer", "tests", "testdata", "export")

// trainerFixtureImages is how many images the fixture keeps (the first
// rows'): the trainer's tests read token ids, not pixels, and the fixture
// stays small.
const trainerFixtureImages = 2

// TestAcceptTrainerFixture checks that the reference trainer's fixture is
// what advantage export --format jsonl writes for the simulated corpus
// today (the rows' ids, token ids, behaviour log-probs, advantages, loss
// weights, in any order); with -update it rewrites it:
//
//	go test -trimpath -run TestAcceptTrainerFixture ./internal/stage/advantage -update
//
// The fixture keeps only the first trainerFixtureImages images; the
// manifest lists the files kept.
func TestAcceptTrainerFixture(t *testing.T) {
	dir, _ := corpus(t)
	out := filepath.Join(t.TempDir(), "shards")
	advantageCLI(t, dir, "--out", out)
	bucket, err := blob.OpenBucket(context.Background(), out, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	set := filepath.Join(out, filepath.FromSlash(onlyManifest(t, bucket).Set))
	exp := filepath.Join(t.TempDir(), "export")
	em := exportCLI(t, dir, set, exp, trainexport.FormatJSONL)
	data := filepath.Join(exp, em.DataFiles()[0].Path)
	if !*update {
		got, want := fixtureKeys(t, data), fixtureKeys(t, filepath.Join(trainerTestdata, "candidates.jsonl"))
		if !slices.Equal(got, want) {
			t.Fatalf("the trainer's fixture is not what advantage export writes today (%d rows, the fixture %d): rewrite it with\n"+
				"  go test -trimpath -run TestAcceptTrainerFixture ./internal/stage/advantage -update", len(got), len(want))
		}
		return
	}
	if err := os.RemoveAll(trainerTestdata); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(trainerTestdata, trainexport.ImageDir), 0o755); err != nil {
		t.Fatal(err)
	}
	kept := em.DataFiles()
	for _, f := range em.Files[len(kept):][:trainerFixtureImages] {
		kept = append(kept, f)
	}
	for _, f := range kept {
		b, err := os.ReadFile(filepath.Join(exp, f.Path))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(trainerTestdata, f.Path), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	em.Files = kept
	em.Created = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	body, err := json.MarshalIndent(em, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(trainerTestdata, trainexport.ManifestName), append(body, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s: %d rows, %d images kept", trainerTestdata, em.Rows, trainerFixtureImages)
}

// fixtureKeys are a jsonl export's rows as what the trainer's tests use,
// sorted: ids, token ids, behaviour log-probs, advantage, loss weight.
func fixtureKeys(t *testing.T, name string) []string {
	t.Helper()
	body, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l := range strings.SplitSeq(strings.TrimSpace(string(body)), "\n") {
		var r trainexport.CandidateRow
		if err := json.NewDecoder(bytes.NewReader([]byte(l))).Decode(&r); err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprint(r.TrajectoryID, r.Step, r.Candidate, r.GroupID, r.CompletionTokenIDs, r.LogProbs,
			r.Advantage, r.LossWeight, r.ZeroVariance, r.FinishReason))
	}
	slices.Sort(out)
	return out
}
