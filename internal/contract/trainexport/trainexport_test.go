package trainexport_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/contract/trainexport"
	"github.com/codapipe/codapipe/internal/infra/blob"
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

func export(t *testing.T, fx *fixture, format trainexport.Format, val float64) (string, *trainexport.Manifest) {
	t.Helper()
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, fx.set, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export")
	m, err := trainexport.Export(ctx, trainexport.Config{Bucket: b, Store: fx.store, Out: out, Format: format, TempDir: t.TempDir(),
		ValFraction: val, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	want := len(fx.rows)
	if format != trainexport.FormatJSONL {
		want = len(fx.rows) / 2 // two candidates per group
	}
	if m.Rows != want {
		t.Errorf("manifest: %d rows, want %d", m.Rows, want)
	}
	// Every file of the manifest is there with its size and SHA-256; the
	// images are the fixture's four distinct screenshots, once each.
	images := 0
	for _, f := range m.Files {
		b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != f.SHA256 || int64(len(b)) != f.Bytes {
			t.Errorf("%s: %d bytes with another SHA-256 than the manifest's %+v", f.Path, len(b), f)
		}
		if strings.HasPrefix(f.Path, "images/") {
			images++
			if !bytes.Equal(b, fx.png[f.SHA256]) {
				t.Errorf("%s is not the screenshot", f.Path)
			}
		}
	}
	if images != len(fx.png) {
		t.Errorf("%d image files, want %d", images, len(fx.png))
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
		if strings.HasSuffix(p, ".partial") {
			t.Errorf("%s left behind", p)
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

// checkGroup checks a per-group row's extra_info / "codapipe", its label
// and its image paths against the group's shard rows (group g of the
// fixture).
func checkGroup(t *testing.T, fx *fixture, out string, i int, raw json.RawMessage, label string, images []string) {
	t.Helper()
	// tools/reader prints 64-bit integers (index) as decimal strings.
	raw = bigint.ReplaceAll(raw, []byte(`"index":$1`))
	var e trainexport.GroupExtra
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&e); err != nil {
		t.Fatalf("row %d: extra: %v\n%s", i, err, raw)
	}
	rows := fx.rows[2*i : 2*i+2]
	r := rows[0]
	if e.Index != int64(i) || e.Split != "train" || e.Set != "set-a" || e.TrajectoryID != r.TrajectoryID || e.GroupID != r.GroupID ||
		e.Step != r.Step || e.GroupSize != r.GroupSize || e.GroupMean != r.GroupMean || e.LossWeight != r.LossWeight ||
		e.PolicyCheckpoint != r.PolicyCheckpoint || e.Run != r.Run || e.ReferenceText != r.ReferenceText ||
		len(e.ImageSHA256) != len(r.Images) || e.ImageSHA256[0] != r.Images[0].SHA256 || len(e.Candidates) != len(rows) {
		t.Fatalf("row %d: extra %+v\nrow %+v", i, e, r)
	}
	for k, c := range e.Candidates {
		if c.Candidate != rows[k].Candidate || c.Completion != rows[k].Completion || c.Reward != rows[k].Reward || c.Advantage != rows[k].Advantage {
			t.Errorf("row %d candidate %d: %+v", i, k, c)
		}
	}
	l, err := trainexport.ParseLabel(label)
	if err != nil || l != (trainexport.Label{Set: "set-a", GroupID: r.GroupID, Reference: r.ReferenceText}) {
		t.Errorf("row %d: label %q (%v)", i, label, err)
	}
	if len(images) != len(r.Images) {
		t.Fatalf("row %d: %d images, want %d", i, len(images), len(r.Images))
	}
	for k, p := range images {
		if !filepath.IsAbs(p) {
			t.Errorf("row %d image %d: path %q is not absolute", i, k, p)
		}
		b, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(b, fx.png[r.Images[k].SHA256]) || !strings.HasPrefix(p, filepath.Join(out, "images")) {
			t.Errorf("row %d image %d: %s is not the screenshot (%v)", i, k, p, err)
		}
	}
}

// TestVerl exports a shard set for verl and reads the Parquet back with
// DuckDB (tools/reader), one row per group, checking every field verl's
// loader reads, as of volcengine/verl
// b178a3cd56f58b2d502255daba591e92833930a7:
//   - verl/utils/dataset/rl_dataset.py RLHFDataset: prompt_key "prompt" (a
//     list of {role, content} with string content); image_key "images";
//     _build_messages splits content on "<image>", puts each image dict in
//     a content part and asserts the count equals len(images);
//     __getitem__ reads extra_info.index and data_source.
//   - verl/utils/dataset/vision_utils.py process_image: a dict with a
//     "bytes" key is opened from those bytes (a null would fail); a dict
//     without goes to qwen_vl_utils fetch_image, which opens "image" as a
//     local path.
//   - examples/data_preprocess/geo3k.py: data_source, prompt, images,
//     ability, reward_model {style, ground_truth}, extra_info {split, index}.
func TestVerl(t *testing.T) {
	shardtest.Require(t)
	for _, format := range []shard.Format{shard.FormatArrow, shard.FormatParquet} {
		t.Run(string(format), func(t *testing.T) {
			fx := newFixture(t, format)
			out, _ := export(t, fx, trainexport.FormatVerl, 0)
			got := shardtest.Read(t, filepath.Join(out, "train.parquet"))[0]
			if got.NumRows != len(fx.rows)/2 {
				t.Fatalf("%d rows, want %d (one per group)", got.NumRows, len(fx.rows)/2)
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
				var ds, ability string
				var prompt []trainexport.Message
				var images []map[string]*string
				var rm struct {
					Style       string `json:"style"`
					GroundTruth string `json:"ground_truth"`
				}
				for k, v := range map[string]any{"data_source": &ds, "prompt": &prompt, "images": &images, "ability": &ability, "reward_model": &rm} {
					if err := json.Unmarshal(raw[k], v); err != nil {
						t.Fatalf("row %d column %s: %v", i, k, err)
					}
				}
				if ds != "codapipe/scienceboard/ChimeraX" || ability == "" || rm.Style != "rule" {
					t.Errorf("row %d: data_source %q ability %q style %q", i, ds, ability, rm.Style)
				}
				if fmt.Sprint(prompt) != fmt.Sprint(wantPrompt) {
					t.Errorf("row %d: prompt %q", i, prompt)
				}
				paths := make([]string, len(images))
				for k, im := range images {
					if _, ok := im["bytes"]; ok || im["image"] == nil {
						t.Errorf("row %d image %d: %v, want {\"image\": path} without \"bytes\"", i, k, im)
						continue
					}
					paths[k] = *im["image"]
				}
				checkGroup(t, fx, out, i, raw["extra_info"], rm.GroundTruth, paths)
			}
		})
	}
}

// TestOpenRLHF exports a shard set for OpenRLHF and reads the JSON Lines
// back, one row per group, checking every field OpenRLHF's loader reads,
// as of OpenRLHF/OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7:
//   - openrlhf/datasets/prompts_dataset.py preprocess_data / PromptDataset:
//     data[input_key] (a list of {role, content}; with apply_chat_template
//     "<image>" in string content becomes {"type": "image"}),
//     data[label_key], data.get(image_key) and data.get("datasource").
//   - openrlhf/cli/train_ppo_ray.py: --data.input_key (default "input"),
//     --data.label_key, --data.image_key (default "images").
//   - openrlhf/utils/vlm_utils.py load_images: a string that is not a URL
//     or base64 is opened as a path (Image.open, so relative to the
//     process's working folder: we write absolute paths).
func TestOpenRLHF(t *testing.T) {
	fx := newFixture(t, shard.FormatArrow)
	out, _ := export(t, fx, trainexport.FormatOpenRLHF, 0)
	lines := readLines(t, filepath.Join(out, "train.jsonl"))
	if len(lines) != len(fx.rows)/2 {
		t.Fatalf("%d lines, want %d (one per group)", len(lines), len(fx.rows)/2)
	}
	for i, l := range lines {
		var line map[string]json.RawMessage
		if err := json.Unmarshal(l, &line); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		var input []trainexport.Message
		var label, ds string
		var images []string
		for k, v := range map[string]any{"input": &input, "label": &label, "images": &images, "datasource": &ds} {
			if err := json.Unmarshal(line[k], v); err != nil {
				t.Fatalf("line %d key %s: %v", i, k, err)
			}
		}
		if fmt.Sprint(input) != fmt.Sprint(wantPrompt) || ds != "codapipe/scienceboard/ChimeraX" {
			t.Errorf("line %d: input %q datasource %q", i, input, ds)
		}
		if strings.Count(input[2].Content, "<image>") != len(images) {
			t.Errorf("line %d: %d images for %d placeholders", i, len(images), strings.Count(input[2].Content, "<image>"))
		}
		checkGroup(t, fx, out, i, line["codapipe"], label, images)
	}
}

func readLines(t *testing.T, name string) [][]byte {
	t.Helper()
	f, err := os.Open(name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out [][]byte
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		out = append(out, bytes.Clone(sc.Bytes()))
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestJSONL exports the candidate rows: one line per shard row, in the
// set's order, with every field the offline trainer reads and images by
// path relative to the export's folder.
func TestJSONL(t *testing.T) {
	fx := newFixture(t, shard.FormatArrow)
	out, m := export(t, fx, trainexport.FormatJSONL, 0)
	if df := m.DataFiles(); len(df) != 1 || df[0].Path != "candidates.jsonl" || df[0].Split != "" {
		t.Errorf("data files %+v", df)
	}
	lines := readLines(t, filepath.Join(out, "candidates.jsonl"))
	if len(lines) != len(fx.rows) {
		t.Fatalf("%d lines, want %d", len(lines), len(fx.rows))
	}
	for i, l := range lines {
		var c trainexport.CandidateRow
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&c); err != nil {
			t.Fatalf("line %d: %v", i, err)
		}
		r := fx.rows[i]
		if c.Index != int64(i) || c.TrajectoryID != r.TrajectoryID || c.Step != r.Step || c.Candidate != r.Candidate ||
			c.GroupID != r.GroupID || c.GroupSize != r.GroupSize || c.Completion != r.Completion || c.Advantage != r.Advantage ||
			c.Reward != r.Reward || c.LossWeight != r.LossWeight || c.ZeroVariance != r.ZeroVariance || c.Label != r.Label ||
			c.FinishReason != r.FinishReason || c.PolicyCheckpoint != r.PolicyCheckpoint || c.JudgeVersion != r.JudgeVersion ||
			fmt.Sprint(c.CompletionTokenIDs) != fmt.Sprint(r.CompletionTokenIDs) || fmt.Sprint(c.LogProbs) != fmt.Sprint(r.LogProbs) ||
			(c.LogProbs == nil) != (r.LogProbs == nil) || fmt.Sprint(c.Messages) != fmt.Sprint(wantPrompt) {
			t.Errorf("line %d: %+v\nrow %+v", i, c, r)
		}
		if !bytes.Contains(l, []byte(`"prompt_token_ids":null`)) {
			t.Errorf("line %d: no prompt_token_ids", i)
		}
		for k, im := range c.Images {
			b, err := os.ReadFile(filepath.Join(out, filepath.FromSlash(im.Path)))
			if err != nil || filepath.IsAbs(im.Path) || im.SHA256 != r.Images[k].SHA256 || !bytes.Equal(b, fx.png[im.SHA256]) || im.Width != 1280 {
				t.Errorf("line %d image %d: %+v (%v)", i, k, im, err)
			}
		}
	}
}

// TestValSplit checks the val split: whole trajectories (so whole groups)
// by a hash of the trajectory id, the same on every export.
func TestValSplit(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, shard.FormatArrow)
	b, err := blob.OpenBucket(ctx, fx.set, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		frac  float64
		files []string
	}{
		{"none", 0, []string{"train.jsonl"}},
		{"some", 0.5, []string{"train.jsonl", "val.jsonl"}},
		{"almost-all", 0.999999, []string{"train.jsonl", "val.jsonl"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var first []int
			for range 2 {
				out := filepath.Join(t.TempDir(), "export")
				m, err := trainexport.Export(ctx, trainexport.Config{Bucket: b, Store: fx.store, Out: out, Format: trainexport.FormatOpenRLHF,
					TempDir: t.TempDir(), ValFraction: tc.frac, Log: slog.New(slog.DiscardHandler)})
				if err != nil {
					t.Fatal(err)
				}
				df := m.DataFiles()
				var names []string
				var counts []int
				rows := 0
				for _, f := range df {
					counts = append(counts, f.Rows)
					names = append(names, f.Path)
					rows += f.Rows
					for _, l := range readLines(t, filepath.Join(out, f.Path)) {
						var line trainexport.OpenRLHFRow
						if err := json.Unmarshal(l, &line); err != nil {
							t.Fatal(err)
						}
						if line.Codapipe.Split != f.Split {
							t.Errorf("%s holds a row of split %q", f.Path, line.Codapipe.Split)
						}
					}
				}
				if fmt.Sprint(names) != fmt.Sprint(tc.files) || rows != len(fx.rows)/2 {
					t.Errorf("files %v with %d rows, want %v with %d", names, rows, tc.files, len(fx.rows)/2)
				}
				if tc.frac > 0.99 && df[1].Rows != rows {
					t.Errorf("val holds %d of %d rows at fraction %g", df[1].Rows, rows, tc.frac)
				}
				if first != nil && fmt.Sprint(first) != fmt.Sprint(counts) {
					t.Errorf("another split on the second export: %v, then %v", first, counts)
				}
				first = counts
			}
		})
	}
	if _, err := trainexport.Export(ctx, trainexport.Config{Bucket: b, Store: fx.store, Out: t.TempDir(), Format: trainexport.FormatVerl, ValFraction: 1}); err == nil {
		t.Error("val fraction 1 accepted")
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
		// verl's loader expands <video> too: the same rule as the SFT set's (prompt.Flatten).
		{name: "video-tag-in-text", msgs: []shard.Message{{Role: "user", Content: []shard.Part{{Type: "text", Text: "a <video>"}}}}, bad: true},
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

// filesSet writes the fixture's rows again as a set with its images as
// files beside the shard (advantage's default, shard.ImagesFiles), in a
// folder of its own, and returns the folder.
func filesSet(t *testing.T, fx *fixture) string {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	b, err := blob.OpenBucket(ctx, dir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rows := make([]shard.Row, len(fx.rows))
	for i, r := range fx.rows {
		r.Images = append([]shard.Image(nil), r.Images...)
		for k := range r.Images {
			r.Images[k].Bytes = fx.png[r.Images[k].SHA256]
		}
		rows[i] = r
	}
	meta := shard.Meta{Mode: shard.ModeStep, Images: shard.ImagesFiles}
	shardtest.WriteSet(t, shard.Config{Bucket: b, Prefix: "set", Format: shard.FormatArrow, Meta: meta, Images: shard.ImagesFiles}, rows)
	return filepath.Join(dir, "set")
}

// TestImageLinks exports a set whose images are files on the same file
// system: each image of the export is a hard link to the set's file (no
// bytes read twice or written), with the manifest's size and SHA-256; an
// image file damaged in the set is not linked: the export fails with a
// checksum mismatch naming it and publishes no manifest.
func TestImageLinks(t *testing.T) {
	ctx := context.Background()
	fx := newFixture(t, shard.FormatArrow)
	fx.set = filesSet(t, fx)
	out, m := export(t, fx, trainexport.FormatJSONL, 0)
	linked := 0
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Path, "images/") {
			continue
		}
		a, err := os.Stat(filepath.Join(out, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.Stat(filepath.Join(fx.set, filepath.FromSlash(f.Path)))
		if err != nil {
			t.Fatal(err)
		}
		if os.SameFile(a, b) {
			linked++
		}
	}
	if linked != len(fx.png) {
		t.Errorf("%d of %d images linked from the set", linked, len(fx.png))
	}

	var victim string
	for sha := range fx.png {
		victim = sha
		break
	}
	name := filepath.Join(fx.set, filepath.FromSlash(shard.ImagePath(victim)))
	if err := os.Remove(name); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name, []byte("\x89PNG\r\n\x1a\nnot the screenshot"), 0o644); err != nil {
		t.Fatal(err)
	}
	b, err := blob.OpenBucket(ctx, fx.set, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "export")
	_, err = trainexport.Export(ctx, trainexport.Config{Bucket: b, Out: out2, Format: trainexport.FormatJSONL, TempDir: t.TempDir(), Log: slog.New(slog.DiscardHandler)})
	if !errors.Is(err, blob.ErrChecksumMismatch) || !strings.Contains(err.Error(), victim) {
		t.Fatalf("export of a set with a damaged image file: %v, want a checksum mismatch naming %s", err, victim)
	}
	if _, err := os.Stat(filepath.Join(out2, trainexport.ManifestName)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("manifest published after a failed export: %v", err)
	}
	if _, err := os.Stat(filepath.Join(out2, filepath.FromSlash(shard.ImagePath(victim)))); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("damaged image exported: %v", err)
	}
}
