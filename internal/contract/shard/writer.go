package shard

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// Defaults of Config.
const (
	// DefaultBatchRows is the default of Config.BatchRows.
	DefaultBatchRows = 512
	// DefaultBatchBytes is the default of Config.BatchBytes.
	DefaultBatchBytes = 16 << 20
	// MaxBatchBytes bounds Config.BatchBytes: one record batch's strings or
	// binary values must stay addressable by Arrow's int32 offsets.
	MaxBatchBytes = 1 << 30
)

// ErrEmpty is returned by Commit when the open shard has no rows: a shard
// with no rows is never committed.
var ErrEmpty = errors.New("no rows to commit")

// Config configures a Writer.
type Config struct {
	// Bucket receives the committed files (blob.OpenBucket: a local
	// directory or S3). Required.
	Bucket blob.Bucket
	// Prefix is the key prefix of the shard set inside the bucket, e.g.
	// "shards/run-1"; files are named "<Prefix>/<name>". Leading and trailing
	// slashes are ignored; "" puts the files at the top of the bucket.
	Prefix string
	// Format is FormatArrow (default) or FormatParquet.
	Format Format
	// RowsPerShard makes Full report true once the open shard has this many
	// rows; 0 means no row limit.
	RowsPerShard int64
	// BytesPerShard makes Full report true once the open shard's approximate
	// size (Bytes) reaches it; 0 means no size limit.
	BytesPerShard int64
	// BatchRows is the most rows of one record batch (Arrow) or row group
	// (Parquet); default DefaultBatchRows.
	BatchRows int
	// BatchBytes is the approximate most bytes of one record batch or row
	// group (the rows' uncompressed size); default DefaultBatchBytes, at most
	// MaxBatchBytes. A batch is written out as soon as it reaches BatchRows
	// or BatchBytes, so the writer holds at most about one batch in memory
	// (a single row larger than BatchBytes makes a batch of its own).
	BatchBytes int64
	// TempDir is where open shards are spooled before Commit stores them
	// (default os.TempDir()). Files are named codapipe-shard-*.tmp. With a
	// local bucket on the same file system, Commit renames the file into
	// place instead of copying it: put TempDir next to the bucket.
	TempDir string
	// Meta describes the shard set; it is written into every file's schema
	// metadata. Meta.Mode is required (see Meta.Validate).
	Meta Meta
	// Images, when set, is where every row must carry its images: bytes
	// (ImagesEmbed), an image file stored by PutImages (ImagesFiles), or
	// neither (ImagesStore); Add refuses other rows. It is recorded as
	// Meta.Images. Empty takes the rows as they are.
	Images ImageMode
	// Name returns the base name (without extension) of the next shard; it
	// must be unique within Prefix, and a valid key segment. It is called when
	// a shard is opened. Default DefaultName. A deterministic name (say, from
	// the ids of the messages whose rows the shard holds) makes a replayed
	// Commit replace the same object instead of adding a duplicate.
	Name func() string
	// Allocator allocates the Arrow buffers (default memory.DefaultAllocator);
	// tests pass a memory.CheckedAllocator.
	Allocator memory.Allocator
}

// DefaultName returns a unique shard name: "part-<UTC time to the
// nanosecond>-<16 random hex digits>", e.g.
// "part-20260301T120000.123456789Z-9f86d081884c7d65". Names sort by
// creation time.
func DefaultName() string {
	var b [8]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	return "part-" + time.Now().UTC().Format("20060102T150405.000000000Z") + "-" + hex.EncodeToString(b[:])
}

// File is one committed shard file.
type File struct {
	// Path is the file's path relative to the folder of the set's manifest,
	// "<name>.<format>"; a reader resolves it against the folder it read
	// the manifest from (ResolveKey), so a copied or moved set still reads.
	Path string `json:"path"`
	// Key is the object's key in the bucket the file was written to or
	// its manifest read from, "<Prefix>/<Path>". It is not stored in the
	// manifest: ReadManifest fills it from where it read the manifest.
	Key string `json:"-"`
	// Rows is the number of rows in the file.
	Rows int64 `json:"rows"`
	// Bytes is the file's size.
	Bytes int64 `json:"bytes"`
	// SHA256 is the lower-case hex SHA-256 of the file, computed while it was
	// written and verified by the bucket on upload.
	SHA256 string `json:"sha256"`
	// Format is the file's format.
	Format Format `json:"format"`
	// TokenIDRows is the number of rows whose completion_token_ids are
	// present (the others are null: their endpoint gave none).
	TokenIDRows int64 `json:"token_id_rows"`
	// Sampling counts the file's rows by their sampling column (the JSON
	// text; "" for null), in the order first seen.
	Sampling []SamplingRows `json:"sampling,omitempty"`
	// Executors and PromptSets count the file's rows by executor and by
	// prompt set, in the order first seen.
	Executors  []ExecutorRows  `json:"executors,omitempty"`
	PromptSets []PromptSetRows `json:"prompt_sets,omitempty"`
	// Images are the image files the file's rows name (ImagesFiles),
	// sorted by path; each was stored before the file was.
	Images []ImageFile `json:"images,omitempty"`
}

