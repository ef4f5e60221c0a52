package shard_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/grpo"
)

// testMeta is the Meta of the test shard sets.
func testMeta() shard.Meta {
	m := shard.Meta{
		Mode:         shard.ModeStep,
		LabelMode:    "clean",
		RewardConfig: `{"type_weight":0.5,"dist_weight":0.5}`,
		Version:      "test-1.2.3",
	}
	m.SetEstimator(grpo.DefaultEstimator())
	return m
}

func ptr[T any](v T) *T { return &v }

// edgeRows are rows exercising every column with awkward values: nulls and
// empty lists, unicode, signed zeros, subnormals and extreme floats, empty
// and embedded bytes.
func edgeRows() []shard.Row {
	floats := []float64{
		0, math.Copysign(0, -1), 5e-324, -5e-324, 2.2250738585072014e-308, 2.225073858507201e-308,
		1e308, -1e308, math.MaxFloat64, -math.MaxFloat64, 0.1 + 0.2, 1.0 / 3, -2.5e-7, 123456789.123456789,
		math.Nextafter(1, 2), math.SmallestNonzeroFloat64 * 3,
	}
	rows := []shard.Row{
		{
			// Everything set.
			Run: "run-1", App: "ChimeraX", Task: "task-ä", TrajectoryID: "traj-1", Sample: 3, Step: 7,
			GroupID: "step/run-1/traj-1/7", Candidate: 2, GroupSize: 8,
			Prompt:           `[{"role":"user","content":[{"type":"image_url","image_url":{"url":"codapipe-blob:sha256/aa"}}]}]`,
			Images:           []shard.Image{{SHA256: "aa", Width: 1920, Height: 1080, Bytes: []byte{0x89, 'P', 'N', 'G', 0, 0xff}}},
			Completion:       "Thought: click it.\nAction: click(start_box='(10,20)')",
			PromptTokens:     ptr(int32(1234)),
			PromptTokenIDs:   []int32{151644, 8948, 198, 0, math.MaxInt32, math.MinInt32},
			CompletionTokens: ptr(int32(-1)),
			LogProbs:         floats,
			CompletionTokenIDs: []int32{0, 1, -1, math.MaxInt32, math.MinInt32, 151643, 151644, 151645,
				7, 8, 9, 10, 11, 12, 13, 14},
			FinishReason: "length",
			Sampling:     ptr(`{"temperature":1,"top_p":1,"top_k":-1,"min_p":0,"repetition_penalty":1,"presence_penalty":0,"frequency_penalty":0,"max_tokens":512,"seed":null,"stop":[]}`),
			Messages: []shard.Message{
				{Role: "system", Content: []shard.Part{{Type: shard.PartText, Text: "You are a GUI agent. ✓"}}},
				{Role: "assistant", Content: []shard.Part{{Type: shard.PartText, Text: ""}}},
				{Role: "user", Content: []shard.Part{
					{Type: shard.PartImage, Image: "sha256:aa"}, {Type: shard.PartText, Text: "task\n<image>"},
				}},
			},
			Action: &shard.Action{Type: "drag", X: ptr(0.25), Y: ptr(math.Copysign(0, -1)), EndX: ptr(1.0), EndY: ptr(5e-324),
				Text: "typed\ttext", Keys: []string{"ctrl", "shift", "é"}, Direction: "down"},
			ActionText:    "drag(0.25,0,1,0)",
			Reference:     &shard.Action{Type: "click", X: ptr(0.5), Y: ptr(0.5), Keys: []string{}},
			ReferenceText: "click(0.5,0.5)", Reward: 0.75, RewardTypeMatch: 1, RewardDist: 0.5,
			Advantage: -1.2345678901234567, GroupMean: 0.1 + 0.2, GroupStd: 1e-300, GroupScale: 1e300,
			LossWeight: 1.0 / 3, LabelSource: "clean", Label: "positive",
			PolicyModel: "planner", PolicyCheckpoint: "ckpt-7", JudgeVersion: "judge@abc",
			ExecutorModel: "UI-TARS-1.5-7B", ExecutorCheckpoint: "exec-ckpt ü",
			ExecutorCoords: `{"space":"pixels-resized","factor":28,"min_pixels":3136,"max_pixels":2116800}`,
			PromptSet:      "5d41402abc4b2a76b9719d911017c592ae6f4e5b1c7d2f2e0a3b8c9d1e2f3a4b",
		},
		{
			// Nulls, empty lists and zero values everywhere.
			Images:             []shard.Image{},
			LogProbs:           []float64{},
			CompletionTokenIDs: []int32{},
			PromptTokenIDs:     []int32{},
			Sampling:           ptr(""),
			Messages:           []shard.Message{{Role: "user"}, {Role: "", Content: []shard.Part{}}},
			Action:             &shard.Action{Type: "scroll"}, // nil Keys: an empty list
		},
		{
			// The zero Row: nil lists.
		},
		{
			// Unicode: multi-byte, astral plane, combining marks, RTL, NUL and
			// control characters, a lone surrogate's replacement.
			Run: "日本語 🚀 ü ñ", App: "GRASS GIS", Task: "\u0000nul\u0001\u001f\u007f", TrajectoryID: "עברית",
			Prompt: "e\u0301 \U0001F600\U0001F469\u200D\U0001F4BB \uFFFD \u2028\u2029 \"quoted\" \\ back",
			Images: []shard.Image{
				{SHA256: "bb", Width: 1, Height: 1, Bytes: []byte{}}, // empty but present
				{SHA256: "cc", Width: 2, Height: 3},                  // reference only (null bytes)
				{SHA256: "dd", Width: math.MaxInt32, Height: math.MinInt32, Bytes: []byte{0}},
			},
			Completion: "Thought: 点击\nAction: type(content='😀')", Sample: math.MaxInt32, Step: math.MinInt32,
			Action: &shard.Action{Type: "type", Text: "😀\n", Keys: nil},
			Reward: math.Copysign(0, -1), Advantage: 5e-324, GroupMean: -5e-324, GroupStd: math.MaxFloat64,
			GroupScale: -math.MaxFloat64, LossWeight: 1e-308, Unparsed: true, ZeroVariance: true,
			DroppedReason: "zero_variance", Label: "negative", LabelSource: "prefix",
		},
	}
	return rows
}

