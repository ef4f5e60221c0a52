package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"
)

// ReadFile reads the rows of the local shard file at path (format by
// FormatArrow or FormatParquet) and calls yield with each, in order; it
// stops at the first error yield returns. A file of an older schema version
// reads too: its missing columns are zero (null lists, no messages).
// It reads one record batch (Arrow) or row group (Parquet) at a time.
func ReadFile(ctx context.Context, path string, format Format, yield func(*Row) error) error {
	return ReadFileWith(ctx, path, format, ReadOptions{}, yield)
}

// ReadOptions tune ReadFileWith.
type ReadOptions struct {
	// SkipImageBytes, when set, is asked for each embedded image's
	// SHA-256 before its bytes are copied into the row: true leaves the
	// row's Image.Bytes nil (a reader that already holds that image, such
	// as an export writing each screenshot once, saves copying the G
	// copies a step's candidates embed).
	SkipImageBytes func(sha256 string) bool
}

// ReadFileWith is ReadFile with options.
func ReadFileWith(ctx context.Context, path string, format Format, opts ReadOptions, yield func(*Row) error) (err error) {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("shard: read %s: %w", path, err)
	}
	defer f.Close()
	defer func() {
		// The Arrow and Parquet readers index a malformed file's
		// buffers without checking every bound.
		if p := recover(); p != nil {
			err = fmt.Errorf("shard: read %s: malformed file: %v", path, p)
		}
	}()
	var rr array.RecordReader
	switch format {
	case FormatArrow:
		var r *ipc.FileReader
		// A mapped file is read without copying its buffers (a set with
		// embedded images is mostly image bytes, which the rows copy
		// once); where mapping fails the file is read through.
		if data, unmap, merr := mapFile(f); merr == nil {
			defer unmap() // after r.Close: the reader's arrays point into data
			r, err = ipc.NewMappedFileReader(data, ipc.WithAllocator(memory.DefaultAllocator))
		} else {
			r, err = ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
		}
		if err != nil {
			return fmt.Errorf("shard: read %s: %w", path, err)
		}
		defer r.Close()
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			if err != nil {
				return fmt.Errorf("shard: read %s: batch %d: %w", path, i, err)
			}
			if err := yieldRecord(ctx, rec, opts, yield); err != nil {
				return fmt.Errorf("shard: read %s: %w", path, err)
			}
		}
		return nil
	case FormatParquet:
		pf, err := file.NewParquetReader(f)
		if err != nil {
			return fmt.Errorf("shard: read %s: %w", path, err)
		}
		defer pf.Close()
		fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: DefaultBatchRows}, memory.DefaultAllocator)
		if err != nil {
			return fmt.Errorf("shard: read %s: %w", path, err)
		}
		prr, err := fr.GetRecordReader(ctx, nil, nil)
		if err != nil {
			return fmt.Errorf("shard: read %s: %w", path, err)
		}
		rr = prr
	default:
		return fmt.Errorf("shard: read %s: format %q", path, format)
	}
	defer rr.Release()
	for rr.Next() {
		if err := yieldRecord(ctx, rr.RecordBatch(), opts, yield); err != nil {
			return fmt.Errorf("shard: read %s: %w", path, err)
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("shard: read %s: %w", path, err)
	}
	return nil
}

// yieldRecord decodes the rows of rec through Arrow's JSON form into Rows,
// whose json tags are the column names. Embedded image bytes bypass the
// JSON form (which would base64-encode and decode them again, most of the
// cost of reading a set with embedded images): they are copied from the
// images column's binary array into each row's Images.
func yieldRecord(ctx context.Context, rec arrow.RecordBatch, opts ReadOptions, yield func(*Row) error) error {
	rec, images, err := withoutImageBytes(rec)
	if err != nil {
		return err
	}
	defer rec.Release()
	rec, nums, err := withoutNumericLists(rec)
	if err != nil {
		return err
	}
	defer rec.Release()
	var buf bytes.Buffer
	if err := array.RecordToJSON(rec, &buf); err != nil {
		return err
	}
	dec := json.NewDecoder(&buf)
	for i := 0; ; i++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		var r Row
		if err := dec.Decode(&r); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("decode row: %w", err)
		}
		if images != nil {
			start, end := images.list.ValueOffsets(i)
			if int(end-start) != len(r.Images) {
				return fmt.Errorf("decode row %d: %d images, the column holds %d", i, len(r.Images), end-start)
			}
			for k := range r.Images {
				if opts.SkipImageBytes != nil && opts.SkipImageBytes(r.Images[k].SHA256) {
					continue
				}
				if j := int(start) + k; images.bytes.IsValid(j) {
					r.Images[k].Bytes = bytes.Clone(images.bytes.Value(j))
				}
			}
		}
		if err := nums.fill(&r, i); err != nil {
			return fmt.Errorf("decode row %d: %w", i, err)
		}
		if err := yield(&r); err != nil {
			return err
		}
	}
}

// numericLists are the token-level columns of a record batch, read from
// their arrays rather than through the JSON form (formatting and parsing
// a row's thousands of token ids and log-probabilities as JSON text was
// most of the cost of reading a set without embedded images). A nil
// array: the batch has no such column (an older schema).
type numericLists struct {
	promptIDs, completionIDs, logprobs *array.List
}