// UnmarshalJSON decodes a File, also in the form of schema version 1 (in
// manifests and in the advantage service's commit records), which had
// "key", the key from the bucket's root, and no "path": a shard file is
// always "<prefix>/<name>", so its name becomes the path and the key is
// kept.
func (f *File) UnmarshalJSON(data []byte) error {
	type plain File // without the method
	var v struct {
		plain
		LegacyKey string `json:"key"`
	}
	if err := json.Unmarshal(data, &v); err != nil {
		return err
	}
	*f = File(v.plain)
	if f.Path == "" && v.LegacyKey != "" {
		f.Path = path.Base(v.LegacyKey)
		f.Key = v.LegacyKey
	}
	return nil
}

// SamplingRows is a number of rows sharing one value of the sampling
// column.
type SamplingRows struct {
	// Sampling is the planner's sampling parameters (traj.Sampling as JSON),
	// "" for rows whose trajectory recorded none.
	Sampling string `json:"sampling"`
	// Rows is the number of rows.
	Rows int64 `json:"rows"`
}

// addSampling counts n rows with sampling s in list.
func addSampling(list []SamplingRows, s string, n int64) []SamplingRows {
	return addRows(list, s, n, func() SamplingRows { return SamplingRows{Sampling: s} })
}

// Writer writes Rows into shard files: rows go into Arrow builders, are
// written out as record batches (Arrow IPC) or row groups (Parquet) to a
// temporary file, and Commit stores the finished file in the bucket.
// Nothing appears in the bucket before Commit, and a file appears whole or
// not at all, so readers never see an uncommitted or partial shard.
//
// A Writer is safe for concurrent use, but its calls are serialised (Commit
// holds it for the upload); it is meant to be driven by one goroutine.
// Close it when done: an open shard holds a temporary file and a goroutine.
type Writer struct {
	mu     sync.Mutex
	cfg    Config
	prefix string
	schema *arrow.Schema
	mem    memory.Allocator // pool
	pool   *recycler
	b      *rowBuilder
	cur    *spool // the open shard, nil when none
	closed bool

	imgMu sync.Mutex
	known map[string]int64 // images stored by PutImages: SHA-256 → size
}

// spool is the open shard: its temporary file and format writer.
type spool struct {
	name string // base name with extension
	path string // temporary file
	f    *os.File
	out  *spoolWriter
	ipcw *ipc.FileWriter
	pqw  *pqarrow.FileWriter
	rows int64 // rows added, written or pending

	idRows    int64          // rows with token ids
	sampling  []SamplingRows // rows by sampling
	executors []ExecutorRows
	prompts   []PromptSetRows
	images    map[string]ImageFile // image files the rows name, by path

	sealed bool  // the file is complete and closed; only the upload remains
	file   File  // when sealed
	err    error // a write failed: the shard is unusable until Abort
}

