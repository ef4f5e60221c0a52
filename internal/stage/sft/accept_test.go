package sft

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	openai "github.com/sashabaranov/go-openai"
)

// expSample is a sample as the test derives it from the judged
// documents, without the package.
type expSample struct {
	jd      *traj.Judged
	step    int
	images  []string // SHA-256s
	target  string
	history []string
}

// expectedSamples computes, independently of the package, the samples a
// build with default flags gives: per trajectory the judgement of the
// set's one judge version (the version of the most trajectories), clean successes only, every
// step executed with a usable action, the prompt set and every
// screenshot in the store; per task one trajectory per executed action
// sequence (the smallest id); one sample per step.
func expectedSamples(t *testing.T, storeDir string, docs map[string]*traj.Judged) map[string]expSample {
	t.Helper()
	// The set's one judge version: of the most trajectories, then the
	// first judged, then the smaller id.
	ids, first := map[string]map[string]bool{}, map[string]time.Time{}
	for _, jd := range docs {
		v := jd.Judgement.Judge.ID()
		if ids[v] == nil {
			ids[v], first[v] = map[string]bool{}, jd.Judgement.JudgedAt
		}
		ids[v][jd.Trajectory.ID] = true
		if jd.Judgement.JudgedAt.Before(first[v]) {
			first[v] = jd.Judgement.JudgedAt
		}
	}
	ver := ""
	for v := range ids {
		if ver == "" || len(ids[v]) > len(ids[ver]) || len(ids[v]) == len(ids[ver]) && (first[v].Before(first[ver]) || first[v].Equal(first[ver]) && v < ver) {
			ver = v
		}
	}
	latest := map[string]*traj.Judged{}
	for _, jd := range docs {
		if jd.Judgement.Judge.ID() == ver {
			latest[jd.Trajectory.ID] = jd
		}
	}
	inStore := func(sha string) bool {
		_, err := os.Stat(filepath.Join(storeDir, filepath.FromSlash(blob.Key(sha))))
		return err == nil
	}
	keepers := map[string]*traj.Judged{} // task + sequence → smallest id
	for _, jd := range latest {
		tr := &jd.Trajectory
		if jd.Judgement.Decision != traj.CleanSuccess || len(tr.Steps) == 0 || !inStore(tr.Prompts) {
			continue
		}
		var seq []string
		ok := true
		for i := range tr.Steps {
			a := grpo.ExecutedAction(&tr.Steps[i])
			if a == nil || !inStore(tr.Steps[i].Screenshot.SHA256) || strings.Contains(tr.Task.Instruction, "<image>") {
				ok = false
				break
			}
			seq = append(seq, uitars.Format(*a, uitars.DefaultOptions()))
		}
		if !ok {
			continue
		}
		k := tr.Task.ID + "\x00" + strings.Join(seq, "\n")
		if cur := keepers[k]; cur == nil || tr.ID < cur.Trajectory.ID {
			keepers[k] = jd
		}
	}
	out := map[string]expSample{}
	for _, jd := range keepers {
		tr := &jd.Trajectory
		var history []string
		for i := range tr.Steps {
			s := &tr.Steps[i]
			e := expSample{jd: jd, step: i, target: s.Candidates[s.Executed].Plan, history: slices.Clone(history)}
			if i > 0 {
				e.images = append(e.images, tr.Steps[i-1].Screenshot.SHA256)
			}
			e.images = append(e.images, s.Screenshot.SHA256)
			out[fmt.Sprintf("%s/%d", tr.ID, i)] = e
			history = append(history, s.Candidates[s.Executed].Plan)
		}
	}
	return out
}