// imageRows returns n rows whose single image embeds size random bytes.
func imageRows(n, size int, seed uint64) []shard.Row {
	rng := rand.New(rand.NewPCG(seed, 42))
	rows := make([]shard.Row, n)
	for i := range rows {
		b := make([]byte, size)
		for j := 0; j < len(b); j += 8 {
			v := rng.Uint64()
			for k := 0; k < 8 && j+k < len(b); k++ {
				b[j+k] = byte(v >> (8 * k))
			}
		}
		sum := sha256.Sum256(b)
		rows[i] = manyRow(i, rng)
		rows[i].Images = []shard.Image{{SHA256: hex.EncodeToString(sum[:]), Width: 1280, Height: 720, Bytes: b}}
	}
	return rows
}

// manyRows returns n ordinary rows (no embedded bytes) with varied values.
func manyRows(n int, seed uint64) []shard.Row {
	rng := rand.New(rand.NewPCG(seed, 7))
	rows := make([]shard.Row, n)
	for i := range rows {
		rows[i] = manyRow(i, rng)
	}
	return rows
}

func manyRow(i int, rng *rand.Rand) shard.Row {
	g := i / 8
	r := shard.Row{
		Run: "run-" + fmt.Sprint(i/100), App: []string{"ChimeraX", "Celestia", "KAlgebra", "GRASS GIS"}[i%4],
		Task: fmt.Sprintf("task-%d", g%13), TrajectoryID: fmt.Sprintf("traj-%d", g), Sample: int32(i % 4), Step: int32(g % 15),
		GroupID: fmt.Sprintf("step/%d", g), Candidate: int32(i % 8), GroupSize: 8,
		Prompt: fmt.Sprintf(`[{"role":"user","content":"step %d of %d ✓"}]`, i, rng.IntN(1000)),
		Messages: []shard.Message{{Role: "user", Content: []shard.Part{
			{Type: shard.PartText, Text: fmt.Sprintf("step %d ✓", i)}, {Type: shard.PartImage, Image: "sha256:x"},
		}}},
		Images:     []shard.Image{{SHA256: fmt.Sprintf("%064x", rng.Uint64()), Width: 1920, Height: 1080}},
		Completion: fmt.Sprintf("Thought: %x\nAction: click(start_box='(%d,%d)')", rng.Uint64(), rng.IntN(1000), rng.IntN(1000)),
		Reward:     rng.Float64(), RewardTypeMatch: float64(rng.IntN(2)), RewardDist: rng.Float64(),
		Advantage: rng.NormFloat64(), GroupMean: rng.Float64(), GroupStd: rng.Float64(), GroupScale: rng.ExpFloat64(),
		LossWeight: 1 / float64(1+rng.IntN(20)), LabelSource: "clean", Label: "positive",
		PolicyModel: "planner", PolicyCheckpoint: "ckpt", JudgeVersion: "judge",
	}
	if i%3 != 0 {
		r.PromptTokens = ptr(int32(rng.IntN(5000)))
		r.CompletionTokens = ptr(int32(rng.IntN(500)))
		r.LogProbs = make([]float64, rng.IntN(40))
		r.CompletionTokenIDs = make([]int32, len(r.LogProbs))
		for j := range r.LogProbs {
			r.LogProbs[j] = -rng.ExpFloat64()
			r.CompletionTokenIDs[j] = rng.Int32N(152000)
		}
		r.FinishReason = "stop"
		r.Sampling = ptr(fmt.Sprintf(`{"temperature":%d}`, i%2))
	}
	if i%5 != 0 {
		r.Action = &shard.Action{Type: "click", X: ptr(rng.Float64()), Y: ptr(rng.Float64())}
		r.ActionText = "click"
	} else {
		r.Unparsed = true
	}
	r.Reference = &shard.Action{Type: "hotkey", Keys: []string{"ctrl", "s"}}
	return r
}

