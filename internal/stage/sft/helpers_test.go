package sft

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// judgeCommand judges the simulated corpus.
var judgeCommand = judge.Command()

// corpusSpec is a small simulated rollout of four ChimeraX tasks (four
// samples each; three and three under -race) with a good planner and an
// accurate judge, so there are clean successes, judged by judge --sim
// --drain as the commands do.
var corpusSpec = func() pipetest.Spec {
	s := pipetest.Spec{
		Tasks: []string{"S01", "S02", "S03", "S04"}, Samples: 4, Group: 2, Seed: 5, Run: "sft-expert", Judge: &judgeCommand,
		Sim: `{"models": {"planner": {"default_skill": 0.9, "skill": {}},
			"judge": {"recall": 0.97, "false_positive_rate": 0.03, "low_res": {"recall": 1, "false_positive_rate": 0.03}, "vote_correlation": 0.9,
			"second": {"recall": 0.97, "false_positive_rate": 0.03, "vote_correlation": 0.9}}}}`,
	}
	if raceEnabled {
		s.Tasks, s.Samples = s.Tasks[:3], 3
	}
	return s
}()

func TestMain(m *testing.M) {
	code := m.Run()
	pipetest.Cleanup()
	os.Exit(code)
}

// sharedCorpus returns the test's own copy of the judged corpus (run once
// per test binary); its blob store (StoreDir) holds the screenshots, the
// prompt sets and the judge's archive.
func sharedCorpus(t testing.TB) *pipetest.Pipeline {
	t.Helper()
	p := pipetest.Shared(t, corpusSpec)
	p.RequireCleanSuccesses(t, 2, 2)
	return p
}

// smallCorpus is a judged corpus small enough for the tests that run
// under the race detector (make test runs TestAccept* without it): one
// task twice, with a clean success.
func smallCorpus(t testing.TB) *pipetest.Pipeline {
	t.Helper()
	s := corpusSpec
	s.Tasks, s.Samples, s.Run = []string{"S01"}, 2, "sft-small"
	p := pipetest.Shared(t, s)
	p.RequireCleanSuccesses(t, 1, 2)
	return p
}

// freshStore returns the blob store of another copy of the corpus, for a
// test that damages it.
func freshStore(t testing.TB) string {
	t.Helper()
	return pipetest.Shared(t, corpusSpec).StoreDir()
}

// archived reads every judged trajectory in the store's archive, with its
// key, straight from the bucket (not through the package).
func archived(t testing.TB, storeDir string) map[string]*traj.Judged {
	t.Helper()
	b, err := blob.OpenBucket(context.Background(), storeDir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	docs, _ := pipetest.Archived(t, b) // the damaged ones: a test damaged them
	return docs
}

// putArchived writes jd into the store's archive under its key and
// returns the key.
func putArchived(t testing.TB, storeDir string, jd *traj.Judged) string {
	t.Helper()
	body, err := traj.Marshal(jd)
	if err != nil {
		t.Fatal(err)
	}
	key := archive.Key(jd.Trajectory.Run, jd.Trajectory.Task.App, jd.Trajectory.ID, jd.Judgement.Judge.ID())
	putRaw(t, storeDir, key, body)
	return key
}

func putRaw(t testing.TB, storeDir, key string, body []byte) {
	t.Helper()
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, storeDir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, key, bytes.NewReader(body), int64(len(body)), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}

// cloneJudged deep-copies a judged trajectory.
func cloneJudged(t testing.TB, jd *traj.Judged) *traj.Judged {
	t.Helper()
	body, err := traj.Marshal(jd)
	if err != nil {
		t.Fatal(err)
	}
	out, err := traj.DecodeJudged(body)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cleanKeys returns the keys of the clean successes, sorted.
func cleanKeys(docs map[string]*traj.Judged) []string {
	var ks []string
	for k, jd := range docs {
		if jd.Judgement.Decision == traj.CleanSuccess {
			ks = append(ks, k)
		}
	}
	slices.Sort(ks)
	return ks
}

// buildCLI runs `sftpack build` on storeDir into out with extra flags and
// returns its stdout; it fails the test on a non-zero exit.
func buildCLI(t testing.TB, storeDir, out string, args ...string) string {
	t.Helper()
	stdout, stderr, code := runCLI(t, append([]string{"build", "--data", filepath.Join(filepath.Dir(out), "data"), "--store", storeDir, "--out", out}, args...)...)
	if code != 0 {
		t.Fatalf("sftpack build %v: exit %d\n%s", args, code, stderr)
	}
	return stdout
}

func runCLI(t testing.TB, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	if len(args) > 0 && args[0] == "build" {
		args = append(args, "--log-level", "warn")
	}
	code = service.MainContext(ctx, Command(), args, &out, &errb)
	return out.String(), errb.String(), code
}

// readJSONL reads a JSONL file as generic records.
func readJSONL(t testing.TB, path string) []map[string]json.RawMessage {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []map[string]json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var rec map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, rec)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// records reads both splits' JSONL files as jsonlRecords.
func records(t testing.TB, dir string) map[string][]jsonlRecord {
	t.Helper()
	out := map[string][]jsonlRecord{}
	for _, split := range []string{SplitTrain, SplitVal} {
		path := filepath.Join(dir, split+".jsonl")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			continue // an empty split has no file (TestEmptySplitHasNoFile)
		}
		for _, raw := range readJSONL(t, path) {
			body, _ := json.Marshal(raw)
			var r jsonlRecord
			dec := json.NewDecoder(bytes.NewReader(body))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&r); err != nil {
				t.Fatal(err)
			}
			out[split] = append(out[split], r)
		}
	}
	return out
}

func readManifest(t testing.TB, dir string) *Manifest {
	t.Helper()
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}
