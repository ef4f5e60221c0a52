package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
)

// ManifestName is the name of the manifest under a shard set's prefix.
const ManifestName = "manifest.json"

// Manifest describes a shard set: its files with their row counts, sizes and
// SHA-256, the schema, how the rows were produced, and counts filled by the
// producer (the advantage service). It is stored as "<prefix>/manifest.json".
type Manifest struct {
	// SchemaVersion is the row schema's version (SchemaVersion).
	SchemaVersion int `json:"schema_version"`
	// Format is the files' format.
	Format Format `json:"format"`
	// Created is when the manifest was written.
	Created time.Time `json:"created"`
	// Set is the shard set's key prefix in the bucket.
	Set string `json:"set"`
	// Files are the committed files, in commit order.
	Files []File `json:"files"`
	// Schema is the files' columns (Columns()).
	Schema []Column `json:"schema"`
	// Meta is what every file carries in its schema metadata.
	Meta Meta `json:"meta"`
	// Counts are the producer's counts.
	Counts Counts `json:"counts"`

	// Provenance, filled by the producer (see provenance.go and
	// SetSources): the runs and planner checkpoints the rows come from,
	// with their counts, and the selection the set was made with.
	Runs        []string   `json:"runs,omitempty"`
	Checkpoints []string   `json:"checkpoints,omitempty"`
	Sources     []Source   `json:"sources,omitempty"`
	Selection   *Selection `json:"selection,omitempty"`
}

// Counts are a shard set's counts, filled by the producer.
type Counts struct {
	// Trajectories is the number of trajectories that contributed rows or
	// groups.
	Trajectories int `json:"trajectories"`
	// Groups is the number of groups written (zero-variance groups that were
	// kept included).
	Groups int `json:"groups"`
	// ZeroVarianceGroups is the number of zero-variance groups (kept or
	// dropped).
	ZeroVarianceGroups int `json:"zero_variance_groups"`
	// DroppedGroups is the number of groups not written (zero-variance under
	// the drop policy, or empty).
	DroppedGroups int `json:"dropped_groups"`
	// Rows is the number of rows in the files; it equals the sum of
	// Files[i].Rows.
	Rows int `json:"rows"`
	// RowsPerApp is the number of rows per application.
	RowsPerApp map[string]int `json:"rows_per_app"`
}

// NewManifest returns a manifest for the files of a set written with meta
// in format: SchemaVersion, Format, Created (now), Set, Files, Schema and
// Meta filled, Counts.Rows set to the files' total; the caller fills the
// other counts.
func NewManifest(prefix string, format Format, meta Meta, files []File) Manifest {
	m := Manifest{
		SchemaVersion: SchemaVersion,
		Format:        format,
		Created:       time.Now().UTC(),
		Set:           strings.Trim(prefix, "/"),
		Files:         append([]File(nil), files...),
		Schema:        Columns(),
		Meta:          meta,
	}
	for _, f := range files {
		m.Counts.Rows += int(f.Rows)
	}
	return m
}

// ManifestKey returns the key of the manifest of the set at prefix.
func ManifestKey(prefix string) string {
	if p := strings.Trim(prefix, "/"); p != "" {
		return p + "/" + ManifestName
	}
	return ManifestName
}

// Validate checks that every file is under the set's prefix, has a SHA-256
// and the manifest's format, and that Counts.Rows is the files' total.
func (m *Manifest) Validate() error {
	var total int64
	for i, f := range m.Files {
		if m.Set != "" && !strings.HasPrefix(f.Key, m.Set+"/") {
			return fmt.Errorf("shard: manifest: file %d %s: not under %s/", i, f.Key, m.Set)
		}
		if len(f.SHA256) != 64 {
			return fmt.Errorf("shard: manifest: file %d %s: SHA-256 %q", i, f.Key, f.SHA256)
		}
		if f.Format != m.Format {
			return fmt.Errorf("shard: manifest: file %d %s: format %q, set format %q", i, f.Key, f.Format, m.Format)
		}
		total += f.Rows
	}
	if total != int64(m.Counts.Rows) {
		return fmt.Errorf("shard: manifest: counts.rows = %d, files hold %d", m.Counts.Rows, total)
	}
	return nil
}

// WriteManifest validates m and stores it as "<prefix>/manifest.json"
// (indented JSON, newline-terminated). The Put is atomic: readers see the old manifest or the
// new one. Writing it last, after every file is committed, makes it the
// set's commit record.
func WriteManifest(ctx context.Context, b blob.Bucket, prefix string, m Manifest) error {
	key := ManifestKey(prefix)
	if err := m.Validate(); err != nil {
		return err
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // the types read list<item: …>, not list\u003citem: …\u003e
	enc.SetIndent("", "  ")
	if err := enc.Encode(m); err != nil {
		return fmt.Errorf("shard: %s: %w", key, err)
	}
	data := buf.Bytes()
	if _, err := b.Put(ctx, key, bytes.NewReader(data), int64(len(data)), blob.PutOptions{ContentType: "application/json"}); err != nil {
		return fmt.Errorf("shard: %s: %w", key, err)
	}
	return nil
}

// maxManifestBytes bounds the manifest ReadManifest accepts.
const maxManifestBytes = 256 << 20

// ReadManifest reads the manifest of the set at prefix. A missing manifest
// is an error wrapping blob.ErrNotFound.
func ReadManifest(ctx context.Context, b blob.Bucket, prefix string) (Manifest, error) {
	key := ManifestKey(prefix)
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return Manifest{}, fmt.Errorf("shard: %s: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, maxManifestBytes+1))
	if err != nil {
		return Manifest{}, fmt.Errorf("shard: %s: %w", key, err)
	}
	if len(data) > maxManifestBytes {
		return Manifest{}, fmt.Errorf("shard: %s: larger than %d bytes", key, maxManifestBytes)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("shard: %s: %w", key, err)
	}
	return m, nil
}