// localBucket opens a bucket on a fresh directory and returns it with the
// directory.
func localBucket(t testing.TB) (blob.Bucket, string) {
	t.Helper()
	dir := t.TempDir()
	return openLocal(t, dir), dir
}

// openLocal opens the local bucket at dir.
func openLocal(t testing.TB, dir string) blob.Bucket {
	t.Helper()
	b, err := blob.OpenBucket(context.Background(), dir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// newWriter returns a writer of cfg, closed when the test ends.
func newWriter(t testing.TB, cfg shard.Config) *shard.Writer {
	t.Helper()
	w, err := shard.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { w.Close() })
	return w
}

// writeOne writes rows as one shard with a writer of cfg, commits it and
// closes the writer.
func writeOne(t testing.TB, cfg shard.Config, rows []shard.Row) shard.File {
	t.Helper()
	w, err := shard.NewWriter(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(rows); err != nil {
		t.Fatal(err)
	}
	f, err := w.Commit(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// writeRolling adds rows one at a time and commits whenever the shard is
// full, and once at the end; it returns the committed files.
func writeRolling(t testing.TB, w *shard.Writer, rows []shard.Row) []shard.File {
	t.Helper()
	ctx := context.Background()
	var files []shard.File
	for i := range rows {
		if err := w.Add(rows[i : i+1]); err != nil {
			t.Fatal(err)
		}
		if w.Full() {
			f, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
	}
	if w.Rows() > 0 {
		f, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	return files
}

// paths returns the local paths of files in the bucket directory dir.
func paths(dir string, files []shard.File) []string {
	out := make([]string, len(files))
	for i, f := range files {
		out[i] = filepath.Join(dir, filepath.FromSlash(f.Key))
	}
	return out
}

// fileSHA256 hashes the object key of bucket b.
func fileSHA256(t testing.TB, b blob.Bucket, key string) (string, int64) {
	t.Helper()
	rc, _, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	h := sha256.New()
	n, err := io.Copy(h, rc)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil)), n
}

// listKeys lists every key of b under prefix.
func listKeys(t testing.TB, b blob.Bucket, prefix string) []string {
	t.Helper()
	var keys []string
	for info, err := range b.List(context.Background(), prefix) {
		if err != nil {
			t.Fatal(err)
		}
		keys = append(keys, info.Key)
	}
	return keys
}

// dirEntries lists the names in dir.
func dirEntries(t testing.TB, dir string) []string {
	t.Helper()
	es, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range es {
		names = append(names, e.Name())
	}
	return names
}
