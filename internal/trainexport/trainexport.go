// Package trainexport turns a shard set (read through its manifest) into
// the input files of the RL trainers users run:
//
//   - verl (volcengine/verl): a Parquet file that verl's RLHFDataset
//     (verl/utils/dataset/rl_dataset.py) reads: "prompt" a list of chat
//     messages whose string content holds one "<image>" placeholder per
//     image, "images" a list of {"bytes", "path"} (vision_utils.process_image
//     opens "bytes"), "data_source", "reward_model" {"style",
//     "ground_truth"} and "extra_info" {"index", …}, as verl's example
//     preprocessors (examples/data_preprocess/geo3k.py) write them.
//   - OpenRLHF: JSON Lines that OpenRLHF's PromptDataset
//     (openrlhf/datasets/prompts_dataset.py) reads: the chat messages under
//     --data.input_key (default "input"; with --data.apply_chat_template
//     "<image>" tags in string content become image parts), the label under
//     --data.label_key, the images under --data.image_key (default
//     "images"; openrlhf/utils/vlm_utils.py load_images opens paths, URLs or
//     base64 data URIs) and "datasource".
//
// Every shard row (one candidate) becomes one trainer row; everything else
// the row holds (ids, advantage, reward, group, token ids, log-probs,
// sampling, provenance) goes along (verl: extra_info; OpenRLHF: the
// "codapipe" object), so nothing is lost. docs/shards.md lists the fields
// and the trainer command lines that consume them.
package trainexport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/prompt"
	"github.com/codapipe/codapipe/internal/shard"
)

// Format is a trainer's input format.
type Format string

// Formats.
const (
	// FormatVerl is verl's RL dataset: Parquet, file DataFile(FormatVerl).
	FormatVerl Format = "verl"
	// FormatOpenRLHF is OpenRLHF's prompt dataset: JSON Lines.
	FormatOpenRLHF Format = "openrlhf"
)

// DataFile returns the name of the data file a format writes in the
// output folder: "train.parquet" (verl) or "train.jsonl" (OpenRLHF).
func DataFile(f Format) string {
	if f == FormatVerl {
		return "train.parquet"
	}
	return "train.jsonl"
}

// ImagePlaceholder is the tag that stands for one image in a message's
// string content, for both trainers.
const ImagePlaceholder = "<image>"

// DefaultDataSource is the default Config.DataSource.
const DefaultDataSource = "codapipe/scienceboard"

// ManifestName is the name of the export's manifest in the output folder.
const ManifestName = "manifest.json"

// Config configures Export.
type Config struct {
	// Bucket holds the shard set; Prefix is the folder of its manifest.
	Bucket blob.Bucket
	Prefix string
	// Store is the blob store the screenshots the set does not carry
	// (neither embedded nor image files: --images store) are read from.
	// Required only for such a set.
	Store *blob.Store
	// Out is the local folder the export is written to; it is created
	// (0755 less the umask) and its files are 0644 less the umask.
	Out string
	// Format is FormatVerl or FormatOpenRLHF.
	Format Format
	// DataSource is every row's data source ("data_source" for verl,
	// "datasource" for OpenRLHF); default DefaultDataSource, to which
	// "/<app>" is appended so that per-source metrics split by application.
	DataSource string
	// TempDir is where shard files of a remote set are downloaded
	// (default os.TempDir()).
	TempDir string
	// Log receives progress (default slog.Default()).
	Log *slog.Logger
}

// Manifest describes an export: what it was made from and its files,
// with paths relative to the manifest's folder.
type Manifest struct {
	// Format is the trainer format.
	Format Format `json:"format"`
	// Created is when the export was written.
	Created time.Time `json:"created"`
	// Source is the shard set's manifest: its set name, schema version and
	// meta, as read.
	Source Source `json:"source"`
	// Rows is the number of rows written.
	Rows int `json:"rows"`
	// Files are the files written.
	Files []File `json:"files"`
}

// Source is the shard set an export was made from.
type Source struct {
	// Set is the set's name as its manifest records it.
	Set string `json:"set"`
	// SchemaVersion is the set's schema version.
	SchemaVersion int `json:"schema_version"`
	// Meta is the set's meta (estimator, mode, …).
	Meta shard.Meta `json:"meta"`
	// TokenData is the set's token-data counts.
	TokenData shard.TokenData `json:"token_data"`
}

// File is one file of an export.
type File struct {
	// Path is relative to the export's folder.
	Path string `json:"path"`
	// Rows is the number of rows it holds.
	Rows int `json:"rows"`
	// Bytes is its size.
	Bytes int64 `json:"bytes"`
	// SHA256 is the lower-case hex SHA-256 of its content.
	SHA256 string `json:"sha256"`
}

