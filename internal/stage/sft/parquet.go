package sft

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

// Row groups of the Parquet shards: a group is written once it holds
// parquetGroupRows rows or about parquetGroupBytes bytes (100 rows is what
// Hugging Face datasets writes for image datasets).
const (
	parquetGroupRows  = 100
	parquetGroupBytes = 64 << 20
)

// DefaultShardBytes is the default --shard-bytes: about how much image and
// text data one Parquet shard holds before the next one starts.
const DefaultShardBytes = 512 << 20

// Parquet columns, in order.
const (
	pqID = iota
	pqMessages
	pqImages
	pqApp
	pqTask
	pqRun
	pqTrajectoryID
	pqStep
	pqJudgeVersion
	pqPlannerMessages
	pqNumCols
)

// MessageType is the element type of the messages column.
var MessageType = arrow.StructOf(
	arrow.Field{Name: "role", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "content", Type: arrow.BinaryTypes.String, Nullable: true},
)

// ImageType is the element type of the images column: Hugging Face
// datasets' storage of an Image feature.
var ImageType = arrow.StructOf(
	arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
	arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
)

// hfFeatures is the "huggingface" schema metadata: the datasets Features
// of the columns (list literals for lists, so datasets 2.x–4.x read them),
// in column order. Every field is nullable, as datasets makes them.
var hfFeatures = func() string {
	str := `{"dtype":"string","_type":"Value"}`
	return `{"info":{"features":{` +
		`"id":` + str +
		`,"messages":[{"role":` + str + `,"content":` + str + `}]` +
		`,"images":[{"_type":"Image"}]` +
		`,"app":` + str + `,"task":` + str + `,"run":` + str + `,"trajectory_id":` + str +
		`,"step":{"dtype":"int32","_type":"Value"}` +
		`,"judge_version":` + str + `,"planner_messages":` + str +
		`}}}`
}()

// ParquetSchema returns the Arrow schema of the Parquet shards of split.
func ParquetSchema(split string) *arrow.Schema {
	str := arrow.BinaryTypes.String
	f := func(name string, t arrow.DataType) arrow.Field {
		return arrow.Field{Name: name, Type: t, Nullable: true}
	}
	fields := make([]arrow.Field, pqNumCols)
	fields[pqID] = f("id", str)
	fields[pqMessages] = f("messages", arrow.ListOf(MessageType))
	fields[pqImages] = f("images", arrow.ListOf(ImageType))
	fields[pqApp] = f("app", str)
	fields[pqTask] = f("task", str)
	fields[pqRun] = f("run", str)
	fields[pqTrajectoryID] = f("trajectory_id", str)
	fields[pqStep] = f("step", arrow.PrimitiveTypes.Int32)
	fields[pqJudgeVersion] = f("judge_version", str)
	fields[pqPlannerMessages] = f("planner_messages", str)
	md := arrow.NewMetadata(
		[]string{"huggingface", "codapipe.kind", "codapipe.layout", "codapipe.split"},
		[]string{hfFeatures, ManifestKind, Layout, split},
	)
	return arrow.NewSchema(fields, &md)
}

// parquetProps are the shards' writer properties: those of the GRPO
// shard files (shard.ParquetProperties: the same kind of rows, embedded
// screenshots next to text), with no statistics for the large values and
// a fixed created_by, so that the bytes depend on nothing but the rows.
func parquetProps(mem memory.Allocator) *parquet.WriterProperties {
	return shard.ParquetProperties(mem, "images.list.element.bytes",
		[]string{"messages.list.element.content", "images.list.element.bytes", "images.list.element.path", "planner_messages", "id", "trajectory_id"},
		parquet.WithCreatedBy("parquet-go version "+arrow.PkgVersion+" (build codapipe-sftpack)"))
}

// hashWriter counts and hashes what goes through it (and is not an
// io.Closer, so the Parquet writer leaves the file to its owner).
type hashWriter struct {
	w io.Writer
	h hash.Hash
	n int64
}

func newHashWriter(w io.Writer) *hashWriter { return &hashWriter{w: w, h: sha256.New()} }

