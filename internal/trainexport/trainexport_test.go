package trainexport_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/shard"
	"github.com/codapipe/codapipe/internal/shard/shardtest"
	"github.com/codapipe/codapipe/internal/trainexport"
)

// fixture is a shard set in a local folder with its screenshots in a blob
// store, as advantage writes them.
type fixture struct {
	set   string // the set's folder (holding manifest.json)
	store *blob.Store
	rows  []shard.Row
	png   map[string][]byte // screenshot bytes by SHA-256
}

func ptr[T any](v T) *T { return &v }

// newFixture writes a set of rows: two groups of two candidates, the
// first group's images embedded, the second's in the blob store only; one
// row without token-level data.
func newFixture(t *testing.T, format shard.Format) *fixture {
	t.Helper()
	ctx := context.Background()
	root := t.TempDir()
	store, err := blob.Open(ctx, filepath.Join(root, "blobs"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	fx := &fixture{store: store, png: map[string][]byte{}}
	put := func(s string) shard.Image {
		b := []byte("\x89PNG\r\n\x1a\n" + s)
		ref, err := store.PutBytes(ctx, b)
		if err != nil {
			t.Fatal(err)
		}
		fx.png[ref.SHA256] = b
		return shard.Image{SHA256: ref.SHA256, Width: 1280, Height: 800}
	}
	for g := range 2 {
		prev, cur := put(fmt.Sprintf("prev-%d", g)), put(fmt.Sprintf("cur-%d", g))
		for c := range 2 {
			imgs := []shard.Image{prev, cur}
			if g == 0 {
				imgs = []shard.Image{prev, cur}
				imgs[0].Bytes, imgs[1].Bytes = fx.png[prev.SHA256], fx.png[cur.SHA256]
			}
			r := shard.Row{
				Run: "run-1", App: "ChimeraX", Task: "task-1", TrajectoryID: fmt.Sprintf("traj-%d", g), Sample: int32(g), Step: 3,
				GroupID: fmt.Sprintf("step/traj-%d/3", g), Candidate: int32(c), GroupSize: 2,
				Prompt: "[]",
				Messages: []shard.Message{
					{Role: "system", Content: []shard.Part{{Type: shard.PartText, Text: "You are a GUI agent."}}},
					{Role: "assistant", Content: []shard.Part{{Type: shard.PartText, Text: "Thought: open\nAction: click(start_box='(1,2)')"}}},
					{Role: "user", Content: []shard.Part{
						{Type: shard.PartImage, Image: "sha256:" + prev.SHA256}, {Type: shard.PartImage, Image: "sha256:" + cur.SHA256},
						{Type: shard.PartText, Text: "Task: colour the protein ✓"},
					}},
				},
				Images:             imgs,
				Completion:         fmt.Sprintf("Thought: %d\nAction: click(start_box='(5,6)')", c),
				PromptTokens:       ptr(int32(1200)),
				CompletionTokens:   ptr(int32(3)),
				LogProbs:           []float64{-0.5, -0.25, -1e-9},
				CompletionTokenIDs: []int32{151644, 8, 151645},
				FinishReason:       "stop",
				ActionText:         "click(start_box='(5,6)')", ReferenceText: "click(start_box='(5,7)')",
				Reward: float64(c) * 0.75, Advantage: float64(2*c-1) * 0.7071067811865475, GroupMean: 0.375, GroupStd: 0.53,
				GroupScale: 1.88, LossWeight: 0.5, LabelSource: "clean", Label: "positive",
				PolicyModel: "planner", PolicyCheckpoint: "ckpt-7", JudgeVersion: "judge@1",
				Sampling: ptr(`{"temperature":1,"top_k":-1}`),
			}
			if g == 1 && c == 1 {
				r.LogProbs, r.CompletionTokenIDs, r.CompletionTokens = nil, nil, nil
			}
			fx.rows = append(fx.rows, r)
		}
	}
	out := filepath.Join(root, "shards")
	b, err := blob.OpenBucket(ctx, out, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	w, err := shard.NewWriter(shard.Config{Bucket: b, Prefix: "set-a", Format: format, TempDir: t.TempDir(),
		Meta: shard.Meta{Mode: shard.ModeStep}})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.Add(fx.rows); err != nil {
		t.Fatal(err)
	}
	f, err := w.Commit(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := shard.WriteManifest(ctx, b, "set-a", shard.NewManifest("set-a", format, shard.Meta{Mode: shard.ModeStep}, []shard.File{f})); err != nil {
		t.Fatal(err)
	}
	// The set is read from a copy elsewhere: through its manifest only.
	fx.set = filepath.Join(t.TempDir(), "moved-set")
	if err := os.Rename(filepath.Join(out, "set-a"), fx.set); err != nil {
		t.Fatal(err)
	}
	return fx
}

func export(t *testing.T, fx *fixture, format trainexport.Format) (string, *trainexport.Manifest) {
	t.Helper()
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, fx.set, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export")
	m, err := trainexport.Export(ctx, trainexport.Config{Bucket: b, Store: fx.store, Out: out, Format: format, TempDir: t.TempDir(),
		Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	if m.Rows != len(fx.rows) || len(m.Files) != 1 || m.Files[0].Path != trainexport.DataFile(format) {
		t.Errorf("manifest %+v", m)
	}
	err = filepath.WalkDir(out, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if d.IsDir() && fi.Mode().Perm()&0o555 != 0o555 || !d.IsDir() && fi.Mode().Perm()&0o444 != 0o444 {
			t.Errorf("%s: mode %o, not readable by others", p, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out, m
}

// wantPrompt is the flattened prompt of the fixture's rows.
var wantPrompt = []trainexport.Message{
	{Role: "system", Content: "You are a GUI agent."},
	{Role: "assistant", Content: "Thought: open\nAction: click(start_box='(1,2)')"},
	{Role: "user", Content: "<image><image>Task: colour the protein ✓"},
}

var bigint = regexp.MustCompile(`"index":"(\d+)"`)

// checkExtra checks the fields of extra_info / "codapipe" against the row.
func checkExtra(t *testing.T, i int, raw json.RawMessage, r shard.Row) {
	t.Helper()
	// tools/reader prints 64-bit integers (index) as decimal strings.
	raw = bigint.ReplaceAll(raw, []byte(`"index":$1`))
	var e trainexport.Extra
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("row %d: extra: %v\n%s", i, err, raw)
	}
	if e.Index != int64(i) || e.TrajectoryID != r.TrajectoryID || e.GroupID != r.GroupID || e.Step != r.Step ||
		e.Candidate != r.Candidate || e.GroupSize != r.GroupSize || e.Advantage != r.Advantage || e.Reward != r.Reward ||
		e.GroupMean != r.GroupMean || e.LossWeight != r.LossWeight || e.Completion != r.Completion ||
		e.PolicyCheckpoint != r.PolicyCheckpoint || e.FinishReason != r.FinishReason || e.Run != r.Run ||
		fmt.Sprint(e.CompletionTokenIDs) != fmt.Sprint(r.CompletionTokenIDs) || fmt.Sprint(e.LogProbs) != fmt.Sprint(r.LogProbs) ||
		(e.CompletionTokenIDs == nil) != (r.CompletionTokenIDs == nil) ||
		(e.Sampling == nil) != (r.Sampling == nil) || (e.Sampling != nil && *e.Sampling != *r.Sampling) ||
		len(e.ImageSHA256) != len(r.Images) || e.ImageSHA256[0] != r.Images[0].SHA256 {
		t.Errorf("row %d: extra %+v\nrow %+v", i, e, r)
	}
}

// TestVerl exports a shard set for verl and reads the Parquet back with
// DuckDB (tools/reader), checking every field verl's loader reads, as of
// volcengine/verl b178a3cd56f58b2d502255daba591e92833930a7:
//   - verl/utils/dataset/rl_dataset.py RLHFDataset: prompt_key "prompt" (a
//     list of {role, content} with string content); image_key "images";
//     _build_messages splits content on "<image>" and asserts the count
//     equals len(images); __getitem__ reads extra_info.index (and
//     tools_kwargs / interaction_kwargs, optional) and data_source.
//   - verl/utils/dataset/vision_utils.py process_image: a dict image is
//     opened from its "bytes".
//   - examples/data_preprocess/geo3k.py: data_source, prompt, images,
//     ability, reward_model {style, ground_truth}, extra_info {split, index}.
func TestVerl(t *testing.T) {
	shardtest.Require(t)
	for _, format := range []shard.Format{shard.FormatArrow, shard.FormatParquet} {
		t.Run(string(format), func(t *testing.T) {
			fx := newFixture(t, format)
			out, _ := export(t, fx, trainexport.FormatVerl)
			got := shardtest.Read(t, filepath.Join(out, "train.parquet"))[0]
			if got.NumRows != len(fx.rows) {
				t.Fatalf("%d rows, want %d", got.NumRows, len(fx.rows))
			}
			cols := map[string]bool{}
			for _, f := range got.Schema {
				cols[f.Name] = true
			}
			for _, c := range []string{"data_source", "prompt", "images", "ability", "reward_model", "extra_info"} {
				if !cols[c] {
					t.Errorf("no column %s", c)
				}
			}
			for i, raw := range got.Rows {
				r := fx.rows[i]
				var ds, ability string
				var prompt []trainexport.Message
				var images []struct {
					Bytes []byte  `json:"bytes"`
					Path  *string `json:"path"`
				}
				var rm struct {
					Style       string `json:"style"`
					GroundTruth string `json:"ground_truth"`
				}
				for k, v := range map[string]any{"data_source": &ds, "prompt": &prompt, "images": &images, "ability": &ability, "reward_model": &rm} {
					if err := json.Unmarshal(raw[k], v); err != nil {
						t.Fatalf("row %d column %s: %v", i, k, err)
					}
				}
				if ds != "codapipe/scienceboard/ChimeraX" || ability == "" {
					t.Errorf("row %d: data_source %q ability %q", i, ds, ability)
				}
				if fmt.Sprint(prompt) != fmt.Sprint(wantPrompt) {
					t.Errorf("row %d: prompt %q", i, prompt)
				}
				placeholders := 0
				for _, m := range prompt {
					placeholders += strings.Count(m.Content, "<image>")
				}
				if placeholders != len(images) || len(images) != len(r.Images) {
					t.Errorf("row %d: %d placeholders, %d images, want %d", i, placeholders, len(images), len(r.Images))
				}
				for k, im := range images {
					if !bytes.Equal(im.Bytes, fx.png[r.Images[k].SHA256]) || im.Path != nil {
						t.Errorf("row %d image %d: %d bytes, path %v; want the screenshot's bytes", i, k, len(im.Bytes), im.Path)
					}
				}
				if rm.Style != "rule" || rm.GroundTruth != r.ReferenceText {
					t.Errorf("row %d: reward_model %+v", i, rm)
				}
				checkExtra(t, i, raw["extra_info"], r)
			}
		})
	}
}

// TestOpenRLHF exports a shard set for OpenRLHF and reads the JSON Lines
// back, checking every field OpenRLHF's loader reads, as of
// OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7:
//   - openrlhf/datasets/prompts_dataset.py preprocess_data / PromptDataset:
//     data[input_key] (a list of {role, content}; with apply_chat_template
//     "<image>" in string content becomes {"type": "image"}),
//     data[label_key], data.get(image_key) and data.get("datasource").
//   - openrlhf/cli/train_ppo_ray.py: --data.input_key (default "input"),
//     --data.label_key, --data.image_key (default "images").
//   - openrlhf/utils/vlm_utils.py load_images: strings that are data URIs
//     ("data:image/png;base64,…") are decoded as base64.
func TestOpenRLHF(t *testing.T) {
	fx := newFixture(t, shard.FormatArrow)
	out, _ := export(t, fx, trainexport.FormatOpenRLHF)
	f, err := os.Open(filepath.Join(out, "train.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	i := 0
	for ; sc.Scan(); i++ {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(sc.Bytes(), &line); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		r := fx.rows[i]
		var input []trainexport.Message
		var label, ds string
		var images []string
		for k, v := range map[string]any{"input": &input, "label": &label, "images": &images, "datasource": &ds} {
			if err := json.Unmarshal(line[k], v); err != nil {
				t.Fatalf("line %d key %s: %v", i, k, err)
			}
		}
		if fmt.Sprint(input) != fmt.Sprint(wantPrompt) || label != r.ReferenceText || ds != "codapipe/scienceboard/ChimeraX" {
			t.Errorf("line %d: input %q label %q datasource %q", i, input, label, ds)
		}
		if len(images) != len(r.Images) || strings.Count(input[2].Content, "<image>") != len(images) {
			t.Errorf("line %d: %d images for %d placeholders", i, len(images), strings.Count(input[2].Content, "<image>"))
		}
		for k, s := range images {
			b64, ok := strings.CutPrefix(s, "data:image/png;base64,")
			b, err := base64.StdEncoding.DecodeString(b64)
			if !ok || err != nil || !bytes.Equal(b, fx.png[r.Images[k].SHA256]) {
				t.Errorf("line %d image %d: not the screenshot as a data URI", i, k)
			}
		}
		checkExtra(t, i, line["codapipe"], r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if i != len(fx.rows) {
		t.Errorf("%d lines, want %d", i, len(fx.rows))
	}
}

// TestFlatten checks the placeholder form of messages and its errors.
func TestFlatten(t *testing.T) {
	img := []shard.Image{{SHA256: "aa"}}
	for _, tc := range []struct {
		name string
		msgs []shard.Message
		imgs []shard.Image
		want string
		bad  bool
	}{
		{name: "text-and-image", msgs: []shard.Message{{Role: "user", Content: []shard.Part{{Type: "text", Text: "a "}, {Type: "image", Image: "sha256:aa"}, {Type: "text", Text: " b"}}}},
			imgs: img, want: "[{user a <image> b}]"},
		{name: "wrong-image", msgs: []shard.Message{{Role: "user", Content: []shard.Part{{Type: "image", Image: "sha256:bb"}}}}, imgs: img, bad: true},
		{name: "missing-image", msgs: []shard.Message{{Role: "user", Content: []shard.Part{{Type: "text", Text: "x"}}}}, imgs: img, bad: true},
		{name: "placeholder-in-text", msgs: []shard.Message{{Role: "user", Content: []shard.Part{{Type: "text", Text: "<image>"}}}}, bad: true},
		{name: "no-messages", bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := trainexport.Flatten(tc.msgs, tc.imgs)
			if tc.bad != (err != nil) {
				t.Fatalf("err %v", err)
			}
			if !tc.bad && fmt.Sprint(got) != tc.want {
				t.Errorf("got %v, want %s", got, tc.want)
			}
		})
	}
}
