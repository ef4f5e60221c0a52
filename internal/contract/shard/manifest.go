package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"path"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// ManifestName is the name of the manifest under a shard set's prefix.
const ManifestName = "manifest.json"

// Manifest describes a shard set: its files with their row counts, sizes and
// SHA-256, the schema, how the rows were produced, and counts filled by the
// producer (the advantage service). It is stored as "<prefix>/manifest.json".
// Its file paths are relative to its own folder, so the set can be copied
// or moved as a whole.
type Manifest struct {
	// SchemaVersion is the row schema's version (SchemaVersion).
	SchemaVersion int `json:"schema_version"`
	// Format is the files' format.
	Format Format `json:"format"`
	// Created is when the manifest was written.
	Created time.Time `json:"created"`
	// Set is the shard set's key prefix in the bucket it was written to
	// (informational: readers resolve the files against the folder they
	// read the manifest from, see ResolveKey).
	Set string `json:"set"`
	// Files are the committed files, in commit order.
	Files []File `json:"files"`
	// Schema is the files' columns (Columns()).
	Schema []Column `json:"schema"`
	// Meta is what every file carries in its schema metadata.
	Meta Meta `json:"meta"`
	// Counts are the producer's counts.
	Counts Counts `json:"counts"`
	// TokenData says how complete the token-level columns are.
	TokenData TokenData `json:"token_data"`
	// Sampling counts the set's rows by the planner's sampling parameters
	// (their sampling column), in the order first seen.
	Sampling []SamplingRows `json:"sampling"`
	// Executors counts the set's rows by the executor that grounded their
	// plans (model, checkpoint, coordinate space), PromptSets by the
	// prompt set they were made with; both in the order first seen.
	Executors  []ExecutorRows  `json:"executors"`
	PromptSets []PromptSetRows `json:"prompt_sets"`
	// Images are the set's image files (ImagesFiles), sorted by path: each
	// one every row naming it needs, committed before the first shard that
	// names it. Empty when the rows embed their images or reference the
	// blob store (Meta.Images).
	Images []ImageFile `json:"images,omitempty"`

	// Provenance, filled by the producer (see provenance.go and
	// SetSources): the runs and planner checkpoints the rows come from,
	// with their counts, and the selection the set was made with.
	Runs        []string   `json:"runs,omitempty"`
	Checkpoints []string   `json:"checkpoints,omitempty"`
	Sources     []Source   `json:"sources,omitempty"`
	Selection   *Selection `json:"selection,omitempty"`
	// JudgeVersion is the one judge version (traj.JudgeVersion.ID) the
	// set's rows rest on: a set is bound to one; judgements of others are
	// not in it.
	JudgeVersion string `json:"judge_version,omitempty"`
}