// Export reads the shard set cfg.Bucket/cfg.Prefix through its manifest
// and writes it in cfg.Format to cfg.Out: the data file and a manifest.
func Export(ctx context.Context, cfg Config) (*Manifest, error) {
	if cfg.Format != FormatVerl && cfg.Format != FormatOpenRLHF {
		return nil, fmt.Errorf("trainexport: format %q, want %q or %q", cfg.Format, FormatVerl, FormatOpenRLHF)
	}
	if cfg.Out == "" {
		return nil, errors.New("trainexport: no output folder")
	}
	if cfg.DataSource == "" {
		cfg.DataSource = DefaultDataSource
	}
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Log == nil {
		cfg.Log = slog.Default()
	}
	sm, err := shard.ReadManifest(ctx, cfg.Bucket, cfg.Prefix)
	if err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	if err := sm.Validate(); err != nil {
		return nil, fmt.Errorf("trainexport: shard set %s: %w", shard.ManifestKey(cfg.Prefix), err)
	}
	if sm.SchemaVersion < 2 {
		return nil, fmt.Errorf("trainexport: shard set %s has schema version %d: it has no messages column (re-run advantage to write schema %d)", cfg.Prefix, sm.SchemaVersion, shard.SchemaVersion)
	}
	if err := os.MkdirAll(cfg.Out, blob.DirPerm); err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	name := DataFile(cfg.Format)
	final := filepath.Join(cfg.Out, name)
	partial := final + ".partial"
	f, err := os.OpenFile(partial, os.O_RDWR|os.O_CREATE|os.O_TRUNC, blob.FilePerm)
	if err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	defer os.Remove(partial) // after a failure; a no-op after the rename
	h := sha256.New()
	cw := &countWriter{w: io.MultiWriter(f, h)}
	var sink rowSink
	if cfg.Format == FormatVerl {
		sink, err = newVerlSink(cw)
	} else {
		sink = newOpenRLHFSink(cw)
	}
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	ex := &exporter{cfg: cfg, sink: sink, images: map[string][]byte{}}
	for _, sf := range sm.Files {
		if err := ex.file(ctx, sf); err != nil {
			sink.abort()
			f.Close()
			return nil, err
		}
	}
	if err := sink.close(); err != nil {
		f.Close()
		return nil, fmt.Errorf("trainexport: %s: %w", name, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, fmt.Errorf("trainexport: %s: %w", name, err)
	}
	if err := f.Close(); err != nil {
		return nil, fmt.Errorf("trainexport: %s: %w", name, err)
	}
	if err := os.Rename(partial, final); err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	m := &Manifest{
		Format: cfg.Format, Created: time.Now().UTC(),
		Source: Source{Set: sm.Set, SchemaVersion: sm.SchemaVersion, Meta: sm.Meta, TokenData: sm.TokenData},
		Rows:   ex.index,
		Files:  []File{{Path: name, Rows: ex.index, Bytes: cw.n, SHA256: hex.EncodeToString(h.Sum(nil))}},
	}
	body, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	mpath := filepath.Join(cfg.Out, ManifestName)
	if err := os.WriteFile(mpath+".partial", append(body, '\n'), blob.FilePerm); err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	if err := os.Rename(mpath+".partial", mpath); err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	cfg.Log.Info("trainexport: written", "format", cfg.Format, "rows", ex.index, "file", final)
	return m, nil
}

// countWriter counts the bytes written through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// exporter converts the rows of one export.
type exporter struct {
	cfg    Config
	sink   rowSink
	index  int               // rows written
	group  string            // group of the rows whose images are cached
	images map[string][]byte // screenshots read for the current group
}

// file converts the rows of one shard file, downloaded first when the
// bucket is not a local folder.
func (ex *exporter) file(ctx context.Context, sf shard.File) error {
	tmp, err := os.CreateTemp(ex.cfg.TempDir, "codapipe-export-*"+sf.Format.Ext())
	if err != nil {
		return fmt.Errorf("trainexport: %w", err)
	}
	defer os.Remove(tmp.Name())
	rc, _, err := ex.cfg.Bucket.Get(ctx, sf.Key)
	if err != nil {
		tmp.Close()
		return fmt.Errorf("trainexport: %s: %w", sf.Key, err)
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(tmp, h), rc)
	rc.Close()
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("trainexport: %s: %w", sf.Key, err)
	}
	// The manifest's size and SHA-256 are the file's contract, whether or
	// not the bucket recorded a checksum of its own (a copied set).
	if got := hex.EncodeToString(h.Sum(nil)); (sf.Bytes > 0 && n != sf.Bytes) || (sf.SHA256 != "" && got != sf.SHA256) {
		return fmt.Errorf("trainexport: shard file %s is damaged: %d bytes with SHA-256 %s, the manifest says %d bytes with SHA-256 %s: %w",
			sf.Key, n, got, sf.Bytes, sf.SHA256, blob.ErrChecksumMismatch)
	}
	return shard.ReadFile(ctx, tmp.Name(), sf.Format, func(r *shard.Row) error {
		if err := ex.row(ctx, r); err != nil {
			return fmt.Errorf("trainexport: %s: trajectory %s step %d candidate %d: %w", sf.Key, r.TrajectoryID, r.Step, r.Candidate, err)
		}
		return nil
	})
}