// NewWriter checks cfg and returns a Writer with no open shard.
func NewWriter(cfg Config) (*Writer, error) {
	if cfg.Bucket == nil {
		return nil, errors.New("shard: config: no bucket")
	}
	if cfg.Format == "" {
		cfg.Format = FormatArrow
	}
	if !cfg.Format.valid() {
		return nil, fmt.Errorf("shard: config: format %q, want %q or %q", cfg.Format, FormatArrow, FormatParquet)
	}
	if cfg.Images != "" {
		if !cfg.Images.Valid() {
			return nil, fmt.Errorf("shard: config: images %q, want %s", cfg.Images, imageModesText)
		}
		cfg.Meta.Images = cfg.Images
	}
	if err := cfg.Meta.Validate(); err != nil {
		return nil, err
	}
	if cfg.RowsPerShard < 0 || cfg.BytesPerShard < 0 || cfg.BatchRows < 0 || cfg.BatchBytes < 0 {
		return nil, errors.New("shard: config: negative limit")
	}
	if cfg.BatchRows == 0 {
		cfg.BatchRows = DefaultBatchRows
	}
	if cfg.BatchBytes == 0 {
		cfg.BatchBytes = DefaultBatchBytes
	}
	cfg.BatchBytes = min(cfg.BatchBytes, MaxBatchBytes)
	if cfg.TempDir == "" {
		cfg.TempDir = os.TempDir()
	}
	if cfg.Name == nil {
		cfg.Name = DefaultName
	}
	if cfg.Allocator == nil {
		cfg.Allocator = memory.DefaultAllocator
	}
	prefix := strings.Trim(cfg.Prefix, "/")
	if prefix != "" {
		if err := blob.ValidateKey(prefix); err != nil {
			return nil, fmt.Errorf("shard: config: prefix: %w", err)
		}
	}
	if fi, err := os.Stat(cfg.TempDir); err != nil {
		return nil, fmt.Errorf("shard: config: temp dir: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("shard: config: temp dir %s is not a directory", cfg.TempDir)
	}
	w := &Writer{cfg: cfg, prefix: prefix, schema: Schema(cfg.Meta), known: map[string]int64{}}
	w.pool = newRecycler(cfg.Allocator, int(2*cfg.BatchBytes)+8<<20)
	w.mem = w.pool
	w.b = newRowBuilder(w.mem, w.schema)
	return w, nil
}

// Schema returns the schema of the writer's files (with its metadata).
func (w *Writer) Schema() *arrow.Schema { return w.schema }

// key returns the bucket key of a shard file named name.
func (w *Writer) key(name string) string {
	if w.prefix == "" {
		return name
	}
	return w.prefix + "/" + name
}

// Add appends rows to the open shard, opening one when there is none. Rows
// are validated first (every string must be valid UTF-8): an invalid row
// fails the whole call and adds nothing. All the rows go into the open
// shard even when it becomes Full on the way, so that rows added together
// are committed together; the caller checks Full after Add and commits.
//
// A write error (a full disk) leaves the open shard unusable: Add and
// Commit then fail until Abort drops it.
func (w *Writer) Add(rows []Row) error {
	for i := range rows {
		if err := validateRow(&rows[i]); err != nil {
			return fmt.Errorf("shard: add: row %d: %w", i, err)
		}
		if err := checkImages(&rows[i], w.cfg.Images); err != nil {
			return fmt.Errorf("shard: add: row %d: %w", i, err)
		}
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.usable(); err != nil {
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	if w.cur == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	sh := w.cur
	for i := range rows {
		r := &rows[i]
		if w.b.rows > 0 && w.b.bytes+rowSize(r) > w.cfg.BatchBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
		w.b.append(r)
		sh.rows++
		if r.CompletionTokenIDs != nil {
			sh.idRows++
		}
		smp := ""
		if r.Sampling != nil {
			smp = *r.Sampling
		}
		sh.sampling = addSampling(sh.sampling, smp, 1)
		sh.executors = addExecutor(sh.executors, Executor{Model: r.ExecutorModel, Checkpoint: r.ExecutorCheckpoint, Coords: r.ExecutorCoords}, 1)
		sh.prompts = addPromptSet(sh.prompts, r.PromptSet, 1)
		for k := range r.Images {
			if im := &r.Images[k]; im.Path != "" {
				if sh.images == nil {
					sh.images = map[string]ImageFile{}
				}
				sh.images[im.Path] = ImageFile{Path: im.Path, Bytes: im.stored, SHA256: im.SHA256}
			}
		}
		if w.b.rows >= w.cfg.BatchRows || w.b.bytes >= w.cfg.BatchBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// usable reports why the writer cannot take rows: closed, a broken shard,
// or a finished shard waiting for its upload.
func (w *Writer) usable() error {
	if w.closed {
		return errors.New("shard: writer is closed")
	}
	if sh := w.cur; sh != nil {
		if sh.err != nil {
			return fmt.Errorf("shard: %s: unusable after an earlier error (Abort it): %w", sh.name, sh.err)
		}
		if sh.sealed {
			return fmt.Errorf("shard: %s: finished but not uploaded: retry Commit or Abort", sh.name)
		}
	}
	return nil
}

// open starts a new shard: a temporary file and the format's writer.
func (w *Writer) open() error {
	name := w.cfg.Name()
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("shard: name %q: want a non-empty name without slashes", name)
	}
	name += w.cfg.Format.Ext()
	if err := blob.ValidateKey(w.key(name)); err != nil {
		return fmt.Errorf("shard: %s: %w", name, err)
	}
	f, err := os.CreateTemp(w.cfg.TempDir, "codapipe-shard-*.tmp")
	if err != nil {
		return fmt.Errorf("shard: %s: %w", name, err)
	}
	sh := &spool{name: name, path: f.Name(), f: f, out: newSpoolWriter(f)}
	switch w.cfg.Format {
	case FormatArrow:
		sh.ipcw, err = ipc.NewFileWriter(sh.out, ipc.WithSchema(w.schema), ipc.WithAllocator(w.mem))
	case FormatParquet:
		sh.pqw, err = pqarrow.NewFileWriter(w.schema, sh.out, parquetProps(w.mem),
			pqarrow.NewArrowWriterProperties(pqarrow.WithStoreSchema(), pqarrow.WithAllocator(w.mem)))
	}
	if err != nil {
		sh.out.Close()
		f.Close()
		os.Remove(sh.path)
		return fmt.Errorf("shard: %s: open writer: %w", name, err)
	}
	w.cur = sh
	return nil
}

// parquetProps are the shard files' Parquet writer properties
// (ParquetProperties): their embedded image bytes stored as they are, no
// min/max statistics for the large unique values (prompt, completion,
// image bytes, log-probs, token ids, message texts).
func parquetProps(mem memory.Allocator) *parquet.WriterProperties {
	return ParquetProperties(mem, parquetImageBytes, []string{"prompt", "completion", parquetImageBytes,
		"logprobs.list.element", "completion_token_ids.list.element",
		"messages.list.element.content.list.element.text"})
}

// ParquetProperties returns the Parquet writer properties of files of rows
// that embed images (screenshots) next to text columns: the shard files
// and the SFT dataset's Parquet (internal/stage/sft). imageBytes is the column
// path of the embedded image bytes (PNG data, compressed already), stored
// uncompressed: zstd would spend CPU to gain nothing. Every other column
// is zstd (level 1). noStats are the column paths of large unique values,
// which get no min/max statistics (the others do); extra properties are
// applied last (e.g. parquet.WithCreatedBy).
//
// Encoding: PLAIN everywhere (no dictionaries: a row group of the repeated
// small strings compresses as well with zstd alone, 5 % smaller in
// BenchmarkShardFileSize, and each dictionary cost a hash table and a page
// per column chunk), V1 data pages of at most parquetPageSize, their size
// checked after every value. Every reader decodes these (DuckDB, pyarrow,
// Hugging Face datasets, arrow-go).
func ParquetProperties(mem memory.Allocator, imageBytes string, noStats []string, extra ...parquet.WriterProperty) *parquet.WriterProperties {
	opts := []parquet.WriterProperty{
		parquet.WithAllocator(mem),
		parquet.WithCompression(compress.Codecs.Zstd),
		// zstd level 1 (klauspost's SpeedFastest): on these columns it
		// compresses as well as the default level 3 (within 0.2%), runs
		// faster, and its encoders carry a 4 MB window instead of 8 MB.
		parquet.WithCompressionLevel(1),
		parquet.WithCompressionFor(imageBytes, compress.Codecs.Uncompressed),
		parquet.WithDictionaryDefault(false),
		parquet.WithStats(true),
		// The column writers check the page size after every WithBatchSize
		// values (default 1024): with ~200 KB images that would buffer (and
		// copy twice) a whole row group's image bytes as a single page.
		// Small pages: see parquetPageSize.
		parquet.WithBatchSize(parquetWriteBatch),
		parquet.WithDataPageSize(parquetPageSize),
	}
	for _, path := range noStats {
		opts = append(opts, parquet.WithStatsFor(path, false))
	}
	return parquet.NewWriterProperties(append(opts, extra...)...)
}

// parquetWriteBatch is how many values a Parquet column writer encodes
// before it checks whether the page is full.
const parquetWriteBatch = 1

// parquetPageSize is the data page size limit: a column writer cuts a
// page as soon as its values reach it (checked after every value, see
// parquetWriteBatch), so a page of embedded images holds one image (or a
// few small ones) and a page of the other columns at most 128 KiB. The
// page buffers come from arrow-go's encoder pool, shared by every column,
// which zeroes a buffer's whole capacity each time it takes one back (up to
// 7 times per column chunk): with the default 1 MiB pages checked every 16
// values (pages of 16 images), the pool filled with 4 MiB buffers, and
// zeroing them, regrowing them and copying into them cost 15-20 % more CPU
// per shard (BenchmarkShardWriteParquet, shard.parquet_write_cpu_s_per_GB).
// See encoding.PooledBufferWriter in arrow-go's
// parquet/internal/encoding/types.go.
const parquetPageSize = 128 << 10

// parquetImageBytes is the Parquet column path of the embedded image bytes.
const parquetImageBytes = "images.list.element.bytes"

// flush writes the pending rows as one record batch or row group.
func (w *Writer) flush() error {
	rec := w.b.batch()
	if rec == nil {
		return nil
	}
	sh := w.cur
	imgBytes := imageDataLen(rec)
	var err error
	if sh.ipcw != nil {
		err = sh.ipcw.Write(rec)
	} else {
		err = sh.pqw.Write(rec)
	}
	rec.Release() // its buffers go back to the pool, for the next batch
	if err != nil {
		sh.err = err
		return fmt.Errorf("shard: %s: write batch: %w", sh.name, err)
	}
	// A batch never holds more than BatchBytes (but for a single larger
	// row), so when the rows embed images, reserving that much for the next
	// batch's image bytes means the buffer is never regrown (and copied).
	if imgBytes > 0 {
		w.b.reserveImageBytes(int(min(w.cfg.BatchBytes, 2*int64(imgBytes))))
	}
	return nil
}

// imageDataLen returns the bytes of embedded images in rec.
func imageDataLen(rec arrow.RecordBatch) int {
	data := rec.Column(colImages).Data().Children()[0].Children()[imgBytes]
	bufs := data.Buffers()
	if len(bufs) < 3 || bufs[2] == nil {
		return 0
	}
	return bufs[2].Len()
}

// Rows returns the number of rows of the open shard (0 when none is open).
func (w *Writer) Rows() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil {
		return 0
	}
	return w.cur.rows
}

// Bytes returns the approximate size of the open shard: what has been
// written to its file so far plus the estimated size of the rows not yet
// written out (uncompressed). 0 when no shard is open.
func (w *Writer) Bytes() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.bytes()
}

func (w *Writer) bytes() int64 {
	sh := w.cur
	if sh == nil {
		return 0
	}
	if sh.sealed {
		return sh.file.Bytes
	}
	return sh.out.Size() + w.b.bytes
}

// Full reports whether the open shard has reached RowsPerShard rows,
// BytesPerShard bytes or MaxShardImages image files.
func (w *Writer) Full() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.cur == nil {
		return false
	}
	return (w.cfg.RowsPerShard > 0 && w.cur.rows >= w.cfg.RowsPerShard) ||
		(w.cfg.BytesPerShard > 0 && w.bytes() >= w.cfg.BytesPerShard) ||
		len(w.cur.images) >= MaxShardImages
}

// MaxShardImages is how many image files a shard names before Full
// reports true: its File (which lists them) then stays small enough for a
// record on the bus (the advantage service's commit record, under NATS's
// 1 MiB payload limit: about 170 bytes of JSON per image file).
const MaxShardImages = 2048

// Commit finishes the open shard and publishes it: it writes the pending
// rows and the file's footer, stores the file in the bucket under
// "<Prefix>/<name>" with its SHA-256 and returns the File. A bucket that is
// a blob.FileMover (the local directory) takes the temporary file itself:
// fsync, rename into place, fsync of the directory (a copy when TempDir is
// on another file system); other buckets get it by PutFile (S3: a
// checksummed upload, its SHA-256 verified), and the temporary file is
// removed. The next Add opens a new shard.
//
// With no rows it returns an error wrapping ErrEmpty and commits nothing.
// When the upload fails the finished file is kept: Commit can be called
// again (it uploads the same bytes under the same key) or Abort drops it.
func (w *Writer) Commit(ctx context.Context) (File, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return File{}, errors.New("shard: writer is closed")
	}
	sh := w.cur
	if sh == nil || sh.rows == 0 {
		return File{}, fmt.Errorf("shard: commit: %w", ErrEmpty)
	}
	if sh.err != nil {
		return File{}, fmt.Errorf("shard: %s: unusable after an earlier error (Abort it): %w", sh.name, sh.err)
	}
	if !sh.sealed {
		if err := w.seal(); err != nil {
			return File{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return File{}, fmt.Errorf("shard: %s: %w", sh.name, err)
	}
	opts := blob.PutOptions{ContentType: contentType(w.cfg.Format), SHA256: sh.file.SHA256}
	var info blob.Info
	var err error
	if mv, ok := w.cfg.Bucket.(blob.FileMover); ok {
		info, err = mv.MoveFile(ctx, sh.file.Key, sh.path, opts)
	} else {
		info, err = w.cfg.Bucket.PutFile(ctx, sh.file.Key, sh.path, opts)
	}
	if err != nil {
		return File{}, fmt.Errorf("shard: %s: upload: %w", sh.name, err)
	}
	if info.Size != sh.file.Bytes || (info.SHA256 != "" && info.SHA256 != sh.file.SHA256) {
		return File{}, fmt.Errorf("shard: %s: upload stored %d bytes with SHA-256 %s, want %d bytes with %s: %w",
			sh.name, info.Size, info.SHA256, sh.file.Bytes, sh.file.SHA256, blob.ErrChecksumMismatch)
	}
	w.cur = nil
	if err := os.Remove(sh.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return sh.file, fmt.Errorf("shard: %s: committed, but removing the temporary file: %w", sh.name, err)
	}
	return sh.file, nil
}

// seal writes the pending rows and the footer and closes the temporary
// file. The file is not fsynced: it is only a spool, never read after a
// crash (the rows are re-produced from their unacknowledged inputs), and
// the bucket makes the durable copy.
func (w *Writer) seal() error {
	sh := w.cur
	fail := func(op string, err error) error {
		sh.err = err
		return fmt.Errorf("shard: %s: %s: %w", sh.name, op, err)
	}
	if err := w.flush(); err != nil {
		return err
	}
	var err error
	if sh.ipcw != nil {
		err = sh.ipcw.Close()
	} else {
		err = sh.pqw.Close()
	}
	if err != nil {
		return fail("close writer", err)
	}
	if err := sh.out.Close(); err != nil {
		return fail("write", err)
	}
	if err := sh.f.Close(); err != nil {
		return fail("close", err)
	}
	sh.sealed = true
	sh.file = File{
		Path:        sh.name,
		Key:         w.key(sh.name),
		Rows:        sh.rows,
		Bytes:       sh.out.Size(),
		SHA256:      sh.out.Sum(),
		Format:      w.cfg.Format,
		TokenIDRows: sh.idRows,
		Sampling:    sh.sampling,
		Executors:   sh.executors,
		PromptSets:  sh.prompts,
	}
	for _, im := range sh.images {
		sh.file.Images = append(sh.file.Images, im)
	}
	sh.file.Images = mergeImages(nil, sh.file.Images)
	if len(sh.file.Images) == 0 {
		sh.file.Images = nil
	}
	return nil
}

func contentType(f Format) string {
	if f == FormatParquet {
		return "application/vnd.apache.parquet"
	}
	return "application/vnd.apache.arrow.file"
}

// Abort drops the open shard, if any: its pending rows are discarded and its
// temporary file removed. Nothing was in the bucket.
func (w *Writer) Abort() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.abort()
}

func (w *Writer) abort() error {
	if rec := w.b.batch(); rec != nil {
		rec.Release()
	}
	sh := w.cur
	if sh == nil {
		return nil
	}
	w.cur = nil
	if !sh.sealed {
		// The shard is dropped unfinished: its output is discarded.
		if sh.pqw != nil {
			_ = sh.pqw.Close() // releases the Parquet writer's buffers
		}
		_ = sh.out.Close()
		sh.f.Close()
	}
	if err := os.Remove(sh.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("shard: %s: abort: %w", sh.name, err)
	}
	return nil
}

// Close aborts the open shard (it does not commit it) and releases the
// writer's buffers. Further calls fail, except Close.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	err := w.abort()
	w.closed = true
	w.b.release()
	w.pool.Close()
	return err
}

// checkImages reports a row whose images are not where mode says they are
// ("" accepts any).
func checkImages(r *Row, mode ImageMode) error {
	for i := range r.Images {
		im := &r.Images[i]
		switch {
		case mode == ImagesEmbed && im.Bytes == nil:
			return fmt.Errorf("images[%d] %s: no bytes, and the set embeds its images", i, im.SHA256)
		case mode == ImagesFiles && im.Path == "":
			return fmt.Errorf("images[%d] %s: no image file (Writer.PutImages stores them), and the set carries its images as files", i, im.SHA256)
		case mode == ImagesStore && (im.Bytes != nil || im.Path != ""):
			return fmt.Errorf("images[%d] %s: bytes or a file, and the set references the blob store only", i, im.SHA256)
		}
	}
	return nil
}
