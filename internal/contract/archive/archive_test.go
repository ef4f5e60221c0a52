package archive

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"testing/iotest"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestParse: keys made by Key come apart into the
// same names, whatever characters they hold; other keys are refused.
func TestParse(t *testing.T) {
	for _, n := range []struct{ run, app, id, ver string }{
		{"sft-expert", "ChimeraX", "01ABC", "3612d87c3c433c43"},
		{"night/1", "GRASS GIS", "01X", "v1"},
		{"..", "a.b", "id.with.dots", "ver"},
		{"ünï=cødé", "=41", "x", "y"},
	} {
		key := Key(n.run, n.app, n.id, n.ver)
		k, ok := Parse(key)
		if !ok || k.Run != n.run || k.App != n.app || k.ID != n.id || k.Version != n.ver || k.Key != key {
			t.Errorf("%q: %+v %v", key, k, ok)
		}
	}
	for _, key := range []string{"judged/a/b/c.json", "judged/a/b/c.d.e.json", "judged/a/c.v.json", "other/a/b/c.v.json", "judged/a/b/c.v.txt", "judged/a=4/b/c.v.json", "judged/a=zz/b/c.v.json"} {
		if k, ok := Parse(key); ok {
			t.Errorf("%q parsed as %+v", key, k)
		}
	}
}

// TestRead: a document comes back with its bytes; a missing key and a
// document that does not decode are told apart by their errors.
func TestRead(t *testing.T) {
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	jdoc := traj.Judged{SchemaVersion: traj.SchemaVersion}
	for file, dst := range map[string]any{"trajectory": &jdoc.Trajectory, "judgement": &jdoc.Judgement} {
		raw, err := os.ReadFile("../../../pkg/traj/testdata/" + file + ".golden.json")
		if err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, dst); err != nil {
			t.Fatal(err)
		}
	}
	body, err := traj.Marshal(&jdoc)
	if err != nil {
		t.Fatal(err)
	}
	for key, doc := range map[string][]byte{"judged/good.json": body, "judged/bad.json": []byte(`{"trajectory": 1}`)} {
		if _, err := b.Put(ctx, key, bytes.NewReader(doc), int64(len(doc)), blob.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	jd, raw, err := Read(ctx, b, "judged/good.json")
	if err != nil || !bytes.Equal(raw, body) || jd.Trajectory.ID == "" {
		t.Fatalf("good document: %v", err)
	}
	if _, _, err := Read(ctx, b, "judged/bad.json"); !errors.Is(err, ErrDamaged) {
		t.Errorf("bad document: %v, want ErrDamaged", err)
	}
	if _, _, err := Read(ctx, b, "judged/none.json"); !errors.Is(err, blob.ErrNotFound) {
		t.Errorf("missing document: %v, want blob.ErrNotFound", err)
	}
}

// flakyBucket gives the first Get of a key a body cut short.
type flakyBucket struct {
	blob.Bucket
	gets int
}

func (f *flakyBucket) Get(ctx context.Context, key string) (io.ReadCloser, blob.Info, error) {
	rc, info, err := f.Bucket.Get(ctx, key)
	f.gets++
	if err != nil || f.gets > 1 {
		return rc, info, err
	}
	b, _ := io.ReadAll(io.LimitReader(rc, 10))
	rc.Close()
	return io.NopCloser(io.MultiReader(bytes.NewReader(b), iotest.ErrReader(fmt.Errorf("cut short: %w", blob.ErrChecksumMismatch)))), info, nil
}

// TestReadCutShortOnceIsNotDamage: one read that does not match its
// checksum is read again; only a second mismatch is reported (Damaged).
func TestReadCutShortOnceIsNotDamage(t *testing.T) {
	ctx := context.Background()
	b, err := blob.OpenBucket(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	doc := []byte(`{"schema_version": 1}`)
	if _, err := b.Put(ctx, "judged/x.json", bytes.NewReader(doc), int64(len(doc)), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	fb := &flakyBucket{Bucket: b}
	_, raw, err := Read(ctx, fb, "judged/x.json")
	if blob.Damaged(err) || fb.gets != 2 {
		t.Fatalf("a read cut short once: %v after %d reads, want a second read and no damage", err, fb.gets)
	}
	if err == nil && !bytes.Equal(raw, doc) {
		t.Fatalf("read %q, want %q", raw, doc)
	}
}
