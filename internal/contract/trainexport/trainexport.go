// Package trainexport turns a shard set (read through its manifest) into
// the input files of the trainers users run:
//
//   - jsonl: codapipe's own JSON Lines, one line per candidate (shard row):
//     everything an offline decoupled-GRPO trainer trains on (token ids,
//     behaviour log-probs, advantage, loss weight, group), images by path.
//     The reference trainer (trainer/ in the repository) reads it.
//   - verl (volcengine/verl): Parquet files that verl's RLHFDataset
//     (verl/utils/dataset/rl_dataset.py) reads: "prompt" a list of chat
//     messages whose string content holds one "<image>" placeholder per
//     image, "images" a list of {"image": path} (vision_utils.process_image
//     hands a dict without "bytes" to qwen_vl_utils.fetch_image, which
//     opens a local path), "data_source", "reward_model" {"style",
//     "ground_truth"} and "extra_info" {"index", …}.
//   - OpenRLHF: JSON Lines that OpenRLHF's PromptDataset
//     (openrlhf/datasets/prompts_dataset.py) reads: the chat messages under
//     --data.input_key, the label under --data.label_key, image paths under
//     --data.image_key (openrlhf/utils/vlm_utils.py load_images opens
//     them) and "datasource".
//
// Online trainers (verl, OpenRLHF) generate their own responses, so they
// get one row per group (per step prompt), not one per candidate, with a
// validation split; the label names the group for the reward service.
// Images are written once per distinct SHA-256 under <out>/images/.
// docs/shards.md lists the fields and the trainer command lines.
package trainexport

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// Format is a trainer's input format.
type Format string

// Formats.
const (
	// FormatJSONL is codapipe's candidate rows: JSON Lines, one line per
	// shard row (CandidateRow).
	FormatJSONL Format = "jsonl"
	// FormatVerl is verl's RL dataset: Parquet, one row per group.
	FormatVerl Format = "verl"
	// FormatOpenRLHF is OpenRLHF's prompt dataset: JSON Lines, one row per
	// group.
	FormatOpenRLHF Format = "openrlhf"
)

// Formats are the formats Export writes.
var Formats = []Format{FormatJSONL, FormatVerl, FormatOpenRLHF}

// Splits of the per-group formats.
const (
	SplitTrain = "train"
	SplitVal   = "val"
)

// DataFile returns the name of the file a format writes in the output
// folder for a split: "candidates.jsonl" (jsonl, which has no split),
// "<split>.parquet" (verl) or "<split>.jsonl" (OpenRLHF).
func DataFile(f Format, split string) string {
	switch f {
	case FormatJSONL:
		return "candidates.jsonl"
	case FormatVerl:
		return split + ".parquet"
	}
	return split + ".jsonl"
}

// ImagePlaceholder is the tag that stands for one image in a message's
// string content, for both trainers (prompt.ImagePlaceholder: Flatten
// writes it with prompt.Flatten).
const ImagePlaceholder = prompt.ImagePlaceholder

// DefaultDataSource is the default Config.DataSource.
const DefaultDataSource = "codapipe/scienceboard"

// DefaultValFraction is the default Config.ValFraction.
const DefaultValFraction = 0.05

// ManifestName is the name of the export's manifest in the output folder.
const ManifestName = "manifest.json"

