// Package shardtest reads shard files back with an independent reader and
// compares them with the rows that were written, for tests of the shard
// writer and of its users (the advantage service).
//
// The reader is tools/reader/read.mjs under Node.js: apache-arrow reads
// Arrow IPC files and DuckDB (@duckdb/node-api) reads Parquet files, so no
// code is shared with the Go writer (arrow-go). `make tools` installs its
// node_modules (npm ci from the committed package-lock.json).
//
// Read runs the reader on local files (for S3, download them first) and
// decodes its JSON; File.Decode turns a file's rows back into shard.Rows;
// Compare and Diff check every value of every row: strings and bytes
// exactly, floats bit for bit (-0 included; any NaN equals any NaN), nulls
// against values. When node or the reader's node_modules are missing the
// calling test is skipped, except under CI=true where it fails.
package shardtest

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

// EnvNode names the environment variable that overrides the node binary.
const EnvNode = "CODAPIPE_NODE"

// readTimeout bounds one run of the reader.
const readTimeout = 5 * time.Minute

// File is one shard file as the independent reader saw it.
type File struct {
	// Path is the file read.
	Path string `json:"file"`
	// Format is "arrow" or "parquet".
	Format string `json:"format"`
	// Metadata is the Arrow schema metadata (Arrow files) or the Parquet
	// key-value metadata (Parquet files, which include the codapipe.* keys
	// and ARROW:schema).
	Metadata map[string]string `json:"metadata"`
	// Schema is the columns as the reader typed them (apache-arrow or DuckDB
	// type names).
	Schema []Field `json:"schema"`
	// NumRows is the number of rows.
	NumRows int `json:"num_rows"`
	// Rows are the rows, column name → value as the reader printed it.
	Rows []map[string]json.RawMessage `json:"rows"`
}

// Field is one column of File.Schema.
type Field struct {
	// Name is the column's name.
	Name string `json:"name"`
	// Type is the reader's name for the column's type.
	Type string `json:"type"`
	// Nullable is the Arrow field's nullability (always true for Parquet
	// files, whose DuckDB columns do not say).
	Nullable bool `json:"nullable"`
}

// Reader returns the node binary and the reader script, or an error saying
// what is missing and how to get it.
func Reader() (node, script string, err error) {
	node = os.Getenv(EnvNode)
	if node == "" {
		if node, err = exec.LookPath("node"); err != nil {
			return "", "", fmt.Errorf("node not found on PATH (install Node.js >= 20 or set %s)", EnvNode)
		}
	}
	root, err := repoRoot()
	if err != nil {
		return "", "", err
	}
	dir := filepath.Join(root, "tools", "reader")
	for _, p := range []string{"apache-arrow", "@duckdb/node-api"} {
		if _, err := os.Stat(filepath.Join(dir, "node_modules", p)); err != nil {
			return "", "", fmt.Errorf("%s is not installed in %s/node_modules: run make tools", p, dir)
		}
	}
	return node, filepath.Join(dir, "read.mjs"), nil
}

// repoRoot is the nearest directory above the working directory holding
// go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// Require skips the test when the reader is not installed, or fails it
// under CI=true.
func Require(t testing.TB) {
	t.Helper()
	if _, _, err := Reader(); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("shard reader not installed (CI=true, so this is a failure): %v", err)
		}
		t.Skipf("shard reader not installed: %v", err)
	}
}

