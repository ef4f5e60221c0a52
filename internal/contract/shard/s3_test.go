package shard_test

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/minio/minio-go/v7"
)

// TestS3MinIO writes shard sets to a real MinIO server (one per format,
// with one Arrow shard above the tests' 5 MiB part size: a multipart upload,
// which its ETag shows), checks that
// nothing is visible before Commit, writes and reads the manifests,
// downloads every file and reads it with the independent reader.
func TestS3MinIO(t *testing.T) {
	shardtest.Require(t)
	srv := miniotest.Start(t)
	ctx := context.Background()
	cfg := srv.Config()
	cfg.PartSize = blob.MinPartSize // a shard of a few MiB is already a multipart upload
	b, err := blob.OpenBucket(ctx, srv.URL("training"), cfg)
	raw := srv.Client(t)
	if err != nil {
		t.Fatal(err)
	}
	sets := []struct {
		format       shard.Format
		rowsPerShard int64
		rows         []shard.Row
	}{
		{shard.FormatArrow, 0, imageRows(30, 200<<10, 11)}, // one 6 MB shard: a multipart upload of two 5 MiB parts
		{shard.FormatParquet, 5, append(edgeRows(), imageRows(8, 100<<10, 12)...)},
	}
	for _, set := range sets {
		prefix := "sets/" + string(set.format)
		w, err := shard.NewWriter(shard.Config{Bucket: b, Prefix: prefix, Format: set.format,
			RowsPerShard: set.rowsPerShard, TempDir: t.TempDir(), Meta: testMeta()})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Add(set.rows[:1]); err != nil {
			t.Fatal(err)
		}
		if keys := listKeys(t, b, prefix); len(keys) != 0 {
			t.Errorf("%s: before Commit the bucket holds %v", prefix, keys)
		}
		files := writeRolling(t, w, set.rows[1:]) // the first file also holds the row added above
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		m := shard.NewManifest(prefix, set.format, testMeta(), files)
		if err := shard.WriteManifest(ctx, b, prefix, m); err != nil {
			t.Fatal(err)
		}
		got, err := shard.ReadManifest(ctx, b, prefix)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, m) || got.Counts.Rows != len(set.rows) {
			t.Errorf("%s: manifest = %+v\nwant %+v", prefix, got, m)
		}

		dir := t.TempDir()
		var local []string
		for _, f := range got.Files {
			info, err := b.Stat(ctx, f.Key)
			if err != nil || info.SHA256 != f.SHA256 || info.Size != f.Bytes {
				t.Errorf("%s: Stat = %+v, %v; manifest %+v", f.Key, info, err, f)
			}
			if f.Bytes > blob.MinPartSize {
				oi, err := raw.StatObject(ctx, srv.Bucket, "training/"+f.Key, minio.StatObjectOptions{})
				if err != nil || !strings.Contains(oi.ETag, "-") {
					t.Errorf("%s (%d bytes): ETag %q, %v; want a multipart upload", f.Key, f.Bytes, oi.ETag, err)
				}
			}
			sum, _ := fileSHA256(t, b, f.Key)
			if sum != f.SHA256 {
				t.Errorf("%s: content sha256 %s, manifest %s", f.Key, sum, f.SHA256)
			}
			local = append(local, download(t, b, f.Key, dir))
		}
		shardtest.Compare(t, set.rows, shardtest.Read(t, local...)...)
	}
}

// download copies the object key of b into dir and returns the local path.
func download(t testing.TB, b blob.Bucket, key, dir string) string {
	t.Helper()
	rc, _, err := b.Get(context.Background(), key)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	path := filepath.Join(dir, filepath.Base(key))
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil { // the reader verifies the SHA-256 at EOF
		t.Fatal(err)
	}
	return path
}
