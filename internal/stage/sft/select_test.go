package sft

import (
	"context"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/export"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// trajectoriesOf returns the trajectory ids the build wrote samples of.
func trajectoriesOf(t *testing.T, dir string) map[string]bool {
	t.Helper()
	out := map[string]bool{}
	for _, rs := range records(t, dir) {
		for _, r := range rs {
			out[r.TrajectoryID] = true
		}
	}
	return out
}

// TestAcceptSelection: judge versions (one per set: by default the one of
// the most trajectories; --judge-version),
// de-duplication by executed actions, --require-eval, --max-per-task,
// --runs/--apps globs and --since/--until, on a copy of the corpus with
// fabricated records.
func TestAcceptSelection(t *testing.T) {
	c := sharedCorpus(t)
	docs := archived(t, c.StoreDir())
	// x, y and z repeat no other clean success's executed actions (a
	// natural duplicate would be de-duplicated away whatever the test does).
	seen := map[string]int{}
	for _, k := range cleanKeys(docs) {
		seen[docs[k].Trajectory.Task.ID+"\x00"+actionSequence(&docs[k].Trajectory)]++
	}
	var clean []string
	for _, k := range cleanKeys(docs) {
		if seen[docs[k].Trajectory.Task.ID+"\x00"+actionSequence(&docs[k].Trajectory)] == 1 {
			clean = append(clean, k)
		}
	}
	if len(clean) < 3 {
		t.Fatalf("%d clean successes with their own actions: the test needs three", len(clean))
	}
	store := freshStore(t)
	x, y, z := docs[clean[0]], docs[clean[1]], docs[clean[2]]

	// A duplicate of x: another trajectory of its task with the same
	// executed actions (its id is newer, so x is the one kept).
	dup := cloneJudged(t, x)
	dup.Trajectory.ID = traj.NewID()
	dup.Judgement.TrajectoryID = dup.Trajectory.ID
	putArchived(t, store, dup)

	// y judged again later by another judge version, as a failure: the
	// set keeps the version of the most trajectories, under which y is a
	// clean success.
	rejudged := cloneJudged(t, y)
	rejudged.Judgement.Judge.Policy = "another-policy"
	rejudged.Judgement.JudgedAt = y.Judgement.JudgedAt.Add(time.Hour)
	rejudged.Judgement.Verdict = &traj.Verdict{Correctness: false, Redundant: []int{}}
	rejudged.Judgement.Decision = traj.Failure
	putArchived(t, store, rejudged)
	oldVer, newVer := y.Judgement.Judge.ID(), rejudged.Judgement.Judge.ID()

	// z's task evaluator ran and failed.
	zf := cloneJudged(t, z)
	zf.Trajectory.Eval = &traj.EvalResult{Passed: false, Checks: []traj.CheckResult{{Type: "states", Passed: false}}}
	putArchived(t, store, zf)

	// The clean successes (by the set's judge version) whose evaluator
	// ran and failed, counted by the test.
	evalFailed := map[string]bool{zf.Trajectory.ID: true}
	for _, jd := range docs {
		e := jd.Trajectory.Eval
		if jd.Judgement.Decision == traj.CleanSuccess && e != nil && !e.Passed && len(e.Unsupported) == 0 && e.Error == "" {
			evalFailed[jd.Trajectory.ID] = true
		}
	}
	all := len(expectedSamples(t, store, archived(t, store)))
	// Trajectories of the corpus that repeat another's executed actions.
	natural := 0
	seqs := map[string]bool{}
	for _, jd := range docs {
		if jd.Judgement.Decision != traj.CleanSuccess {
			continue
		}
		k := jd.Trajectory.Task.ID + "\x00" + actionSequence(&jd.Trajectory)
		if seqs[k] {
			natural++
		}
		seqs[k] = true
	}

	build := func(t *testing.T, args ...string) (*Manifest, map[string]bool) {
		t.Helper()
		out := filepath.Join(t.TempDir(), "sft")
		buildCLI(t, store, out, args...)
		return readManifest(t, out), trajectoriesOf(t, out)
	}

	t.Run("defaults", func(t *testing.T) {
		m, got := build(t)
		if !got[x.Trajectory.ID] || got[dup.Trajectory.ID] || m.Counts.Duplicates != 1+natural {
			t.Errorf("de-duplication: x kept %v, its duplicate kept %v, %d duplicates counted, want %d", got[x.Trajectory.ID], got[dup.Trajectory.ID], m.Counts.Duplicates, 1+natural)
		}
		if !got[y.Trajectory.ID] {
			t.Error("y was left out although the set's judge version judged it a clean success")
		}
		if m.JudgeVersion != oldVer || len(m.OtherJudgeVersions) != 1 || m.OtherJudgeVersions[newVer] != 1 {
			t.Errorf("judge version %q, other versions %v; want %s and {%s: 1}", m.JudgeVersion, m.OtherJudgeVersions, oldVer, newVer)
		}
		if !got[z.Trajectory.ID] {
			t.Error("z was left out without --require-eval")
		}
		if m.Counts.Samples != all {
			t.Errorf("%d samples, the test expects %d", m.Counts.Samples, all)
		}
		if jv := m.JudgeVersions[oldVer]; jv.Trajectories != m.Counts.Kept || jv.PromptSHA256 == "" {
			t.Errorf("judge versions %+v: want every kept trajectory under %s", m.JudgeVersions, oldVer)
		}
	})
	t.Run("judge version", func(t *testing.T) {
		m, got := build(t, "--judge-version", oldVer)
		if !got[y.Trajectory.ID] {
			t.Error("y was left out under its clean judgement's version")
		}
		m, got = build(t, "--judge-version", newVer)
		if len(got) != 0 || m.Counts.NoJudgement != m.Counts.Trajectories-1 || m.Counts.Decisions[string(traj.Failure)] != 1 {
			t.Errorf("under the new version only y is judged, a failure: kept %v, counts %+v", got, m.Counts)
		}
	})
	t.Run("require eval", func(t *testing.T) {
		m, got := build(t, "--require-eval")
		if got[z.Trajectory.ID] || m.Counts.EvalFailed != len(evalFailed) {
			t.Errorf("z kept %v; %d evaluator failures counted, want %d", got[z.Trajectory.ID], m.Counts.EvalFailed, len(evalFailed))
		}
	})
	t.Run("max per task", func(t *testing.T) {
		m, got := build(t, "--max-per-task", "1")
		perTask := map[string][]*traj.Judged{}
		for _, jd := range archived(t, store) {
			if got[jd.Trajectory.ID] {
				perTask[jd.Trajectory.Task.ID] = append(perTask[jd.Trajectory.Task.ID], jd)
			}
		}
		for task, tc := range m.Tasks {
			if tc.Trajectories != 1 || len(perTask[task]) != 1 {
				t.Errorf("task %s keeps %d trajectories", task, tc.Trajectories)
			}
		}
		if m.Counts.OverLimit == 0 {
			t.Error("nothing over the limit")
		}
		// The one kept is among the shortest of the task's candidates.
		for task, kept := range perTask {
			for _, jd := range archived(t, store) {
				if jd.Trajectory.Task.ID == task && jd.Judgement.Decision == traj.CleanSuccess && jd.Trajectory.ID != dup.Trajectory.ID &&
					jd.Judgement.Judge.ID() == oldVer && len(jd.Trajectory.Steps) < len(kept[0].Trajectory.Steps) {
					t.Errorf("task %s kept a %d-step trajectory over a %d-step one", task, len(kept[0].Trajectory.Steps), len(jd.Trajectory.Steps))
				}
			}
		}
	})
	t.Run("runs and apps", func(t *testing.T) {
		for _, tc := range []struct {
			args []string
			all  bool
		}{
			{[]string{"--runs", "sft-*"}, true},
			{[]string{"--runs", "other,sft-expert"}, true},
			{[]string{"--runs", "nightly-*"}, false},
			{[]string{"--apps", "ChimeraX"}, true},
			{[]string{"--apps", "Celestia", "--apps", "KAlgebra"}, false},
		} {
			m, _ := build(t, tc.args...)
			if (m.Counts.Samples == all) != tc.all || (!tc.all && m.Counts.Records != 0) {
				t.Errorf("%v: %d records, %d samples", tc.args, m.Counts.Records, m.Counts.Samples)
			}
		}
	})
	t.Run("time range", func(t *testing.T) {
		var first, last time.Time
		for _, jd := range docs {
			s := jd.Trajectory.StartedAt
			if first.IsZero() || s.Before(first) {
				first = s
			}
			if s.After(last) {
				last = s
			}
		}
		m, _ := build(t, "--since", last.Add(time.Second).Format(time.RFC3339Nano))
		if m.Counts.Samples != 0 || m.Counts.OutOfRange != m.Counts.Trajectories {
			t.Errorf("--since after the last start: %+v", m.Counts)
		}
		m, _ = build(t, "--since", first.Format(time.RFC3339Nano), "--until", last.Add(time.Second).Format(time.RFC3339Nano))
		if m.Counts.Samples != all || m.Counts.OutOfRange != 0 {
			t.Errorf("--since/--until around every start: %+v", m.Counts)
		}
		m, _ = build(t, "--until", "2000-01-01")
		if m.Counts.Samples != 0 {
			t.Errorf("--until 2000-01-01: %+v", m.Counts)
		}
	})
	t.Run("split by task", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "sft")
		buildCLI(t, store, out, "--val-fraction", "0.5", "--seed", "7")
		m := readManifest(t, out)
		for task, tc := range m.Tasks {
			if tc.Split != SplitOf(task, 7, 0.5) {
				t.Errorf("task %s in %s, SplitOf says %s", task, tc.Split, SplitOf(task, 7, 0.5))
			}
		}
		in := map[string]map[string]bool{}
		for split, rs := range records(t, out) {
			for _, r := range rs {
				if in[r.Task] == nil {
					in[r.Task] = map[string]bool{}
				}
				in[r.Task][split] = true
			}
		}
		for task, splits := range in {
			if len(splits) != 1 {
				t.Errorf("task %s has samples in %v", task, splits)
			}
		}
	})
}