// withoutNumericLists returns rec without its prompt_token_ids,
// completion_token_ids and logprobs columns, and those columns; the caller
// releases the returned record.
func withoutNumericLists(rec arrow.RecordBatch) (arrow.RecordBatch, *numericLists, error) {
	nums := &numericLists{}
	targets := map[string]**array.List{
		"prompt_token_ids": &nums.promptIDs, "completion_token_ids": &nums.completionIDs, "logprobs": &nums.logprobs,
	}
	var fields []arrow.Field
	var cols []arrow.Array
	for i, f := range rec.Schema().Fields() {
		dst, ok := targets[f.Name]
		if !ok {
			fields = append(fields, f)
			cols = append(cols, rec.Column(i))
			continue
		}
		l, ok := rec.Column(i).(*array.List)
		if !ok {
			return nil, nil, fmt.Errorf("%s column of type %s", f.Name, rec.Column(i).DataType())
		}
		*dst = l
	}
	meta := rec.Schema().Metadata()
	return array.NewRecordBatch(arrow.NewSchema(fields, &meta), cols, rec.NumRows()), nums, nil
}

// fill sets row i's token-level fields from the lists: nil for a null
// value, as the JSON form decodes it.
func (n *numericLists) fill(r *Row, i int) error {
	var err error
	if r.PromptTokenIDs, err = listValues[int32, *array.Int32](n.promptIDs, i); err != nil {
		return fmt.Errorf("prompt_token_ids: %w", err)
	}
	if r.CompletionTokenIDs, err = listValues[int32, *array.Int32](n.completionIDs, i); err != nil {
		return fmt.Errorf("completion_token_ids: %w", err)
	}
	if r.LogProbs, err = listValues[float64, *array.Float64](n.logprobs, i); err != nil {
		return fmt.Errorf("logprobs: %w", err)
	}
	return nil
}

// listValues copies the values of list l at row i (nil when l is nil or
// the value is null; an empty, non-nil slice for an empty list).
func listValues[T int32 | float64, A interface{ Values() []T }](l *array.List, i int) ([]T, error) {
	if l == nil || l.IsNull(i) {
		return nil, nil
	}
	vals, ok := l.ListValues().(A)
	if !ok {
		return nil, fmt.Errorf("values of type %s", l.ListValues().DataType())
	}
	start, end := l.ValueOffsets(i)
	return slices.Clone(vals.Values()[start:end:end]), nil
}

// imageBytes are the images column of a record batch and its bytes field.
type imageBytes struct {
	list  *array.List
	bytes *array.Binary
}

// withoutImageBytes returns rec with the images column's "bytes" field
// left out, and that column and field; rec itself (retained) and nil when
// the batch has no such field. The caller releases the returned record.
func withoutImageBytes(rec arrow.RecordBatch) (arrow.RecordBatch, *imageBytes, error) {
	idx := rec.Schema().FieldIndices("images")
	if len(idx) != 1 {
		rec.Retain()
		return rec, nil, nil
	}
	list, ok := rec.Column(idx[0]).(*array.List)
	if !ok {
		return nil, nil, fmt.Errorf("images column of type %s", rec.Column(idx[0]).DataType())
	}
	elems, ok := list.ListValues().(*array.Struct)
	if !ok {
		return nil, nil, fmt.Errorf("images column of type %s", list.DataType())
	}
	st := elems.DataType().(*arrow.StructType)
	k, ok := st.FieldIdx("bytes")
	if !ok {
		rec.Retain()
		return rec, nil, nil
	}
	bin, ok := elems.Field(k).(*array.Binary)
	if !ok {
		return nil, nil, fmt.Errorf("images.bytes of type %s", elems.Field(k).DataType())
	}
	var fields []arrow.Field
	var children []arrow.ArrayData
	for i, f := range st.Fields() {
		if i != k {
			fields = append(fields, f)
			children = append(children, elems.Field(i).Data())
		}
	}
	sd := elems.Data()
	stData := array.NewData(arrow.StructOf(fields...), sd.Len(), sd.Buffers()[:1], children, sd.NullN(), sd.Offset())
	defer stData.Release()
	ld := list.Data()
	lt := list.DataType().(*arrow.ListType)
	elemField := lt.ElemField()
	elemField.Type = stData.DataType()
	listData := array.NewData(arrow.ListOfField(elemField), ld.Len(), ld.Buffers(), []arrow.ArrayData{stData}, ld.NullN(), ld.Offset())
	defer listData.Release()
	newList := array.MakeFromData(listData)
	defer newList.Release()
	cols := make([]arrow.Array, rec.NumCols())
	schemaFields := slices.Clone(rec.Schema().Fields())
	for i := range cols {
		cols[i] = rec.Column(i)
	}
	cols[idx[0]] = newList
	schemaFields[idx[0]].Type = newList.DataType()
	meta := rec.Schema().Metadata()
	out := array.NewRecordBatch(arrow.NewSchema(schemaFields, &meta), cols, rec.NumRows())
	return out, &imageBytes{list: list, bytes: bin}, nil
}
