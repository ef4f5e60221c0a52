package sft

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/archive"
	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/judge"
	"github.com/codapipe/codapipe/internal/rollout"
	"github.com/codapipe/codapipe/internal/sched"
	"github.com/codapipe/codapipe/internal/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
)

func quietLog() *slog.Logger { return slog.New(slog.DiscardHandler) }

// corpus is a simulated rollout judged by the judge command: its data
// directory, whose blobs/ holds the screenshots, the prompt sets and the
// judge's archive.
type corpus struct {
	dir string
}

func (c *corpus) store() string { return filepath.Join(c.dir, "blobs") }

var (
	corpusOnce sync.Once
	shared     *corpus
	corpusErr  string
	tempDirs   []string
)

func TestMain(m *testing.M) {
	code := m.Run()
	for _, d := range tempDirs {
		os.RemoveAll(d)
	}
	os.Exit(code)
}

// sharedCorpus runs, once per test binary, a small simulated rollout of
// four ChimeraX tasks (four samples each; three and three under -race; a
// good planner and an accurate judge so there are clean successes) and judges it with judge --sim --drain, as the
// commands do. Tests must not change it: copy it (copyCorpus) first.
func sharedCorpus(t testing.TB) *corpus {
	t.Helper()
	corpusOnce.Do(func() {
		dir, err := os.MkdirTemp("", "codapipe-sft-corpus-")
		if err != nil {
			corpusErr = err.Error()
			return
		}
		tempDirs = append(tempDirs, dir)
		tasks, samples := []string{"S01", "S02", "S03", "S04"}, 4
		if raceEnabled {
			tasks, samples = tasks[:3], 3
		}
		if msg := runPipeline(dir, tasks, samples); msg != "" {
			corpusErr = msg
			return
		}
		shared = &corpus{dir: dir}
	})
	if shared == nil {
		t.Fatalf("simulated corpus: %s", corpusErr)
	}
	return shared
}

// runPipeline is rollout --sim then judge --sim --drain on data
// directory dir; it returns "" or what failed.
func runPipeline(dir string, tasks []string, samples int) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	tdir := filepath.Join(dir, "tasks")
	names := make([]string, len(tasks))
	for i, id := range tasks {
		names[i] = "ChimeraX/" + id
	}
	if err := simtasks.Write(tdir, names...); err != nil {
		return err.Error()
	}
	simCfg := filepath.Join(dir, "sim.json")
	if err := os.WriteFile(simCfg, []byte(`{"models": {"planner": {"default_skill": 0.9, "skill": {}},
		"judge": {"recall": 0.97, "false_positive_rate": 0.03, "low_res": {"recall": 0.97, "false_positive_rate": 0.03}, "vote_correlation": 0.9}}}`), 0o644); err != nil {
		return err.Error()
	}
	seed := int64(5)
	common := &service.Common{DataDir: dir}
	env := service.NewEnv("rollout", common, quietLog(), nil, nil)
	_, err := rollout.Execute(ctx, env, rollout.Options{
		App: "ChimeraX", Tasks: tdir, Group: 2, Samples: samples, Run: "sft-expert", VMs: 4, Sim: true, Seed: &seed,
		TimeScale: 0.0005, Schedule: sched.Dynamic, SimConfig: simCfg,
	})
	env.Close()
	if err != nil {
		return "rollout: " + err.Error()
	}
	var out, errb bytes.Buffer
	if code := service.MainContext(ctx, judge.Command(), []string{"--data", dir, "--log-level", "warn", "--sim", "--sim-config", simCfg, "--drain", "--max-frames", "4"}, &out, &errb); code != 0 {
		return "judge: " + errb.String()
	}
	return ""
}

// copyCorpus copies the corpus's blob store into a new folder and returns
// its path.
func copyCorpus(t testing.TB, c *corpus) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "blobs")
	err := filepath.WalkDir(c.store(), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(c.store(), p)
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if strings.HasPrefix(d.Name(), ".tmp") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// archived reads every judged trajectory in the store's archive, with its
// key, straight from the bucket (not through the package).
func archived(t testing.TB, storeDir string) map[string]*traj.Judged {
	t.Helper()
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, storeDir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*traj.Judged{}
	for info, err := range b.List(ctx, archive.Prefix) {
		if err != nil {
			t.Fatal(err)
		}
		rc, _, err := b.Get(ctx, info.Key)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		jd, err := traj.DecodeJudged(body)
		if err != nil {
			continue // a test damaged it
		}
		out[info.Key] = jd
	}
	return out
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
		for _, raw := range readJSONL(t, filepath.Join(dir, split+".jsonl")) {
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
