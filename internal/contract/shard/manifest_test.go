package shard_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// TestManifest writes a shard set with its manifest, reads the manifest
// back, and checks it against the stored files.
func TestManifest(t *testing.T) {
	ctx := context.Background()
	b, _ := localBucket(t)
	if _, err := shard.ReadManifest(ctx, b, "sets/m"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("ReadManifest of a missing set: %v, want ErrNotFound", err)
	}
	w := newWriter(t, shard.Config{Bucket: b, Prefix: "sets/m", Format: shard.FormatParquet, RowsPerShard: 40,
		TempDir: t.TempDir(), Meta: testMeta()})
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
	for _, k := range []string{`"schema_version": 3`, `"path": "`, `"token_data"`, `"rows_with_token_ids"`, `"format": "parquet"`, `"set": "sets/m"`, `"sha256"`,
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
	bad.Files = append([]shard.File{{Path: "../elsewhere/x.parquet", Rows: 0, SHA256: files[0].SHA256, Format: shard.FormatParquet}}, m.Files...)
	if err := shard.WriteManifest(ctx, b, "sets/m", bad); err == nil {
		t.Error("WriteManifest accepted a file outside the set")
	}
	if shard.ManifestKey("") != "manifest.json" || shard.ManifestKey("/a/b/") != "a/b/manifest.json" {
		t.Error("ManifestKey")
	}
}

// TestManifestMovedSet writes a shard set, moves its folder to another
// directory under another prefix, and reads it back through its manifest:
// the files resolve relative to the manifest's folder. It also checks the
// token-data counts and the sampling list, and reads a manifest of schema
// version 1 (files with "key" from the bucket's root).
func TestManifestMovedSet(t *testing.T) {
	ctx := context.Background()
	b, dir := localBucket(t)
	w := newWriter(t, shard.Config{Bucket: b, Prefix: "out/2026-11-25/set-a", Format: shard.FormatArrow, RowsPerShard: 30,
		TempDir: t.TempDir(), Meta: testMeta()})
	rows := manyRows(70, 3)
	files := writeRolling(t, w, rows)
	m := shard.NewManifest("out/2026-11-25/set-a", shard.FormatArrow, testMeta(), files)
	if err := shard.WriteManifest(ctx, b, "out/2026-11-25/set-a", m); err != nil {
		t.Fatal(err)
	}
	var withIDs int64
	for _, r := range rows {
		if r.CompletionTokenIDs != nil {
			withIDs++
		}
	}
	if m.TokenData.RowsWithTokenIDs != withIDs || m.TokenData.RowsWithoutTokenIDs != int64(len(rows))-withIDs || m.TokenData.Complete {
		t.Errorf("token data %+v, want %d rows with ids of %d", m.TokenData, withIDs, len(rows))
	}
	var smp int64
	for _, s := range m.Sampling {
		smp += s.Rows
	}
	if len(m.Sampling) != 3 || smp != int64(len(rows)) { // two temperatures and none
		t.Errorf("sampling %+v", m.Sampling)
	}
	for _, f := range m.Files {
		if strings.Contains(f.Path, "/") {
			t.Errorf("file path %q is not relative to the manifest's folder", f.Path)
		}
	}

	// Readable by others (the umask of a test run may take write bits, but
	// not read bits: a 0600 file fails here).
	err := filepath.WalkDir(filepath.Join(dir, "out"), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		if want := fs.FileMode(0o444); d.IsDir() && fi.Mode().Perm()&0o555 != 0o555 || !d.IsDir() && fi.Mode().Perm()&want != want {
			t.Errorf("%s: mode %o, not readable by others", p, fi.Mode().Perm())
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// Move the set's folder elsewhere, under another depth.
	other := t.TempDir()
	if err := os.MkdirAll(filepath.Join(other, "copied"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "out", "2026-11-25", "set-a"), filepath.Join(other, "copied", "here")); err != nil {
		t.Fatal(err)
	}
	moved := openLocal(t, other)
	got, err := shard.ReadManifest(ctx, moved, "copied/here")
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i, f := range got.Files {
		if want := "copied/here/" + files[i].Path; f.Key != want {
			t.Errorf("file %d resolves to %s, want %s", i, f.Key, want)
		}
		if sum, size := fileSHA256(t, moved, f.Key); sum != f.SHA256 || size != f.Bytes {
			t.Errorf("%s: sha256 %s, %d bytes; manifest %s, %d bytes", f.Key, sum, size, f.SHA256, f.Bytes)
		}
		paths = append(paths, filepath.Join(other, filepath.FromSlash(f.Key)))
	}
	shardtest.Compare(t, rows, shardtest.Read(t, paths...)...)

	// A schema-1 manifest: "key" from the bucket's root, no "path".
	legacy := fmt.Sprintf(`{"schema_version":1,"format":"arrow","set":"out/2026-11-25/set-a","files":[{"key":"out/2026-11-25/set-a/%s","rows":%d,"bytes":%d,"sha256":"%s","format":"arrow"}]}`,
		files[0].Path, files[0].Rows, files[0].Bytes, files[0].SHA256)
	mpath := filepath.Join(other, "copied", "here", shard.ManifestName)
	if err := os.Remove(mpath); err != nil { // a new file: the old one's recorded SHA-256 goes with it
		t.Fatal(err)
	}
	if err := os.WriteFile(mpath, []byte(legacy), 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := shard.ReadManifest(ctx, moved, "copied/here")
	if err != nil {
		t.Fatal(err)
	}
	if len(old.Files) != 1 || old.Files[0].Path != files[0].Path || old.Files[0].Key != "copied/here/"+files[0].Path {
		t.Errorf("schema-1 manifest read as %+v", old.Files)
	}
}
