package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

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
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("shard: read %s: %w", path, err)
	}
	defer f.Close()
	var rr array.RecordReader
	switch format {
	case FormatArrow:
		r, err := ipc.NewFileReader(f, ipc.WithAllocator(memory.DefaultAllocator))
		if err != nil {
			return fmt.Errorf("shard: read %s: %w", path, err)
		}
		defer r.Close()
		for i := range r.NumRecords() {
			rec, err := r.RecordBatch(i)
			if err != nil {
				return fmt.Errorf("shard: read %s: batch %d: %w", path, i, err)
			}
			if err := yieldRecord(ctx, rec, yield); err != nil {
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
		if err := yieldRecord(ctx, rr.RecordBatch(), yield); err != nil {
			return fmt.Errorf("shard: read %s: %w", path, err)
		}
	}
	if err := rr.Err(); err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("shard: read %s: %w", path, err)
	}
	return nil
}

// yieldRecord decodes the rows of rec through Arrow's JSON form (binary
// values as base64, which encoding/json decodes into []byte) into Rows,
// whose json tags are the column names.
func yieldRecord(ctx context.Context, rec arrow.RecordBatch, yield func(*Row) error) error {
	var buf bytes.Buffer
	if err := array.RecordToJSON(rec, &buf); err != nil {
		return err
	}
	dec := json.NewDecoder(&buf)
	for {
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
		if err := yield(&r); err != nil {
			return err
		}
	}
}