func (h *hashWriter) Write(p []byte) (int, error) {
	n, err := h.w.Write(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	return n, err
}

func (h *hashWriter) sum() string { return hex.EncodeToString(h.h.Sum(nil)) }

// parquetWriter writes one split's samples into shards of about maxBytes
// under <dir>/parquet/, named <split>-NNNNN-of-MMMMM.parquet once the
// split is done.
type parquetWriter struct {
	dir, split string
	maxBytes   int64
	mem        memory.Allocator
	schema     *arrow.Schema
	props      *parquet.WriterProperties
	rb         *array.RecordBuilder

	groupRows  int
	groupBytes int64

	cur   *pqFile
	done  []*pqFile
	files []File
}

type pqFile struct {
	path  string // temporary name
	f     *os.File
	out   *hashWriter
	w     *pqarrow.FileWriter
	bytes int64 // payload so far (image and text bytes)
	rows  int
}

func newParquetWriter(dir, split string, maxBytes int64) *parquetWriter {
	mem := memory.DefaultAllocator
	schema := ParquetSchema(split)
	return &parquetWriter{
		dir: dir, split: split, maxBytes: maxBytes, mem: mem, schema: schema,
		props: parquetProps(mem), rb: array.NewRecordBuilder(mem, schema),
	}
}

// Add appends one sample whose images' bytes are imgs (in order).
func (w *parquetWriter) Add(s *Sample, imgs [][]byte) error {
	if w.cur == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	str := func(col int, v string) { w.rb.Field(col).(*array.StringBuilder).Append(v) }
	str(pqID, s.ID)
	ml := w.rb.Field(pqMessages).(*array.ListBuilder)
	ml.Append(true)
	ms := ml.ValueBuilder().(*array.StructBuilder)
	size := int64(len(s.PlannerMessages))
	for _, m := range s.Messages {
		ms.Append(true)
		ms.FieldBuilder(0).(*array.StringBuilder).Append(m.Role)
		ms.FieldBuilder(1).(*array.StringBuilder).Append(m.Content)
		size += int64(len(m.Content))
	}
	il := w.rb.Field(pqImages).(*array.ListBuilder)
	il.Append(true)
	is := il.ValueBuilder().(*array.StructBuilder)
	for k, sha := range s.Images {
		is.Append(true)
		is.FieldBuilder(0).(*array.BinaryBuilder).Append(imgs[k])
		is.FieldBuilder(1).(*array.StringBuilder).Append(ImagePath(sha))
		size += int64(len(imgs[k]))
	}
	str(pqApp, s.App)
	str(pqTask, s.Task)
	str(pqRun, s.Run)
	str(pqTrajectoryID, s.TrajectoryID)
	w.rb.Field(pqStep).(*array.Int32Builder).Append(int32(s.Step))
	str(pqJudgeVersion, s.JudgeVersion)
	str(pqPlannerMessages, s.PlannerMessages)

	w.groupRows++
	w.groupBytes += size
	w.cur.rows++
	w.cur.bytes += size
	if w.groupRows >= parquetGroupRows || w.groupBytes >= parquetGroupBytes {
		if err := w.flush(); err != nil {
			return err
		}
	}
	if w.maxBytes > 0 && w.cur.bytes >= w.maxBytes {
		return w.closeFile()
	}
	return nil
}

func (w *parquetWriter) open() error {
	if err := os.MkdirAll(filepath.Join(w.dir, ParquetDir), 0o755); err != nil {
		return err
	}
	p := filepath.Join(w.dir, ParquetDir, fmt.Sprintf("%s-%05d.parquet.partial", w.split, len(w.done)))
	f, err := os.OpenFile(p, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644) // 0644 less the umask
	if err != nil {
		return err
	}
	out := newHashWriter(f)
	pw, err := pqarrow.NewFileWriter(w.schema, out, w.props,
		pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(w.mem)))
	if err != nil {
		f.Close()
		return fmt.Errorf("sft: %s: %w", p, err)
	}
	w.cur = &pqFile{path: p, f: f, out: out, w: pw}
	return nil
}

// flush writes the pending rows as one row group.
func (w *parquetWriter) flush() error {
	if w.groupRows == 0 {
		return nil
	}
	rec := w.rb.NewRecordBatch()
	defer rec.Release()
	w.groupRows, w.groupBytes = 0, 0
	if err := w.cur.w.Write(rec); err != nil {
		return fmt.Errorf("sft: %s: %w", w.cur.path, err)
	}
	return nil
}

// closeFile finishes the open shard.
func (w *parquetWriter) closeFile() error {
	if err := w.flush(); err != nil {
		return err
	}
	c := w.cur
	w.cur = nil
	if err := c.w.Close(); err != nil {
		c.f.Close()
		return fmt.Errorf("sft: %s: %w", c.path, err)
	}
	if err := c.f.Close(); err != nil {
		return fmt.Errorf("sft: %s: %w", c.path, err)
	}
	w.done = append(w.done, c)
	return nil
}

// Finish closes the last shard and gives the shards their final names;
// it returns them (dataset-relative paths).
func (w *parquetWriter) Finish() ([]File, error) {
	defer w.rb.Release()
	if w.cur != nil {
		if err := w.closeFile(); err != nil {
			return nil, err
		}
	}
	var out []File
	for i, c := range w.done {
		rel := fmt.Sprintf("%s/%s-%05d-of-%05d.parquet", ParquetDir, w.split, i, len(w.done))
		if err := os.Rename(c.path, filepath.Join(w.dir, filepath.FromSlash(rel))); err != nil {
			return nil, err
		}
		out = append(out, File{Path: rel, Bytes: c.out.n, SHA256: c.out.sum()})
	}
	return out, nil
}

// Abort drops what was written.
func (w *parquetWriter) Abort() {
	if w.cur != nil {
		w.cur.f.Close()
		os.Remove(w.cur.path)
		w.cur = nil
	}
	for _, c := range w.done {
		os.Remove(c.path)
	}
	w.rb.Release()
}