// row converts and writes one shard row.
func (ex *exporter) row(ctx context.Context, r *shard.Row) error {
	msgs, err := Flatten(r.Messages, r.Images)
	if err != nil {
		return err
	}
	if r.GroupID != ex.group {
		ex.group = r.GroupID
		clear(ex.images)
	}
	imgs := make([][]byte, len(r.Images))
	for i, im := range r.Images {
		if b := ex.images[im.SHA256]; b != nil {
			imgs[i] = b
			continue
		}
		// The set's own copy first (embedded, or its image file), the
		// blob store only for a set that references it.
		b, err := shard.ReadImage(ctx, ex.cfg.Bucket, ex.cfg.Prefix, im)
		switch {
		case errors.Is(err, shard.ErrImageNotInSet) && ex.cfg.Store == nil:
			return fmt.Errorf("image %s is not in the set and no blob store was given", im.SHA256)
		case errors.Is(err, shard.ErrImageNotInSet):
			b, err = ex.cfg.Store.GetBytes(ctx, im.SHA256)
		}
		if err != nil {
			return fmt.Errorf("image %s: %w", im.SHA256, err)
		}
		if im.Bytes == nil {
			ex.images[im.SHA256] = b
		}
		imgs[i] = b
	}
	out := &Row{
		DataSource: ex.cfg.DataSource + "/" + r.App,
		Prompt:     msgs,
		Images:     imgs,
		Ability:    "gui-agent",
		Style:      "rule",
		Label:      r.ReferenceText,
		Extra:      extra(ex.index, r),
	}
	if err := ex.sink.add(out); err != nil {
		return err
	}
	ex.index++
	return nil
}

// Message is a chat message with string content, "<image>" standing for
// each image in order: the form both trainers' loaders take.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Flatten converts a row's nested messages to messages with string
// content: text parts as they are, each image part as ImagePlaceholder.
// The image parts must name the row's images in order; a text part that
// holds the placeholder itself would shift the images and is an error.
func Flatten(msgs []shard.Message, images []shard.Image) ([]Message, error) {
	if len(msgs) == 0 {
		return nil, errors.New("no messages")
	}
	out := make([]Message, len(msgs))
	k := 0
	for i, m := range msgs {
		var b strings.Builder
		for _, p := range m.Content {
			switch p.Type {
			case shard.PartText:
				if strings.Contains(p.Text, ImagePlaceholder) {
					return nil, fmt.Errorf("message %d: text holds %q, which the trainer would take for an image", i, ImagePlaceholder)
				}
				b.WriteString(p.Text)
			case shard.PartImage:
				if k >= len(images) || p.Image != prompt.RefScheme+images[k].SHA256 {
					return nil, fmt.Errorf("message %d: image %q is not the row's image %d", i, p.Image, k)
				}
				k++
				b.WriteString(ImagePlaceholder)
			default:
				return nil, fmt.Errorf("message %d: part type %q", i, p.Type)
			}
		}
		out[i] = Message{Role: m.Role, Content: b.String()}
	}
	if k != len(images) {
		return nil, fmt.Errorf("the messages show %d images, the row has %d", k, len(images))
	}
	return out, nil
}

// Row is one trainer row before it is written in a format.
type Row struct {
	DataSource string
	Prompt     []Message
	Images     [][]byte // PNG bytes, in placeholder order
	Ability    string
	Style      string // reward_model.style
	Label      string // reward_model.ground_truth (verl), the label (OpenRLHF)
	Extra      Extra
}