// TestSplitOf: whole tasks, deterministic, about the fraction asked for,
// 0 and 1 at the ends, and a task's split does not depend on the others.
func TestSplitOf(t *testing.T) {
	for _, f := range []float64{0, 0.05, 0.2, 0.5, 1} {
		val := 0
		const n = 20000
		for i := range n {
			task := fmt.Sprintf("App/T-%05d", i)
			s := SplitOf(task, 3, f)
			if s != SplitOf(task, 3, f) {
				t.Fatal("not deterministic")
			}
			if s == SplitVal {
				val++
			}
		}
		got := float64(val) / n
		if math.Abs(got-f) > 0.01 || (f == 0 && val != 0) || (f == 1 && val != n) {
			t.Errorf("fraction %v: %v of the tasks in val", f, got)
		}
	}
	if SplitOf("A/x", 1, 0.5) == SplitOf("A/x", 2, 0.5) && SplitOf("A/y", 1, 0.5) == SplitOf("A/y", 2, 0.5) &&
		SplitOf("A/z", 1, 0.5) == SplitOf("A/z", 2, 0.5) && SplitOf("A/w", 1, 0.5) == SplitOf("A/w", 2, 0.5) {
		t.Error("the seed changes nothing")
	}
}

// TestSetJudgeVersion: the version of the most trajectories; on a tie the
// one that judged first, then the smaller id; unreadable records do not
// count.
func TestSetJudgeVersion(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rec := func(id, ver string, at time.Time, errs string) record {
		return record{Name: archive.Name{Key: id + "." + ver, ID: id, Version: ver}, JudgedAt: at, Err: errs}
	}
	later := t0.Add(time.Hour)
	for _, c := range []struct {
		name string
		recs []record
		want string
	}{
		{"none", nil, ""},
		{"most trajectories", []record{rec("A", "b", t0, ""), rec("A", "a", later, ""), rec("B", "a", later, "")}, "a"},
		{"tie: first judged", []record{rec("A", "a", later, ""), rec("A", "b", t0, "")}, "b"},
		{"tie: smaller id", []record{rec("A", "b", t0, ""), rec("B", "a", t0, "")}, "a"},
		{"unreadable left out", []record{rec("A", "a", t0, ""), rec("A", "b", time.Time{}, "does not decode"), rec("B", "b", time.Time{}, "does not decode")}, "a"},
		{"a trajectory counts once", []record{rec("A", "a", t0, ""), rec("A", "a", later, ""), rec("B", "b", later, ""), rec("C", "b", later, "")}, "b"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := setJudgeVersion(c.recs); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}

// TestChooseJudgement: the version asked for, else the latest (the
// greater version id on a tie); an unreadable record among the candidates
// leaves the trajectory without a judgement.
func TestChooseJudgement(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	rec := func(ver string, at time.Time, errs string) record {
		return record{Name: archive.Name{Key: "k-" + ver, ID: "T", Version: ver}, JudgedAt: at, Err: errs}
	}
	cases := []struct {
		name string
		recs []record
		want string
		ver  string // chosen version, "" for none
	}{
		{"one", []record{rec("a", t0, "")}, "", "a"},
		{"latest", []record{rec("a", t0.Add(time.Hour), ""), rec("b", t0, "")}, "", "a"},
		{"tie: greater id", []record{rec("a", t0, ""), rec("b", t0, "")}, "", "b"},
		{"asked for", []record{rec("a", t0.Add(time.Hour), ""), rec("b", t0, "")}, "b", "b"},
		{"asked for, absent", []record{rec("a", t0, "")}, "c", ""},
		{"unreadable candidate", []record{rec("a", t0, ""), rec("b", time.Time{}, "does not decode")}, "", ""},
		{"unreadable other version", []record{rec("a", t0, ""), rec("b", time.Time{}, "does not decode")}, "a", "a"},
		{"unreadable asked for", []record{rec("a", t0, ""), rec("b", time.Time{}, "does not decode")}, "b", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, why := chooseJudgement(c.recs, c.want)
			switch {
			case c.ver == "" && r != nil:
				t.Errorf("chose %s", r.Version)
			case c.ver != "" && (r == nil || r.Version != c.ver):
				t.Errorf("chose %+v (%s), want %s", r, why, c.ver)
			case r == nil && why == "":
				t.Error("no reason")
			}
		})
	}
}

// TestCommandErrors: bad flags and arguments are usage errors (exit 2)
// that leave the output alone.
func TestCommandErrors(t *testing.T) {
	foreign := t.TempDir()
	if err := os.WriteFile(filepath.Join(foreign, "thesis.tex"), []byte("mine"), 0o644); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(t.TempDir(), "blobs")
	data := t.TempDir()
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{nil, "subcommand"},
		{[]string{"build", "--data", data, "--store", store}, "--out"},
		{[]string{"build", "--data", data, "--store", store, "--out", t.TempDir() + "/x", "--since", "yesterday"}, "--since"},
		{[]string{"build", "--data", data, "--store", store, "--out", t.TempDir() + "/x", "--since", "2026-03-02", "--until", "2026-03-01"}, "not before"},
		{[]string{"build", "--data", data, "--store", store, "--out", t.TempDir() + "/x", "--val-fraction", "1.5"}, "--val-fraction"},
		{[]string{"build", "--data", data, "--store", store, "--out", t.TempDir() + "/x", "--runs", "[a"}, "pattern"},
		{[]string{"build", "--data", data, "--store", store, "--out", foreign}, "not an sftpack dataset"},
		{[]string{"build", "--data", data, "--store", store, "--out", "ftp://host/x"}, "--out"},
		{[]string{"export", t.TempDir(), "s3://bucket/x"}, "not an sftpack dataset"},
		{[]string{"export", t.TempDir()}, "want DIR"},
	} {
		_, stderr, code := runCLI(t, tc.args...)
		if code != 2 || !strings.Contains(stderr, tc.msg) {
			t.Errorf("%v: exit %d, %q; want 2 and %q", tc.args, code, stderr, tc.msg)
		}
	}
	if b, err := os.ReadFile(filepath.Join(foreign, "thesis.tex")); err != nil || string(b) != "mine" {
		t.Error("a refused --out was changed")
	}
}