// wantUser is the system and user turns as docs/sft.md describes the
// mapping: the renderer's two messages, the user turn's parts in order,
// each image an <image>; its text shows every earlier plan.
func wantUser(t *testing.T, storeDir string, e expSample) (system, user string) {
	t.Helper()
	store, err := blob.Open(context.Background(), storeDir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := prompt.Fetch(context.Background(), store, e.jd.Trajectory.Prompts)
	if err != nil {
		t.Fatal(err)
	}
	msgs, err := p.PlannerMessagesAt(&e.jd.Trajectory, e.step, prompt.RefURL)
	if err != nil {
		t.Fatal(err)
	}
	// The renderer's layout (prompt.LayoutUserHistory): system, then one
	// user turn whose text shows every earlier plan; the sample maps it
	// part for part.
	if len(msgs) != 2 || msgs[0].Role != "system" || msgs[1].Role != "user" {
		t.Fatalf("step %d: the renderer gave %d messages, want system and user", e.step, len(msgs))
	}
	var b strings.Builder
	for _, part := range msgs[1].MultiContent {
		if part.Type == openai.ChatMessagePartTypeText {
			b.WriteString(part.Text)
		} else {
			b.WriteString("<image>")
		}
	}
	for i, h := range e.history {
		if !strings.Contains(b.String(), h) {
			t.Fatalf("step %d: the user turn does not show the plan of step %d, %q", e.step, i, h)
		}
	}
	return msgs[0].Content, b.String()
}

// Acceptance 1: after a simulated rollout and judge --drain, sftpack
// build writes the JSONL, the Parquet and the manifest, and their counts
// agree with each other and with the sample set the test derives from the
// judged documents; every sample is the expected one.
func TestAcceptBuildAfterJudge(t *testing.T) {
	c := sharedCorpus(t)
	docs := archived(t, c.StoreDir())
	want := expectedSamples(t, c.StoreDir(), docs)
	if len(want) < 5 {
		t.Fatalf("the simulated run gave %d samples: the test needs clean successes", len(want))
	}
	out := filepath.Join(t.TempDir(), "sft")
	stdout := buildCLI(t, c.StoreDir(), out, "--val-fraction", "0.5")
	t.Logf("sftpack build:\n%s", stdout)
	if !strings.Contains(stdout, "task") || !strings.Contains(stdout, "ChimeraX") {
		t.Errorf("the build did not print the counts per app and task:\n%s", stdout)
	}
	m := readManifest(t, out)
	recs := records(t, out)

	// JSONL against the expected samples.
	got := map[string]jsonlRecord{}
	for split, rs := range recs {
		for _, r := range rs {
			if _, dup := got[r.ID]; dup {
				t.Errorf("sample %s written twice", r.ID)
			}
			got[r.ID] = r
			if m.Tasks[r.Task].Split != split {
				t.Errorf("sample %s of task %s is in %s, the manifest puts the task in %q", r.ID, r.Task, split, m.Tasks[r.Task].Split)
			}
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d samples written, want %d", len(got), len(want))
	}
	for id, e := range want {
		r, ok := got[id]
		if !ok {
			t.Errorf("sample %s missing", id)
			continue
		}
		tr := &e.jd.Trajectory
		if r.TrajectoryID != tr.ID || r.Step != e.step || r.Task != tr.Task.ID || r.App != tr.Task.App || r.Run != tr.Run || r.JudgeVersion != e.jd.Judgement.Judge.ID() {
			t.Errorf("sample %s: ids %+v", id, r)
		}
		var paths []string
		for _, sha := range e.images {
			paths = append(paths, "images/"+sha+".png")
		}
		if !slices.Equal(r.Images, paths) {
			t.Errorf("sample %s: images %v, want %v", id, r.Images, paths)
		}
		sys, user := wantUser(t, c.StoreDir(), e)
		wantMsgs := []Message{{"system", sys}, {"user", user}, {"assistant", e.target}}
		if !slices.Equal(r.Messages, wantMsgs) {
			t.Errorf("sample %s: messages\n%q\nwant\n%q", id, r.Messages, wantMsgs)
		}
	}

	// The manifest's counts agree with the files.
	if m.Counts.Samples != len(got) || m.Splits[SplitTrain].Samples != len(recs[SplitTrain]) || m.Splits[SplitVal].Samples != len(recs[SplitVal]) {
		t.Errorf("manifest counts %+v, splits %+v; the JSONL holds train %d, val %d", m.Counts, m.Splits, len(recs[SplitTrain]), len(recs[SplitVal]))
	}
	trajs := map[string]bool{}
	for _, e := range want {
		trajs[e.jd.Trajectory.ID] = true
	}
	if m.Counts.Kept != len(trajs) {
		t.Errorf("manifest keeps %d trajectories, want %d", m.Counts.Kept, len(trajs))
	}
	clean := 0
	for _, jd := range docs {
		if jd.Judgement.Decision == traj.CleanSuccess {
			clean++
		}
	}
	if m.Counts.Records != len(docs) || m.Counts.Decisions[string(traj.CleanSuccess)] != clean {
		t.Errorf("manifest counts %d records, %d clean successes; the archive has %d and %d", m.Counts.Records, m.Counts.Decisions[string(traj.CleanSuccess)], len(docs), clean)
	}
	sumApps, sumTasks := 0, 0
	for _, a := range m.Apps {
		sumApps += a.Samples
	}
	for _, tc := range m.Tasks {
		sumTasks += tc.Samples
	}
	if sumApps != len(got) || sumTasks != len(got) {
		t.Errorf("per-app samples sum to %d, per-task to %d, want %d", sumApps, sumTasks, len(got))
	}
	checkFiles(t, out, m)

	// The Parquet shards hold the same samples.
	rows := readParquet(t, out, m)
	if len(rows) != len(got) {
		t.Fatalf("Parquet holds %d rows, the JSONL %d samples", len(rows), len(got))
	}
	for id, row := range rows {
		r, ok := got[id]
		if !ok {
			t.Errorf("Parquet row %s is not in the JSONL", id)
			continue
		}
		if !slices.Equal(row.Messages, r.Messages) || !slices.Equal(row.Paths, r.Images) || row.Step != r.Step || row.Task != r.Task {
			t.Errorf("Parquet row %s differs from its JSONL record", id)
		}
	}
}

// checkFiles checks that the manifest lists exactly the folder's files
// (but itself), with their sizes and SHA-256.
func checkFiles(t *testing.T, dir string, m *Manifest) {
	t.Helper()
	listed := map[string]File{}
	for _, f := range m.Files {
		listed[f.Path] = f
	}
	if !slices.IsSortedFunc(m.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) }) {
		t.Error("manifest files are not sorted by path")
	}
	n := 0
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		rel = filepath.ToSlash(rel)
		if rel == ManifestName {
			return nil
		}
		n++
		f, ok := listed[rel]
		if !ok {
			t.Errorf("%s is not in the manifest", rel)
			return nil
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		if int64(len(body)) != f.Bytes || hex.EncodeToString(sum[:]) != f.SHA256 {
			t.Errorf("%s: %d bytes, SHA-256 %x; the manifest says %d, %s", rel, len(body), sum, f.Bytes, f.SHA256)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n != len(m.Files) {
		t.Errorf("the folder has %d files, the manifest lists %d", n, len(m.Files))
	}
}

// pqRow is a Parquet row as the independent reader gave it.
type pqRow struct {
	Messages []Message
	Paths    []string
	Step     int
	Task     string
}

// readParquet reads every Parquet shard of the dataset with the
// independent reader (DuckDB under Node.js) and checks that every
// embedded image's bytes hash to the SHA-256 its path names (the blob it
// came from). It returns the rows by id.
func readParquet(t *testing.T, dir string, m *Manifest) map[string]pqRow {
	t.Helper()
	var files []string
	for _, split := range []string{SplitTrain, SplitVal} {
		for _, p := range m.Splits[split].Parquet {
			files = append(files, filepath.Join(dir, filepath.FromSlash(p)))
		}
	}
	if len(files) == 0 {
		t.Fatal("no Parquet shards")
	}
	out := map[string]pqRow{}
	for _, f := range shardtest.Read(t, files...) {
		if f.Metadata["huggingface"] == "" {
			t.Errorf("%s: no huggingface features in the metadata", f.Path)
		}
		for _, raw := range f.Rows {
			var id string
			var r pqRow
			var imgs []struct {
				Bytes string `json:"bytes"`
				Path  string `json:"path"`
			}
			for col, dst := range map[string]any{"id": &id, "messages": &r.Messages, "images": &imgs, "step": &r.Step, "task": &r.Task} {
				if err := json.Unmarshal(raw[col], dst); err != nil {
					t.Fatalf("%s column %s: %v (%s)", f.Path, col, err, raw[col])
				}
			}
			for _, im := range imgs {
				b, err := base64.StdEncoding.DecodeString(im.Bytes)
				if err != nil {
					t.Fatal(err)
				}
				sum := sha256.Sum256(b)
				if want := strings.TrimSuffix(strings.TrimPrefix(im.Path, "images/"), ".png"); hex.EncodeToString(sum[:]) != want {
					t.Errorf("row %s: image %s holds bytes with SHA-256 %x", id, im.Path, sum)
				}
				if !bytes.HasPrefix(b, []byte("\x89PNG")) {
					t.Errorf("row %s: image %s is not a PNG", id, im.Path)
				}
				r.Paths = append(r.Paths, im.Path)
			}
			out[id] = r
		}
	}
	return out
}

// Acceptance 2: two builds of the same archive with the same flags are
// byte-identical, every file.
func TestAcceptBuildsAreByteIdentical(t *testing.T) {
	c := sharedCorpus(t)
	a := filepath.Join(t.TempDir(), "a")
	b := filepath.Join(t.TempDir(), "b")
	args := []string{"--val-fraction", "0.3", "--shard-bytes", "2000000", "--concurrency", "3"}
	buildCLI(t, c.StoreDir(), a, args...)
	buildCLI(t, c.StoreDir(), b, append(args[:len(args)-2:len(args)-2], "--concurrency", "7")...)
	fa, fb := tree(t, a), tree(t, b)
	if len(fa) != len(fb) {
		t.Fatalf("the builds have %d and %d files", len(fa), len(fb))
	}
	shards := 0
	for p, body := range fa {
		if !bytes.Equal(body, fb[p]) {
			t.Errorf("%s differs between the two builds", p)
		}
		if strings.HasSuffix(p, ".parquet") {
			shards++
		}
	}
	if shards < 2 {
		t.Errorf("%d Parquet shards: --shard-bytes 2000000 should give several", shards)
	}
	// Building again into the same folder replaces it with the same bytes.
	buildCLI(t, c.StoreDir(), a, args...)
	if again := tree(t, a); len(again) != len(fa) {
		t.Errorf("a rebuild in place has %d files, want %d", len(again), len(fa))
	} else {
		for p, body := range again {
			if !bytes.Equal(body, fa[p]) {
				t.Errorf("%s differs after a rebuild in place", p)
			}
		}
	}
}

// tree reads every file under dir: slash path → bytes.
func tree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		b, err := os.ReadFile(p)
		out[filepath.ToSlash(rel)] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