// Extra is what a trainer row carries besides what the loader reads: the
// shard row's ids, reward, advantage and group, token-level data, sampling
// and provenance (verl: extra_info; OpenRLHF: "codapipe"). Field names are
// the shard columns' (docs/shards.md), and Index is verl's extra_info.index.
type Extra struct {
	Index              int64     `json:"index"`
	Split              string    `json:"split"`
	Run                string    `json:"run"`
	App                string    `json:"app"`
	Task               string    `json:"task"`
	TrajectoryID       string    `json:"trajectory_id"`
	Sample             int32     `json:"sample"`
	Step               int32     `json:"step"`
	Candidate          int32     `json:"candidate"`
	GroupID            string    `json:"group_id"`
	GroupSize          int32     `json:"group_size"`
	Completion         string    `json:"completion"`
	ActionText         string    `json:"action_text"`
	ReferenceText      string    `json:"reference_text"`
	Reward             float64   `json:"reward"`
	Advantage          float64   `json:"advantage"`
	GroupMean          float64   `json:"group_mean"`
	GroupStd           float64   `json:"group_std"`
	GroupScale         float64   `json:"group_scale"`
	ZeroVariance       bool      `json:"zero_variance"`
	LossWeight         float64   `json:"loss_weight"`
	Label              string    `json:"label"`
	LabelSource        string    `json:"label_source"`
	Unparsed           bool      `json:"unparsed"`
	PromptTokens       *int32    `json:"prompt_tokens"`
	CompletionTokens   *int32    `json:"completion_tokens"`
	CompletionTokenIDs []int32   `json:"completion_token_ids"`
	LogProbs           []float64 `json:"logprobs"`
	FinishReason       string    `json:"finish_reason"`
	Sampling           *string   `json:"sampling"`
	PolicyModel        string    `json:"policy_model"`
	PolicyCheckpoint   string    `json:"policy_checkpoint"`
	JudgeVersion       string    `json:"judge_version"`
	ImageSHA256        []string  `json:"image_sha256"`
}

// extra fills Extra from a shard row.
func extra(index int, r *shard.Row) Extra {
	e := Extra{
		Index: int64(index), Split: "train", Run: r.Run, App: r.App, Task: r.Task, TrajectoryID: r.TrajectoryID,
		Sample: r.Sample, Step: r.Step, Candidate: r.Candidate, GroupID: r.GroupID, GroupSize: r.GroupSize,
		Completion: r.Completion, ActionText: r.ActionText, ReferenceText: r.ReferenceText,
		Reward: r.Reward, Advantage: r.Advantage, GroupMean: r.GroupMean, GroupStd: r.GroupStd, GroupScale: r.GroupScale,
		ZeroVariance: r.ZeroVariance, LossWeight: r.LossWeight, Label: r.Label, LabelSource: r.LabelSource, Unparsed: r.Unparsed,
		PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens,
		CompletionTokenIDs: r.CompletionTokenIDs, LogProbs: r.LogProbs, FinishReason: r.FinishReason, Sampling: r.Sampling,
		PolicyModel: r.PolicyModel, PolicyCheckpoint: r.PolicyCheckpoint, JudgeVersion: r.JudgeVersion,
		ImageSHA256: make([]string, len(r.Images)),
	}
	for i, im := range r.Images {
		e.ImageSHA256[i] = im.SHA256
	}
	return e
}

// rowSink writes rows in one format.
type rowSink interface {
	add(r *Row) error
	close() error // finishes the output
	abort()       // releases what it holds after a failure
}

// openRLHFSink writes OpenRLHF's JSON Lines.
type openRLHFSink struct {
	w   *bufio.Writer
	enc *json.Encoder
}

func newOpenRLHFSink(w io.Writer) *openRLHFSink {
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &openRLHFSink{w: bw, enc: enc}
}

// OpenRLHFRow is one line of the OpenRLHF export. Input, Label, Images and
// DataSource are what PromptDataset reads (with --data.input_key input
// --data.label_key label --data.image_key images); Codapipe is the rest.
type OpenRLHFRow struct {
	Input      []Message `json:"input"`
	Label      string    `json:"label"`
	Images     []string  `json:"images"` // data:image/png;base64,… URIs
	DataSource string    `json:"datasource"`
	Codapipe   Extra     `json:"codapipe"`
}

func (s *openRLHFSink) add(r *Row) error {
	line := OpenRLHFRow{Input: r.Prompt, Label: r.Label, Images: make([]string, len(r.Images)), DataSource: r.DataSource, Codapipe: r.Extra}
	for i, b := range r.Images {
		line.Images[i] = "data:image/png;base64," + base64.StdEncoding.EncodeToString(b)
	}
	return s.enc.Encode(line)
}

