package sft

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestAcceptBadInputIsSkipped: a judged trajectory that cannot become samples
// is skipped whole and listed in the manifest with the reason, and the
// build writes every other sample — for each kind of bad input.
func TestAcceptBadInputIsSkipped(t *testing.T) {
	c := sharedCorpus(t)
	docs := archived(t, c.StoreDir())
	clean := cleanKeys(docs)
	if len(clean) < 2 {
		t.Fatalf("%d clean successes: the test needs two", len(clean))
	}
	// The screenshots each trajectory shows, and how many trajectories
	// show each (screens repeat across trajectories of one task).
	uses := map[string]int{}
	for _, jd := range docs {
		seen := map[string]bool{}
		for _, s := range jd.Trajectory.Steps {
			if !seen[s.Screenshot.SHA256] {
				seen[s.Screenshot.SHA256] = true
				uses[s.Screenshot.SHA256]++
			}
		}
	}
	edit := func(f func(jd *traj.Judged)) func(t *testing.T, store, key string) {
		return func(t *testing.T, store, key string) {
			jd := cloneJudged(t, docs[key])
			f(jd)
			if got := putArchived(t, store, jd); got != key {
				t.Fatalf("the edit moved the record from %s to %s", key, got)
			}
		}
	}
	cases := []struct {
		name   string
		pick   func(key string) bool // which clean record to damage (first that fits)
		damage func(t *testing.T, store, key string)
		reason string
	}{
		{
			name: "missing screenshot",
			pick: func(key string) bool {
				steps := docs[key].Trajectory.Steps
				return uses[steps[len(steps)-1].Screenshot.SHA256] == 1
			},
			damage: func(t *testing.T, store, key string) {
				s, err := blob.Open(context.Background(), store, blob.Config{})
				if err != nil {
					t.Fatal(err)
				}
				steps := docs[key].Trajectory.Steps
				if err := s.Delete(context.Background(), steps[len(steps)-1].Screenshot.SHA256); err != nil {
					t.Fatal(err)
				}
			},
			reason: "is missing from the blob store",
		},
		{
			name: "record does not decode",
			damage: func(t *testing.T, store, key string) {
				putRaw(t, store, key, []byte(`{"schema_version": 4, "judgement": {`))
			},
			reason: "does not decode",
		},
		{
			name:   "record of a newer schema",
			damage: edit(func(jd *traj.Judged) { jd.SchemaVersion = traj.SchemaVersion + 1 }),
			reason: "does not decode",
		},
		{
			name: "executed action did not parse",
			damage: edit(func(jd *traj.Judged) {
				s := &jd.Trajectory.Steps[len(jd.Trajectory.Steps)-1]
				c := &s.Candidates[s.Executed]
				c.Action, c.ParseError, c.ParseErrorKind = nil, "no action in the output", traj.ParseSyntax
			}),
			reason: "the executed action did not parse (no action in the output)",
		},
		{
			name:   "no executed candidate",
			damage: edit(func(jd *traj.Judged) { jd.Trajectory.Steps[0].Executed, jd.Trajectory.Steps[0].Error = -1, "VM lost" }),
			reason: "step 0: no candidate was executed",
		},
		{
			name: "missing prompt set",
			damage: edit(func(jd *traj.Judged) {
				sum := sha256.Sum256([]byte("no such prompt set"))
				jd.Trajectory.Prompts = hex.EncodeToString(sum[:])
			}),
			reason: "prompt set",
		},
		{
			name:   "placeholder in the task",
			damage: edit(func(jd *traj.Judged) { jd.Trajectory.Task.Instruction += " (see <image>)" }),
			reason: "<image>",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			store := freshStore(t)
			key := ""
			for _, k := range clean {
				if tc.pick == nil || tc.pick(k) {
					key = k
					break
				}
			}
			if key == "" {
				t.Skip("no clean success fits this case in this corpus")
			}
			id := docs[key].Trajectory.ID
			tc.damage(t, store, key)

			out := filepath.Join(t.TempDir(), "sft")
			buildCLI(t, store, out)
			m := readManifest(t, out)
			i := slices.IndexFunc(m.Skipped, func(s Skipped) bool { return s.Key == key })
			if i < 0 {
				t.Fatalf("%s is not in the manifest's skipped list %+v", key, m.Skipped)
			}
			if s := m.Skipped[i]; !strings.Contains(s.Reason, tc.reason) || s.TrajectoryID != id {
				t.Errorf("skipped %+v; want trajectory %s and a reason with %q", s, id, tc.reason)
			}
			want := expectedSamples(t, store, archived(t, store))
			got := map[string]bool{}
			for _, rs := range records(t, out) {
				for _, r := range rs {
					got[r.ID] = true
					if r.TrajectoryID == id {
						t.Errorf("sample %s of the bad trajectory was written", r.ID)
					}
				}
			}
			if len(got) == 0 || len(got) != len(want) || m.Counts.Samples != len(want) {
				t.Errorf("%d samples written (manifest %d), want the other trajectories' %d", len(got), m.Counts.Samples, len(want))
			}
			for wid := range want {
				if !got[wid] {
					t.Errorf("sample %s of a good trajectory is missing", wid)
				}
			}
			checkFiles(t, out, m)
		})
	}

	t.Run("stray key", func(t *testing.T) {
		store := freshStore(t)
		putRaw(t, store, "judged/notes.json", []byte("{}"))
		out := filepath.Join(t.TempDir(), "sft")
		buildCLI(t, store, out)
		m := readManifest(t, out)
		if !slices.ContainsFunc(m.Skipped, func(s Skipped) bool { return s.Key == "judged/notes.json" }) {
			t.Errorf("the stray key is not listed: %+v", m.Skipped)
		}
		if m.Counts.Samples != len(expectedSamples(t, store, docs)) {
			t.Errorf("%d samples, want all of them", m.Counts.Samples)
		}
	})
}