// TokenData counts the rows with and without completion_token_ids (and
// logprobs, recorded together): a row has none only when the endpoint that
// produced its plan could not give them.
type TokenData struct {
	// RowsWithTokenIDs is the number of rows with token ids.
	RowsWithTokenIDs int64 `json:"rows_with_token_ids"`
	// RowsWithoutTokenIDs is the number of rows whose token ids are null.
	RowsWithoutTokenIDs int64 `json:"rows_without_token_ids"`
	// Complete is true when every row has token ids.
	Complete bool `json:"complete"`
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
		m.TokenData.RowsWithTokenIDs += f.TokenIDRows
		for _, s := range f.Sampling {
			m.Sampling = addSampling(m.Sampling, s.Sampling, s.Rows)
		}
		for _, e := range f.Executors {
			m.Executors = addExecutor(m.Executors, e.Executor, e.Rows)
		}
		for _, p := range f.PromptSets {
			m.PromptSets = addPromptSet(m.PromptSets, p.PromptSet, p.Rows)
		}
		m.Images = mergeImages(m.Images, f.Images)
	}
	m.TokenData.RowsWithoutTokenIDs = int64(m.Counts.Rows) - m.TokenData.RowsWithTokenIDs
	m.TokenData.Complete = m.TokenData.RowsWithoutTokenIDs == 0
	if m.Sampling == nil {
		m.Sampling = []SamplingRows{}
	}
	if m.Executors == nil {
		m.Executors = []ExecutorRows{}
	}
	if m.PromptSets == nil {
		m.PromptSets = []PromptSetRows{}
	}
	if len(m.Images) == 0 {
		m.Images = nil
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

// ResolveKey returns the bucket key of a file listed in the manifest of the
// set at prefix: its Path under prefix, the folder the manifest is in.
func ResolveKey(prefix string, f File) string {
	if p := strings.Trim(prefix, "/"); p != "" {
		return p + "/" + f.Path
	}
	return f.Path
}

// checkRelPath reports a path that is not a clean relative path inside
// the manifest's folder.
func checkRelPath(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("empty path")
	case strings.HasPrefix(p, "/"), strings.Contains(p, "\\"):
		return fmt.Errorf("path %q is not relative", p)
	case path.Clean(p) != p, p == ".", p == "..", strings.HasPrefix(p, "../"):
		return fmt.Errorf("path %q is not a clean path inside the manifest's folder", p)
	}
	return nil
}

// Validate checks that every file has a clean path relative to the
// manifest's folder, a SHA-256 and the manifest's format, that
// Counts.Rows is the files' total, and that every image file is named by
// its SHA-256 (ImagePath).
func (m *Manifest) Validate() error {
	var total int64
	for i, f := range m.Files {
		if err := checkRelPath(f.Path); err != nil {
			return fmt.Errorf("shard: manifest: file %d: %w", i, err)
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
	for i, im := range m.Images {
		if err := checkRelPath(im.Path); err != nil {
			return fmt.Errorf("shard: manifest: image %d: %w", i, err)
		}
		if len(im.SHA256) != 64 || im.Path != ImagePath(im.SHA256) {
			return fmt.Errorf("shard: manifest: image %d %s: SHA-256 %q", i, im.Path, im.SHA256)
		}
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

// ReadManifest reads the manifest of the set at prefix and sets each file's
// Key to its path resolved against prefix (ResolveKey): the set may have
// been copied or moved since it was written. A manifest of schema version
// 1, whose files carry only "key" (the key from the root of the bucket it
// was written to, "<set>/<name>"), is read too: the file name becomes the
// path (see File.UnmarshalJSON). A missing manifest is an error wrapping
// blob.ErrNotFound.
func ReadManifest(ctx context.Context, b blob.Bucket, prefix string) (Manifest, error) {
	data, err := readLimited(ctx, b, ManifestKey(prefix), maxManifestBytes)
	if err != nil {
		return Manifest{}, fmt.Errorf("shard: %w", err)
	}
	return DecodeManifest(prefix, data)
}

// readLimited reads the object key of b whole, refusing one larger than
// limit bytes. Errors name the key.
func readLimited(ctx context.Context, b blob.Bucket, key string, limit int64) ([]byte, error) {
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(io.LimitReader(rc, limit+1))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", key, err)
	}
	if int64(len(data)) > limit {
		return nil, fmt.Errorf("%s: larger than %d bytes", key, limit)
	}
	return data, nil
}

// DecodeManifest decodes the manifest of the set at prefix from data, as
// ReadManifest does once it has read it: every file must have a clean
// relative path (an error names the file's index), and its Key is set to
// the path resolved against prefix. Errors name the manifest's key.
func DecodeManifest(prefix string, data []byte) (Manifest, error) {
	key := ManifestKey(prefix)
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("shard: %s: %w", key, err)
	}
	for i := range m.Files {
		f := &m.Files[i]
		if err := checkRelPath(f.Path); err != nil {
			return Manifest{}, fmt.Errorf("shard: %s: file %d: %w", key, i, err)
		}
		f.Key = ResolveKey(prefix, *f)
	}
	return m, nil
}