// ImageDir is the folder of the images in the output folder: the layout
// of a shard set's image files (shard.ImagesDir).
const ImageDir = shard.ImagesDir

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
	// Format is one of Formats.
	Format Format
	// DataSource is every row's data source ("data_source" for verl,
	// "datasource" for OpenRLHF); default DefaultDataSource, to which
	// "/<app>" is appended so that per-source metrics split by application.
	DataSource string
	// ValFraction is the share of trajectories (outcome mode: of groups)
	// whose groups go to the val split (verl and OpenRLHF; 0: no val file).
	// The split is decided by the SHA-256 of the trajectory id (outcome
	// mode: the group id), so a group never straddles splits and the same
	// set always splits the same way.
	ValFraction float64
	// ImageRoot is the folder the rows of verl and OpenRLHF name their
	// images in: default the absolute path of Out/images (the trainers open
	// paths relative to their own working folder). Set it when the export
	// is read from another place than where it is written.
	ImageRoot string
	// TempDir is where shard files of a remote set are downloaded
	// (default os.TempDir()).
	TempDir string
	// Version is the codapipe build that writes the export, recorded in
	// the manifest (service.Version().String()).
	Version string
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
	// Version is the codapipe build that wrote the export (Config.Version;
	// Source.Meta.Version is the one that wrote the set).
	Version string `json:"codapipe_version,omitempty"`
	// Source is the shard set's manifest: its set name, schema version and
	// meta, as read.
	Source Source `json:"source"`
	// Rows is the number of rows written, over every data file.
	Rows int `json:"rows"`
	// ValFraction is the share of trajectories asked for the val split
	// (per-group formats).
	ValFraction float64 `json:"val_fraction,omitempty"`
	// ImageRoot is the folder the rows name their images in ("" for the
	// jsonl format, whose image paths are relative to the manifest).
	ImageRoot string `json:"image_root,omitempty"`
	// Files are the data files written, then the images (Rows 0).
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
	// Split is the data file's split ("train", "val"; "" for the jsonl
	// format and for images).
	Split string `json:"split,omitempty"`
	// Rows is the number of rows it holds.
	Rows int `json:"rows"`
	// Bytes is its size.
	Bytes int64 `json:"bytes"`
	// SHA256 is the lower-case hex SHA-256 of its content.
	SHA256 string `json:"sha256"`
}

// DataFiles are the manifest's data files (not the images).
func (m *Manifest) DataFiles() []File {
	var out []File
	for _, f := range m.Files {
		if !strings.HasPrefix(f.Path, ImageDir+"/") {
			out = append(out, f)
		}
	}
	return out
}