func (s *openRLHFSink) close() error { return s.w.Flush() }
func (s *openRLHFSink) abort()       {}

// verlBatchRows is the rows of one Parquet row group of the verl export.
const verlBatchRows = 64

// VerlSchema is the Arrow schema of the verl export's Parquet file.
var VerlSchema = func() *arrow.Schema {
	str, i32, i64, f64 := arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64
	b := arrow.FixedWidthTypes.Boolean
	f := func(name string, t arrow.DataType, nullable bool) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: nullable}
	}
	extra := arrow.StructOf(
		f("index", i64, false), f("split", str, false), f("run", str, false), f("app", str, false), f("task", str, false),
		f("trajectory_id", str, false), f("sample", i32, false), f("step", i32, false), f("candidate", i32, false),
		f("group_id", str, false), f("group_size", i32, false), f("completion", str, false),
		f("action_text", str, false), f("reference_text", str, false),
		f("reward", f64, false), f("advantage", f64, false), f("group_mean", f64, false), f("group_std", f64, false),
		f("group_scale", f64, false), f("zero_variance", b, false), f("loss_weight", f64, false),
		f("label", str, false), f("label_source", str, false), f("unparsed", b, false),
		f("prompt_tokens", i32, true), f("completion_tokens", i32, true),
		f("completion_token_ids", arrow.ListOfNonNullable(i32), true), f("logprobs", arrow.ListOfNonNullable(f64), true),
		f("finish_reason", str, false), f("sampling", str, true),
		f("policy_model", str, false), f("policy_checkpoint", str, false), f("judge_version", str, false),
		f("image_sha256", arrow.ListOfNonNullable(str), false),
	)
	return arrow.NewSchema([]arrow.Field{
		f("data_source", str, false),
		f("prompt", arrow.ListOfNonNullable(arrow.StructOf(f("role", str, false), f("content", str, false))), false),
		f("images", arrow.ListOfNonNullable(arrow.StructOf(f("bytes", arrow.BinaryTypes.Binary, true), f("path", str, true))), false),
		f("ability", str, false),
		f("reward_model", arrow.StructOf(f("style", str, false), f("ground_truth", str, false)), false),
		f("extra_info", extra, false),
	}, nil)
}()

// verlSink writes verl's Parquet: rows are collected as JSON objects of the
// schema and turned into a record batch (arrow's JSON reader) per row
// group.
type verlSink struct {
	w       *pqarrow.FileWriter
	pending bytes.Buffer
	n       int
}

func newVerlSink(w io.Writer) (*verlSink, error) {
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd),
		parquet.WithCompressionFor("images.list.element.bytes", compress.Codecs.Uncompressed))
	pw, err := pqarrow.NewFileWriter(VerlSchema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	return &verlSink{w: pw}, nil
}

// verlImage is one element of the images column: Hugging Face datasets'
// Image storage, which verl's process_image opens by "bytes".
type verlImage struct {
	Bytes []byte  `json:"bytes"`
	Path  *string `json:"path"`
}

func (s *verlSink) add(r *Row) error {
	imgs := make([]verlImage, len(r.Images))
	for i, b := range r.Images {
		imgs[i] = verlImage{Bytes: b}
	}
	obj := map[string]any{
		"data_source":  r.DataSource,
		"prompt":       r.Prompt,
		"images":       imgs,
		"ability":      r.Ability,
		"reward_model": map[string]string{"style": r.Style, "ground_truth": r.Label},
		"extra_info":   r.Extra,
	}
	if s.n == 0 {
		s.pending.WriteByte('[')
	} else {
		s.pending.WriteByte(',')
	}
	enc := json.NewEncoder(&s.pending)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(obj); err != nil {
		return err
	}
	s.n++
	if s.n >= verlBatchRows {
		return s.flush()
	}
	return nil
}

// flush writes the pending rows as one row group.
func (s *verlSink) flush() error {
	if s.n == 0 {
		return nil
	}
	s.pending.WriteByte(']')
	rec, _, err := array.RecordFromJSON(memory.DefaultAllocator, VerlSchema, &s.pending)
	s.pending.Reset()
	s.n = 0
	if err != nil {
		return fmt.Errorf("verl rows: %w", err)
	}
	defer rec.Release()
	return s.w.Write(rec)
}

func (s *verlSink) close() error {
	if err := s.flush(); err != nil {
		return err
	}
	return s.w.Close()
}

func (s *verlSink) abort() { _ = s.w.Close() }