// Read runs the independent reader on the files (local paths; ".arrow" or
// ".parquet") and returns what it read, one File per path in order. See
// Require for when it skips.
func Read(t testing.TB, files ...string) []File {
	t.Helper()
	Require(t)
	out, err := ReadFiles(context.Background(), files...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ReadFiles is Read without a test: it returns an error when the reader is
// missing or fails.
func ReadFiles(ctx context.Context, files ...string) ([]File, error) {
	if len(files) == 0 {
		return nil, nil
	}
	node, script, err := Reader()
	if err != nil {
		return nil, fmt.Errorf("shardtest: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, readTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, append([]string{script}, files...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("shardtest: %w", err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("shardtest: start %s: %w", node, err)
	}
	var out []File
	dec := json.NewDecoder(stdout)
	var decErr error
	for {
		var f File
		if err := dec.Decode(&f); err != nil {
			if !errors.Is(err, io.EOF) {
				decErr = err
				_, _ = io.Copy(io.Discard, stdout)
			}
			break
		}
		out = append(out, f)
	}
	if err := cmd.Wait(); err != nil {
		return nil, fmt.Errorf("shardtest: reader %s: %w\n%s", strings.Join(files, " "), err, stderr.String())
	}
	if decErr != nil {
		return nil, fmt.Errorf("shardtest: decode reader output: %w", decErr)
	}
	if len(out) != len(files) {
		return nil, fmt.Errorf("shardtest: reader printed %d files, want %d", len(out), len(files))
	}
	for i, f := range out {
		if len(f.Rows) != f.NumRows {
			return nil, fmt.Errorf("shardtest: %s: %d rows, num_rows %d", files[i], len(f.Rows), f.NumRows)
		}
	}
	return out, nil
}

// Meta returns the shard metadata of the file (see shard.ParseMeta) and the
// schema version.
func (f *File) Meta() (shard.Meta, int, error) {
	return shard.ParseMeta(f.Metadata)
}

// Decode converts the file's rows into shard.Rows. It fails when a row
// lacks a column of the schema or has one it does not know, when a value
// has the wrong JSON type, or when a non-nullable column is null.
func (f *File) Decode() ([]shard.Row, error) {
	rows := make([]shard.Row, len(f.Rows))
	for i, raw := range f.Rows {
		r, err := decodeRow(raw)
		if err != nil {
			return nil, fmt.Errorf("shardtest: %s: row %d: %w", f.Path, i, err)
		}
		rows[i] = r
	}
	return rows, nil
}

// Compare checks that the rows of got (concatenated in order) equal want,
// value by value, and reports every difference (up to 50) with its row and
// column.
func Compare(t testing.TB, want []shard.Row, got ...File) {
	t.Helper()
	var rows []shard.Row
	for i := range got {
		r, err := got[i].Decode()
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	diffs := Diff(want, rows)
	for i, d := range diffs {
		if i == 50 {
			t.Errorf("… and %d more differences", len(diffs)-50)
			break
		}
		t.Error(d)
	}
}

// decoder decodes one row's columns, keeping the first error.
type decoder struct {
	raw map[string]json.RawMessage
	err error
}

// value parses the column's JSON (numbers as json.Number).
func (d *decoder) value(col string) any {
	if d.err != nil {
		return nil
	}
	data, ok := d.raw[col]
	if !ok {
		d.err = fmt.Errorf("column %s: missing", col)
		return nil
	}
	var v any
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		d.err = fmt.Errorf("column %s: %w", col, err)
	}
	return v
}

func (d *decoder) fail(col string, format string, args ...any) {
	if d.err == nil {
		d.err = fmt.Errorf("column %s: "+format, append([]any{col}, args...)...)
	}
}

func (d *decoder) str(col string, v any) string {
	s, ok := v.(string)
	if !ok {
		d.fail(col, "want a string, got %T %v", v, v)
	}
	return s
}

func (d *decoder) i32(col string, v any) int32 {
	n, ok := v.(json.Number)
	if !ok {
		d.fail(col, "want an integer, got %T %v", v, v)
		return 0
	}
	x, err := strconv.ParseInt(string(n), 10, 32)
	if err != nil {
		d.fail(col, "%v", err)
	}
	return int32(x)
}

func (d *decoder) f64(col string, v any) float64 {
	switch v := v.(type) {
	case json.Number:
		x, err := strconv.ParseFloat(string(v), 64)
		if err != nil {
			d.fail(col, "%v", err)
		}
		return x
	case string:
		switch v {
		case "NaN":
			return math.NaN()
		case "Infinity":
			return math.Inf(1)
		case "-Infinity":
			return math.Inf(-1)
		}
	}
	d.fail(col, "want a float, got %T %v", v, v)
	return 0
}

func (d *decoder) boolean(col string, v any) bool {
	b, ok := v.(bool)
	if !ok {
		d.fail(col, "want a boolean, got %T %v", v, v)
	}
	return b
}

func (d *decoder) list(col string, v any) []any {
	l, ok := v.([]any)
	if !ok {
		d.fail(col, "want a list, got %T %v", v, v)
	}
	return l
}

func (d *decoder) object(col string, v any, keys ...string) map[string]any {
	o, ok := v.(map[string]any)
	if !ok {
		d.fail(col, "want a struct, got %T %v", v, v)
		return nil
	}
	if len(o) != len(keys) {
		d.fail(col, "struct has fields %v, want %v", mapKeys(o), keys)
	}
	for _, k := range keys {
		if _, ok := o[k]; !ok {
			d.fail(col, "struct has fields %v, want %v", mapKeys(o), keys)
		}
	}
	return o
}

func mapKeys(o map[string]any) []string {
	ks := make([]string, 0, len(o))
	for k := range o {
		ks = append(ks, k)
	}
	slices.Sort(ks)
	return ks
}

func (d *decoder) optF64(col string, v any) *float64 {
	if v == nil {
		return nil
	}
	x := d.f64(col, v)
	return &x
}

func (d *decoder) action(col string, v any) *shard.Action {
	if v == nil {
		return nil
	}
	o := d.object(col, v, "type", "x", "y", "end_x", "end_y", "text", "keys", "direction")
	if o == nil {
		return nil
	}
	a := &shard.Action{
		Type:      d.str(col+".type", o["type"]),
		X:         d.optF64(col+".x", o["x"]),
		Y:         d.optF64(col+".y", o["y"]),
		EndX:      d.optF64(col+".end_x", o["end_x"]),
		EndY:      d.optF64(col+".end_y", o["end_y"]),
		Text:      d.str(col+".text", o["text"]),
		Direction: d.str(col+".direction", o["direction"]),
	}
	keys := d.list(col+".keys", o["keys"])
	a.Keys = make([]string, len(keys))
	for i, k := range keys {
		a.Keys[i] = d.str(fmt.Sprintf("%s.keys[%d]", col, i), k)
	}
	return a
}

// decodeRow converts one row of the reader's output.
func decodeRow(raw map[string]json.RawMessage) (shard.Row, error) {
	cols := shard.Columns()
	known := make(map[string]bool, len(cols))
	for _, c := range cols {
		known[c.Name] = true
	}
	for name := range raw {
		if !known[name] {
			return shard.Row{}, fmt.Errorf("column %s: not in the schema", name)
		}
	}
	d := &decoder{raw: raw}
	str := func(col string) string { return d.str(col, d.value(col)) }
	i32 := func(col string) int32 { return d.i32(col, d.value(col)) }
	f64 := func(col string) float64 { return d.f64(col, d.value(col)) }
	boolean := func(col string) bool { return d.boolean(col, d.value(col)) }
	optI32 := func(col string) *int32 {
		v := d.value(col)
		if v == nil {
			return nil
		}
		x := d.i32(col, v)
		return &x
	}

	var r shard.Row
	r.Run = str("run")
	r.App = str("app")
	r.Task = str("task")
	r.TrajectoryID = str("trajectory_id")
	r.Sample = i32("sample")
	r.Step = i32("step")
	r.GroupID = str("group_id")
	r.Candidate = i32("candidate")
	r.GroupSize = i32("group_size")
	r.Prompt = str("prompt")
	msgs := d.list("messages", d.value("messages"))
	r.Messages = make([]shard.Message, len(msgs))
	for i, v := range msgs {
		col := fmt.Sprintf("messages[%d]", i)
		o := d.object(col, v, "role", "content")
		if o == nil {
			break
		}
		m := shard.Message{Role: d.str(col+".role", o["role"])}
		parts := d.list(col+".content", o["content"])
		m.Content = make([]shard.Part, len(parts))
		for k, pv := range parts {
			pc := fmt.Sprintf("%s.content[%d]", col, k)
			po := d.object(pc, pv, "type", "text", "image")
			if po == nil {
				break
			}
			p := shard.Part{Type: d.str(pc+".type", po["type"])}
			// The part of the other type is null; the one of the part's type is not.
			if p.Type == shard.PartImage {
				p.Image = d.str(pc+".image", po["image"])
				if po["text"] != nil {
					d.fail(pc+".text", "want null in an image part, got %v", po["text"])
				}
			} else {
				p.Text = d.str(pc+".text", po["text"])
				if po["image"] != nil {
					d.fail(pc+".image", "want null in a %s part, got %v", p.Type, po["image"])
				}
			}
			m.Content[k] = p
		}
		r.Messages[i] = m
	}
	images := d.list("images", d.value("images"))
	r.Images = make([]shard.Image, len(images))
	for i, v := range images {
		col := fmt.Sprintf("images[%d]", i)
		o := d.object(col, v, "sha256", "width", "height", "bytes", "path")
		if o == nil {
			break
		}
		im := shard.Image{
			SHA256: d.str(col+".sha256", o["sha256"]),
			Width:  d.i32(col+".width", o["width"]),
			Height: d.i32(col+".height", o["height"]),
		}
		if b := o["bytes"]; b != nil {
			var err error
			if im.Bytes, err = base64.StdEncoding.DecodeString(d.str(col+".bytes", b)); err != nil {
				d.fail(col+".bytes", "base64: %v", err)
			}
			if im.Bytes == nil {
				im.Bytes = []byte{}
			}
		}
		if p := o["path"]; p != nil {
			im.Path = d.str(col+".path", p)
		}
		r.Images[i] = im
	}
	r.Completion = str("completion")
	r.PromptTokens = optI32("prompt_tokens")
	r.PromptTokenIDs = d.ids("prompt_token_ids")
	r.CompletionTokens = optI32("completion_tokens")
	if v := d.value("logprobs"); v != nil {
		l := d.list("logprobs", v)
		r.LogProbs = make([]float64, len(l))
		for i, x := range l {
			r.LogProbs[i] = d.f64(fmt.Sprintf("logprobs[%d]", i), x)
		}
	}
	r.CompletionTokenIDs = d.ids("completion_token_ids")
	r.FinishReason = str("finish_reason")
	r.Action = d.action("action", d.value("action"))
	r.ActionText = str("action_text")
	r.Reference = d.action("reference", d.value("reference"))
	r.ReferenceText = str("reference_text")
	r.Reward = f64("reward")
	r.RewardTypeMatch = f64("reward_type_match")
	r.RewardDist = f64("reward_dist")
	r.Unparsed = boolean("unparsed")
	r.Advantage = f64("advantage")
	r.GroupMean = f64("group_mean")
	r.GroupStd = f64("group_std")
	r.GroupScale = f64("group_scale")
	r.ZeroVariance = boolean("zero_variance")
	r.DroppedReason = str("dropped_reason")
	r.LossWeight = f64("loss_weight")
	r.LabelSource = str("label_source")
	r.Label = str("label")
	r.PolicyModel = str("policy_model")
	r.PolicyCheckpoint = str("policy_checkpoint")
	r.ExecutorModel = str("executor_model")
	r.ExecutorCheckpoint = str("executor_checkpoint")
	r.ExecutorCoords = str("executor_coords")
	r.PromptSet = str("prompt_set")
	if v := d.value("sampling"); v != nil {
		smp := d.str("sampling", v)
		r.Sampling = &smp
	}
	r.JudgeVersion = str("judge_version")
	return r, d.err
}

// ids decodes a nullable list of token ids (nil for null).
func (d *decoder) ids(col string) []int32 {
	v := d.value(col)
	if v == nil {
		return nil
	}
	l := d.list(col, v)
	out := make([]int32, len(l))
	for i, x := range l {
		out[i] = d.i32(fmt.Sprintf("%s[%d]", col, i), x)
	}
	return out
}
