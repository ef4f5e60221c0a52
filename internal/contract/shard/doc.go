// Package shard writes GRPO training rows (Row) into shard files for the
// external trainer: Arrow IPC files (default) or Parquet (zstd), one column
// per Row field, with the shard set's Meta in every file's schema metadata.
//
// A Writer streams rows into Arrow builders and writes them out in record
// batches (row groups for Parquet) to a temporary file, so memory stays at
// about one batch whatever the shard's size. Commit finishes the file and
// uploads it to a blob.Bucket (a local directory or S3) under
// "<prefix>/<name>.arrow|.parquet" with its SHA-256; before Commit nothing
// is in the bucket, so readers never see a partial or uncommitted shard.
// The Manifest ("<prefix>/manifest.json") lists a set's files with their
// rows, sizes and SHA-256, the schema, the Meta and the producer's counts.
//
// The subpackage shardtest reads shards back with an independent reader
// (tools/reader: apache-arrow and DuckDB under Node.js) and compares them
// with the rows written. docs/shards.md describes the columns and how a
// trainer loads the files.
package shard