// Export reads the shard set cfg.Bucket/cfg.Prefix through its manifest
// and writes it in cfg.Format to cfg.Out: the data files, the images and
// a manifest, written last.
func Export(ctx context.Context, cfg Config) (*Manifest, error) {
	if !slices.Contains(Formats, cfg.Format) {
		return nil, fmt.Errorf("trainexport: format %q, want one of %v", cfg.Format, Formats)
	}
	if cfg.Out == "" {
		return nil, errors.New("trainexport: no output folder")
	}
	if cfg.ValFraction < 0 || cfg.ValFraction >= 1 || math.IsNaN(cfg.ValFraction) {
		return nil, fmt.Errorf("trainexport: val fraction %g, want 0 <= f < 1", cfg.ValFraction)
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
	if err := os.MkdirAll(filepath.Join(cfg.Out, ImageDir), blob.DirPerm); err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	if cfg.Format != FormatJSONL && cfg.ImageRoot == "" {
		abs, err := filepath.Abs(filepath.Join(cfg.Out, ImageDir))
		if err != nil {
			return nil, fmt.Errorf("trainexport: %w", err)
		}
		cfg.ImageRoot = abs
	}
	ex := &exporter{cfg: cfg, set: sm.Set, mode: sm.Meta.Mode, images: newImageWriter(cfg.Out, cfg.Bucket, cfg.Prefix, cfg.Store), seen: map[groupKey]bool{}}
	defer ex.abort() // after a failure; a no-op after close
	splits := []string{SplitTrain}
	if cfg.Format == FormatJSONL {
		splits = []string{""}
	} else if cfg.ValFraction > 0 {
		splits = append(splits, SplitVal)
	}
	ex.outs = map[string]*output{}
	for _, split := range splits {
		o, err := newOutput(cfg.Out, cfg.Format, split)
		if err != nil {
			return nil, err
		}
		ex.outs[split] = o
		ex.order = append(ex.order, o)
	}
	for _, sf := range sm.Files {
		if err := ex.file(ctx, sf); err != nil {
			return nil, err
		}
	}
	if err := ex.flushGroup(ctx); err != nil {
		return nil, err
	}
	if err := ex.images.wait(); err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	m := &Manifest{
		Format: cfg.Format, Created: time.Now().UTC(), Version: cfg.Version,
		Source: Source{Set: sm.Set, SchemaVersion: sm.SchemaVersion, Meta: sm.Meta, TokenData: sm.TokenData},
	}
	if cfg.Format != FormatJSONL {
		m.ValFraction, m.ImageRoot = cfg.ValFraction, cfg.ImageRoot
	}
	for _, o := range ex.order {
		f, err := o.close()
		if err != nil {
			return nil, err
		}
		m.Files = append(m.Files, f)
		m.Rows += f.Rows
	}
	m.Files = append(m.Files, ex.images.files...)
	if o := ex.outs[SplitVal]; o != nil && o.rows == 0 {
		cfg.Log.Warn("trainexport: the val split is empty (too few trajectories for the fraction)", "val_fraction", cfg.ValFraction)
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
	cfg.Log.Info("trainexport: written", "format", cfg.Format, "rows", m.Rows, "images", len(ex.images.files), "folder", cfg.Out)
	return m, nil
}

// output is one data file being written: to a ".partial" file renamed
// into place when closed.
type output struct {
	split, name, final string
	f                  *os.File
	h                  hash.Hash
	cw                 *countWriter
	sink               rowSink
	rows               int
	done               bool
}

func newOutput(dir string, format Format, split string) (*output, error) {
	name := DataFile(format, split)
	o := &output{split: split, name: name, final: filepath.Join(dir, name), h: sha256.New()}
	f, err := os.OpenFile(o.final+".partial", os.O_RDWR|os.O_CREATE|os.O_TRUNC, blob.FilePerm)
	if err != nil {
		return nil, fmt.Errorf("trainexport: %w", err)
	}
	o.f = f
	o.cw = &countWriter{w: io.MultiWriter(f, o.h)}
	if format == FormatVerl {
		o.sink, err = newVerlSink(o.cw)
	} else {
		o.sink = newJSONLinesSink(o.cw)
	}
	if err != nil {
		f.Close()
		os.Remove(f.Name())
		return nil, fmt.Errorf("trainexport: %s: %w", name, err)
	}
	return o, nil
}

// add writes one row.
func (o *output) add(v any) error {
	if err := o.sink.add(v); err != nil {
		return fmt.Errorf("%s: %w", o.name, err)
	}
	o.rows++
	return nil
}

// close finishes the file, syncs it and renames it into place.
func (o *output) close() (File, error) {
	o.done = true
	err := o.sink.close()
	if err == nil {
		err = o.f.Sync()
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.final+".partial", o.final)
	}
	if err != nil {
		os.Remove(o.final + ".partial")
		return File{}, fmt.Errorf("trainexport: %s: %w", o.name, err)
	}
	return File{Path: o.name, Split: o.split, Rows: o.rows, Bytes: o.cw.n, SHA256: hex.EncodeToString(o.h.Sum(nil))}, nil
}

// abort drops the file after a failure.
func (o *output) abort() {
	if o.done {
		return
	}
	o.done = true
	o.sink.abort()
	o.f.Close()
	os.Remove(o.final + ".partial")
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

// groupKey is what one row of a per-group format stands for: a group's
// step prompt. In step mode a group is one step of one trajectory; in
// outcome mode a group spans trajectories and each of its rows has its own
// prompt, so the trajectory and step are part of the key.
type groupKey struct {
	group, trajectory string
	step              int32
}

// exporter converts the rows of one export.
type exporter struct {
	cfg    Config
	set    string
	mode   string             // the set's mode (shard.ModeStep, shard.ModeOutcome)
	outs   map[string]*output // by split ("" for jsonl)
	order  []*output
	images *imageWriter
	index  int               // rows written
	seen   map[groupKey]bool // groups written (per-group formats)
	group  []*shard.Row      // rows of the group being collected
}

// abort drops the partial data files.
func (ex *exporter) abort() {
	_ = ex.images.wait() // no image write outlives Export
	for _, o := range ex.order {
		o.abort()
	}
}

// file converts the rows of one shard file, checked against the manifest
// (shard.ReadVerified: a local file is hashed while it is read, another
// is downloaded first). Nothing is published before every file is
// checked: the data files are ".partial" until Export ends well.
func (ex *exporter) file(ctx context.Context, sf shard.File) error {
	opts := shard.ReadOptions{SkipImageBytes: ex.haveImage}
	err := shard.ReadVerified(ctx, ex.cfg.Bucket, sf, ex.cfg.TempDir, opts, func(r *shard.Row) error {
		if err := ex.row(ctx, r); err != nil {
			return fmt.Errorf("%s: trajectory %s step %d candidate %d: %w", sf.Key, r.TrajectoryID, r.Step, r.Candidate, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("trainexport: %w", err)
	}
	return nil
}

// haveImage reports whether the export already holds an image's bytes: an
// earlier row wrote it, or the first row of the group being collected (the
// one whose images a per-group row takes) carries it. Each step's
// screenshots are embedded in all its G rows; the others' copies are not
// read.
func (ex *exporter) haveImage(sha string) bool {
	if ex.images.has(sha) {
		return true
	}
	if len(ex.group) > 0 {
		for _, im := range ex.group[0].Images {
			if im.SHA256 == sha && im.Bytes != nil {
				return true
			}
		}
	}
	return false
}

// row converts one shard row: a candidate row at once (jsonl), or a
// member of the group being collected (per-group formats).
func (ex *exporter) row(ctx context.Context, r *shard.Row) error {
	if ex.cfg.Format == FormatJSONL {
		return ex.candidate(ctx, r)
	}
	if len(ex.group) > 0 && keyOf(ex.group[0]) != keyOf(r) {
		if err := ex.flushGroup(ctx); err != nil {
			return err
		}
	}
	k := keyOf(r)
	if ex.seen[k] {
		return fmt.Errorf("group %s (trajectory %s step %d) comes again after other groups: the set's rows of one group are not together", r.GroupID, r.TrajectoryID, r.Step)
	}
	// The reader reuses nothing between rows, so a row can be kept.
	ex.group = append(ex.group, r)
	return nil
}

func keyOf(r *shard.Row) groupKey {
	return groupKey{group: r.GroupID, trajectory: r.TrajectoryID, step: r.Step}
}

// splitOf is the split of a row's group: val when the first 8 bytes of
// the SHA-256 of its key, as a fraction of 2^64, fall below the val
// fraction. The key is the trajectory id in step mode (every step of a
// trajectory in one split) and the group id in outcome mode, whose groups
// span the K trajectories of a task in a run.
func (ex *exporter) splitOf(r *shard.Row) string {
	key := r.TrajectoryID
	if ex.mode == shard.ModeOutcome {
		key = r.GroupID
	}
	if ex.outs[SplitVal] == nil {
		return SplitTrain
	}
	h := sha256.Sum256([]byte(key))
	if float64(binary.BigEndian.Uint64(h[:8]))/(1<<64) < ex.cfg.ValFraction {
		return SplitVal
	}
	return SplitTrain
}

// flushGroup writes the collected group as one row.
func (ex *exporter) flushGroup(ctx context.Context) error {
	if len(ex.group) == 0 {
		return nil
	}
	rows := ex.group
	ex.group = nil
	first := rows[0]
	ex.seen[keyOf(first)] = true
	msgs, err := Flatten(first.Messages, first.Images)
	if err != nil {
		return fmt.Errorf("trainexport: group %s: %w", first.GroupID, err)
	}
	paths := make([]string, len(first.Images))
	for i, im := range first.Images {
		p, err := ex.images.write(ctx, im)
		if err != nil {
			return fmt.Errorf("trainexport: group %s: %w", first.GroupID, err)
		}
		paths[i] = filepath.Join(ex.cfg.ImageRoot, filepath.Base(p))
	}
	split := ex.splitOf(first)
	r := &Row{
		DataSource: ex.cfg.DataSource + "/" + first.App,
		Prompt:     msgs,
		Images:     paths,
		Ability:    "gui-agent",
		Style:      "rule",
		Label:      Label{Set: ex.set, GroupID: first.GroupID, Reference: first.ReferenceText}.String(),
		Extra:      groupExtra(ex.index, split, ex.set, rows),
	}
	var v any
	if ex.cfg.Format == FormatVerl {
		v = r.verl()
	} else {
		v = r.openRLHF()
	}
	if err := ex.outs[split].add(v); err != nil {
		return fmt.Errorf("trainexport: group %s: %w", first.GroupID, err)
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
// content with prompt.Flatten (text parts as they are, each image part as
// ImagePlaceholder; a text holding a media placeholder is an error, as it
// would shift the images). The image parts must name the row's images in
// order.
func Flatten(msgs []shard.Message, images []shard.Image) ([]Message, error) {
	if len(msgs) == 0 {
		return nil, errors.New("no messages")
	}
	out := make([]Message, len(msgs))
	k := 0
	for i, m := range msgs {
		parts := make([]prompt.Part, 0, len(m.Content))
		for _, p := range m.Content {
			switch p.Type {
			case shard.PartText:
				parts = append(parts, prompt.Part{Text: p.Text})
			case shard.PartImage:
				if k >= len(images) || p.Image != prompt.RefScheme+images[k].SHA256 {
					return nil, fmt.Errorf("message %d: image %q is not the row's image %d", i, p.Image, k)
				}
				k++
				parts = append(parts, prompt.Part{Image: p.Image, IsImage: true})
			default:
				return nil, fmt.Errorf("message %d: part type %q", i, p.Type)
			}
		}
		text, _, err := prompt.Flatten(parts)
		if err != nil {
			return nil, fmt.Errorf("message %d: %w", i, err)
		}
		out[i] = Message{Role: m.Role, Content: text}
	}
	if k != len(images) {
		return nil, fmt.Errorf("the messages show %d images, the row has %d", k, len(images))
	}
	return out, nil
}

// Row is one per-group trainer row before it is written in a format.
type Row struct {
	DataSource string
	Prompt     []Message
	Images     []string // image paths under the image root, in placeholder order
	Ability    string
	Style      string // reward_model.style
	Label      string // reward_model.ground_truth (verl), the label (OpenRLHF): a Label
	Extra      GroupExtra
}

// GroupExtra is what a per-group trainer row carries besides what the
// loader reads (verl: extra_info; OpenRLHF: "codapipe"): the group's ids,
// statistics and provenance, and its stored candidates (text, reward,
// advantage; token-level data is the jsonl format's). Field names are the
// shard columns' (docs/shards.md); Index is verl's extra_info.index.
type GroupExtra struct {
	Index int64  `json:"index"`
	Split string `json:"split"`
	Set   string `json:"set"`
	GroupIDs
	ReferenceText string  `json:"reference_text"`
	GroupMean     float64 `json:"group_mean"`
	GroupStd      float64 `json:"group_std"`
	ZeroVariance  bool    `json:"zero_variance"`
	LossWeight    float64 `json:"loss_weight"`
	LabelSource   string  `json:"label_source"`
	Provenance
	ImageSHA256 []string          `json:"image_sha256"`
	Candidates  []StoredCandidate `json:"candidates"`
}

// StoredCandidate is one stored candidate of a group, as a per-group row
// carries it: for reference and evaluation, not for training on.
type StoredCandidate struct {
	Candidate  int32   `json:"candidate"`
	Completion string  `json:"completion"`
	ActionText string  `json:"action_text"`
	Reward     float64 `json:"reward"`
	Advantage  float64 `json:"advantage"`
	Label      string  `json:"label"`
}

// groupExtra fills GroupExtra from a group's rows.
func groupExtra(index int, split, set string, rows []*shard.Row) GroupExtra {
	r := rows[0]
	e := GroupExtra{
		Index: int64(index), Split: split, Set: set, GroupIDs: idsOf(r), ReferenceText: r.ReferenceText,
		GroupMean: r.GroupMean, GroupStd: r.GroupStd, ZeroVariance: r.ZeroVariance, LossWeight: r.LossWeight,
		LabelSource: r.LabelSource, Provenance: provenanceOf(r),
		ImageSHA256: imageSHAs(r.Images), Candidates: make([]StoredCandidate, len(rows)),
	}
	for i, c := range rows {
		e.Candidates[i] = StoredCandidate{Candidate: c.Candidate, Completion: c.Completion, ActionText: c.ActionText,
			Reward: c.Reward, Advantage: c.Advantage, Label: c.Label}
	}
	return e
}

func imageSHAs(imgs []shard.Image) []string {
	out := make([]string, len(imgs))
	for i, im := range imgs {
		out[i] = im.SHA256
	}
	return out
}

// rowSink writes rows, each a value that marshals to one JSON object.
type rowSink interface {
	add(v any) error
	close() error // finishes the output
	abort()       // releases what it holds after a failure
}

// jsonLinesSink writes one JSON object per line.
type jsonLinesSink struct {
	w   *bufio.Writer
	enc *json.Encoder
}

func newJSONLinesSink(w io.Writer) *jsonLinesSink {
	bw := bufio.NewWriterSize(w, 1<<20)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	return &jsonLinesSink{w: bw, enc: enc}
}

func (s *jsonLinesSink) add(v any) error { return s.enc.Encode(v) }
func (s *jsonLinesSink) close() error    { return s.w.Flush() }
func (s *jsonLinesSink) abort()          {}

// OpenRLHFRow is one line of the OpenRLHF export. Input, Label, Images and
// DataSource are what PromptDataset reads (with --data.input_key input
// --data.label_key label --data.image_key images); Codapipe is the rest.
type OpenRLHFRow struct {
	Input      []Message  `json:"input"`
	Label      string     `json:"label"`
	Images     []string   `json:"images"` // image file paths
	DataSource string     `json:"datasource"`
	Codapipe   GroupExtra `json:"codapipe"`
}

func (r *Row) openRLHF() *OpenRLHFRow {
	return &OpenRLHFRow{Input: r.Prompt, Label: r.Label, Images: r.Images, DataSource: r.DataSource, Codapipe: r.Extra}
}

// VerlImage is one element of the verl export's images column: a dict
// without "bytes", which verl's process_image hands to qwen_vl_utils'
// fetch_image, which opens "image" as a local path.
type VerlImage struct {
	Image string `json:"image"`
}

// verlRow is one row of the verl export, in VerlSchema's JSON form.
type verlRow struct {
	DataSource  string            `json:"data_source"`
	Prompt      []Message         `json:"prompt"`
	Images      []VerlImage       `json:"images"`
	Ability     string            `json:"ability"`
	RewardModel map[string]string `json:"reward_model"`
	ExtraInfo   GroupExtra        `json:"extra_info"`
}

func (r *Row) verl() *verlRow {
	imgs := make([]VerlImage, len(r.Images))
	for i, p := range r.Images {
		imgs[i] = VerlImage{Image: p}
	}
	return &verlRow{DataSource: r.DataSource, Prompt: r.Prompt, Images: imgs, Ability: r.Ability,
		RewardModel: map[string]string{"style": r.Style, "ground_truth": r.Label}, ExtraInfo: r.Extra}
}

// verlBatchRows is the rows of one Parquet row group of the verl export.
const verlBatchRows = 256

// VerlSchema is the Arrow schema of the verl export's Parquet files.
var VerlSchema = func() *arrow.Schema {
	str, i32, i64, f64 := arrow.BinaryTypes.String, arrow.PrimitiveTypes.Int32, arrow.PrimitiveTypes.Int64, arrow.PrimitiveTypes.Float64
	b := arrow.FixedWidthTypes.Boolean
	f := func(name string, t arrow.DataType, nullable bool) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: nullable}
	}
	candidate := arrow.StructOf(f("candidate", i32, false), f("completion", str, false), f("action_text", str, false),
		f("reward", f64, false), f("advantage", f64, false), f("label", str, false))
	extra := arrow.StructOf(
		f("index", i64, false), f("split", str, false), f("set", str, false), f("run", str, false), f("app", str, false),
		f("task", str, false), f("trajectory_id", str, false), f("sample", i32, false), f("step", i32, false),
		f("group_id", str, false), f("group_size", i32, false), f("reference_text", str, false),
		f("group_mean", f64, false), f("group_std", f64, false), f("zero_variance", b, false), f("loss_weight", f64, false),
		f("label_source", str, false), f("policy_model", str, false), f("policy_checkpoint", str, false),
		f("executor_model", str, false), f("executor_checkpoint", str, false), f("executor_coords", str, false),
		f("prompt_set", str, false), f("judge_version", str, false), f("image_sha256", arrow.ListOfNonNullable(str), false),
		f("candidates", arrow.ListOfNonNullable(candidate), false),
	)
	return arrow.NewSchema([]arrow.Field{
		f("data_source", str, false),
		f("prompt", arrow.ListOfNonNullable(arrow.StructOf(f("role", str, false), f("content", str, false))), false),
		f("images", arrow.ListOfNonNullable(arrow.StructOf(f("image", str, false))), false),
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
	props := parquet.NewWriterProperties(parquet.WithCompression(compress.Codecs.Zstd))
	pw, err := pqarrow.NewFileWriter(VerlSchema, w, props, pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema()))
	if err != nil {
		return nil, err
	}
	return &verlSink{w: pw}, nil
}

func (s *verlSink) add(v any) error {
	if s.n == 0 {
		s.pending.WriteByte('[')
	} else {
		s.pending.WriteByte(',')
	}
	enc := json.NewEncoder(&s.pending)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
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
