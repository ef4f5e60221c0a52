package shard_test

import (
	"context"
	"errors"
	"io"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/shard"
)

// TestManifest writes a shard set with its manifest, reads the manifest
// back, and checks it against the stored files.
func TestManifest(t *testing.T) {
	ctx := context.Background()
	b, _ := localBucket(t)
	if _, err := shard.ReadManifest(ctx, b, "sets/m"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("ReadManifest of a missing set: %v, want ErrNotFound", err)
	}
	w, err := shard.NewWriter(shard.Config{Bucket: b, Prefix: "sets/m", Format: shard.FormatParquet, RowsPerShard: 40,
		TempDir: t.TempDir(), Meta: testMeta()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	rows := manyRows(100, 9)
	files := writeRolling(t, w, rows)

	m := shard.NewManifest("sets/m/", shard.FormatParquet, testMeta(), files)
	m.Counts.Trajectories = 13
	m.Counts.Groups = 13
	m.Counts.ZeroVarianceGroups = 2
	m.Counts.DroppedGroups = 1
	m.Counts.RowsPerApp = map[string]int{}
	for _, r := range rows {
		m.Counts.RowsPerApp[r.App]++
	}
	if m.Counts.Rows != len(rows) || m.Set != "sets/m" || len(m.Schema) != len(shard.Columns()) {
		t.Errorf("NewManifest = %+v", m)
	}
	if err := shard.WriteManifest(ctx, b, "sets/m", m); err != nil {
		t.Fatal(err)
	}
	got, err := shard.ReadManifest(ctx, b, "sets/m")
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, m) {
		t.Errorf("ReadManifest = %+v\nwant %+v", got, m)
	}
	keys := listKeys(t, b, "sets/m/")
	if len(keys) != len(files)+1 || !slices.Contains(keys, "sets/m/manifest.json") {
		t.Errorf("set holds %v", keys)
	}
	for _, f := range got.Files {
		sum, size := fileSHA256(t, b, f.Key)
		if sum != f.SHA256 || size != f.Bytes {
			t.Errorf("%s: stored sha256 %s, %d bytes; manifest %s, %d bytes", f.Key, sum, size, f.SHA256, f.Bytes)
		}
		if info, err := b.Stat(ctx, f.Key); err != nil || info.SHA256 != f.SHA256 {
			t.Errorf("%s: Stat = %+v, %v: want the recorded SHA-256", f.Key, info, err)
		}
	}

	// The JSON uses the documented names.
	rc, _, err := b.Get(ctx, "sets/m/manifest.json")
	if err != nil {
		t.Fatal(err)
	}
	var sb strings.Builder
	if _, err := io.Copy(&sb, rc); err != nil {
		t.Fatal(err)
	}
	rc.Close()
	for _, k := range []string{`"schema_version": 1`, `"format": "parquet"`, `"set": "sets/m"`, `"sha256"`,
		`"zero_variance_groups": 2`, `"rows_per_app"`, `"type": "list<item: float64>"`, `"codapipe_version": "test-1.2.3"`, `"estimator": "grpo(`} {
		if !strings.Contains(sb.String(), k) {
			t.Errorf("manifest.json lacks %s", k)
		}
	}

	// Inconsistent manifests are refused.
	bad := m
	bad.Counts.Rows++
	if err := shard.WriteManifest(ctx, b, "sets/m", bad); err == nil {
		t.Error("WriteManifest accepted wrong row counts")
	}
	bad = m
	bad.Files = append([]shard.File{{Key: "elsewhere/x.parquet", Rows: 0, SHA256: files[0].SHA256, Format: shard.FormatParquet}}, m.Files...)
	if err := shard.WriteManifest(ctx, b, "sets/m", bad); err == nil {
		t.Error("WriteManifest accepted a file outside the set")
	}
	if shard.ManifestKey("") != "manifest.json" || shard.ManifestKey("/a/b/") != "a/b/manifest.json" {
		t.Error("ManifestKey")
	}
}