// TestEmptyArchive: no judged trajectories is an empty dataset, not an
// error: no split has samples, so there is no JSONL or Parquet file, only
// an empty dataset_info.json and the README saying so.
func TestEmptyArchive(t *testing.T) {
	out := filepath.Join(t.TempDir(), "sft")
	buildCLI(t, filepath.Join(t.TempDir(), "blobs"), out)
	m := readManifest(t, out)
	var paths []string
	for _, f := range m.Files {
		paths = append(paths, f.Path)
	}
	if m.Counts.Samples != 0 || len(m.Splits) != 0 || !slices.Equal(paths, []string{ReadmeName, DatasetInfoName}) {
		t.Errorf("counts %+v, splits %+v, files %v", m.Counts, m.Splits, paths)
	}
	checkFiles(t, out, m)
}

// TestBuildToBucket: --out s3://… builds under the data directory and
// exports to the bucket (a real MinIO): every file the manifest lists is
// there with its SHA-256, the manifest too, and the staging folder is
// gone; sftpack export sends a local build the same way.
func TestBuildToBucket(t *testing.T) {
	c := smallCorpus(t) // small: this test runs under the race detector
	srv := miniotest.Start(t)
	srv.Setenv(t)
	data := t.TempDir()
	stdout, stderr, code := runCLI(t, "build", "--data", data, "--store", c.StoreDir(), "--out", srv.URL("datasets/sft"))
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, stdout, stderr)
	}
	local := filepath.Join(t.TempDir(), "sft")
	buildCLI(t, c.StoreDir(), local)
	m := readManifest(t, local)
	ctx := context.Background()
	check := func(prefix string) {
		b, err := blob.OpenBucket(ctx, srv.URL(prefix), srv.Config())
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range append(slices.Clone(m.Files), File{Path: ManifestName}) {
			info, err := b.Stat(ctx, f.Path)
			if err != nil {
				t.Errorf("%s/%s: %v", prefix, f.Path, err)
				continue
			}
			if f.SHA256 != "" && (info.Size != f.Bytes || info.SHA256 != f.SHA256) {
				t.Errorf("%s/%s: %d bytes, SHA-256 %s; want %d, %s", prefix, f.Path, info.Size, info.SHA256, f.Bytes, f.SHA256)
			}
		}
	}
	check("datasets/sft")
	if ents, _ := os.ReadDir(filepath.Join(data, "sftpack")); len(ents) != 0 {
		t.Errorf("the staging folder is left behind: %v", ents)
	}
	if _, stderr, code := runCLI(t, "export", local, srv.URL("exported")); code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	check("exported")
}

// Acceptance 4 on a real build: an sftpack dataset is exported to MinIO
// and the export is cancelled after a few uploads; then `sftpack export`
// runs again. The interrupted export leaves no manifest; the re-run sends
// exactly the objects that were missing (counted), every object's SHA-256
// matches the manifest, and manifest.json is written after every other
// object.
func TestAcceptExportInterruptedBuildResumes(t *testing.T) {
	c := sharedCorpus(t)
	srv := miniotest.Start(t)
	local := filepath.Join(t.TempDir(), "sft")
	buildCLI(t, c.StoreDir(), local, "--val-fraction", "0.3")
	m := readManifest(t, local)
	if len(m.Files) < 6 {
		t.Fatalf("the build has %d files; the test needs a few more", len(m.Files))
	}
	ctx := context.Background()
	dst, err := blob.OpenBucket(ctx, srv.URL("datasets/resume"), export.BucketConfig(srv.Config()))
	if err != nil {
		t.Fatal(err)
	}
	// Interrupt: cancel once three objects are complete (one upload at a
	// time, so exactly three are).
	const before = 3
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	_, err = export.Dir(cctx, local, dst, "", export.Options{Parallel: 1, Progress: func(p export.Progress) {
		if p.Uploaded >= before {
			cancel()
		}
	}})
	if err == nil {
		t.Fatal("the interrupted export returned no error")
	}
	if _, err := dst.Stat(ctx, ManifestName); !errors.Is(err, blob.ErrNotFound) {
		t.Fatalf("after the interrupted export the manifest: %v, want not found", err)
	}
	present := 0
	for _, f := range m.Files {
		if info, err := dst.Stat(ctx, f.Path); err == nil && info.SHA256 == f.SHA256 {
			present++
		}
	}
	if present < before || present == len(m.Files) {
		t.Fatalf("%d of %d objects after the interruption, want at least %d and not all", present, len(m.Files), before)
	}
	// Resume with the command: only the missing objects are sent.
	srv.Setenv(t)
	_, stderr, code := runCLI(t, "export", local, srv.URL("datasets/resume"))
	if code != 0 {
		t.Fatalf("export: exit %d\n%s", code, stderr)
	}
	st, err := export.Dir(ctx, local, dst, "", export.Options{})
	if err != nil || st.Uploaded != 0 || st.ManifestUploaded {
		t.Errorf("a third export: %v, %+v; want nothing sent", err, st)
	}
	var lastOther time.Time
	for _, f := range m.Files {
		info, err := dst.Stat(ctx, f.Path)
		if err != nil || info.Size != f.Bytes || info.SHA256 != f.SHA256 {
			t.Errorf("%s: %+v %v; want %d bytes, SHA-256 %s", f.Path, info, err, f.Bytes, f.SHA256)
			continue
		}
		if info.ModTime.After(lastOther) {
			lastOther = info.ModTime
		}
	}
	mi, err := dst.Stat(ctx, ManifestName)
	if err != nil {
		t.Fatal(err)
	}
	if mi.ModTime.Before(lastOther) {
		t.Errorf("manifest.json written at %v, before another object (%v)", mi.ModTime, lastOther)
	}
	want := len(m.Files) - present
	if !strings.Contains(stderr, fmt.Sprintf(`"files":%d,"uploaded":%d,"skipped":%d,`, len(m.Files), want, present)) {
		t.Errorf("the resumed export did not report %d uploads and %d skipped of %d files:\n%s", want, present, len(m.Files), stderr)
	}
}
