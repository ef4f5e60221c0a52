package shard_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
)

// groupRows returns the rows of groups step-mode groups of size
// candidates each: group g is step g of trajectory "t<g/2>" and shows two
// images (the previous step's and its own screenshot), so consecutive
// groups share one, as a trajectory's steps do.
func groupRows(groups, size int, seed uint64) []shard.Row {
	rng := rand.New(rand.NewPCG(seed, 3))
	shots := imageRows(groups+1, 4<<10, seed)
	var rows []shard.Row
	for g := range groups {
		imgs := []shard.Image{shots[g].Images[0], shots[g+1].Images[0]}
		for c := range size {
			r := manyRow(len(rows), rng)
			r.App = []string{"ChimeraX", "KAlgebra"}[g%2]
			r.TrajectoryID, r.Step, r.Candidate = fmt.Sprintf("t%d", g/2), int32(g), int32(c+1)
			r.GroupID, r.GroupSize = fmt.Sprintf("g%d", g), int32(size)
			r.Images = slices.Clone(imgs)
			rows = append(rows, r)
		}
	}
	return rows
}

// writeSet writes rows (in shards of perShard rows) and their manifest as
// the set prefix of b with the given image mode, as the advantage service
// does: images stored before each shard is added, the manifest last.
func writeSet(t *testing.T, b blob.Bucket, prefix string, mode shard.ImageMode, rows []shard.Row, perShard int) shard.Manifest {
	t.Helper()
	ctx := context.Background()
	meta := testMeta()
	n := 0
	name := func() string { n++; return fmt.Sprintf("part-%d", n-1) }
	w := newWriter(t, shard.Config{Bucket: b, Prefix: prefix, TempDir: t.TempDir(), Meta: meta, Images: mode, Name: name})
	var files []shard.File
	groups, perApp := map[string]bool{}, map[string]int{}
	for len(rows) > 0 {
		part := rows[:min(perShard, len(rows))]
		rows = rows[len(part):]
		if mode != shard.ImagesEmbed {
			if err := w.PutImages(ctx, part); err != nil {
				t.Fatal(err)
			}
		}
		if err := w.Add(part); err != nil {
			t.Fatal(err)
		}
		f, err := w.Commit(ctx)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
		for _, r := range part {
			groups[r.GroupID] = true
			perApp[r.App]++
		}
	}
	meta.Images = mode
	m := shard.NewManifest(prefix, shard.FormatArrow, meta, files)
	m.Counts.Groups, m.Counts.RowsPerApp = len(groups), perApp
	if err := shard.WriteManifest(ctx, b, prefix, m); err != nil {
		t.Fatal(err)
	}
	return m
}

// TestImageFiles writes a set with its images as files: each distinct
// image is stored once under images/ and listed in the manifest with its
// size and SHA-256, rows name it by path and carry no bytes, ReadImage
// returns its bytes, a second writer storing the same images (another
// process) changes nothing, and the set verifies.
func TestImageFiles(t *testing.T) {
	ctx := context.Background()
	b, _ := localBucket(t)
	rows := groupRows(4, 3, 1)
	want := map[string][]byte{}
	for _, r := range rows {
		for _, im := range r.Images {
			want[im.SHA256] = im.Bytes
		}
	}
	m := writeSet(t, b, "sets/f", shard.ImagesFiles, slices.Clone(rows), 5)
	if len(m.Images) != len(want) || m.Meta.Images != shard.ImagesFiles {
		t.Fatalf("manifest lists %d image files (meta images %q), want %d", len(m.Images), m.Meta.Images, len(want))
	}
	for _, im := range m.Images {
		body, err := blob.ReadAll(ctx, b, "sets/f/"+im.Path)
		if err != nil {
			t.Fatal(err)
		}
		if im.Path != "images/"+im.SHA256+".png" || !bytes.Equal(body, want[im.SHA256]) || im.Bytes != int64(len(body)) {
			t.Errorf("image file %s: %d bytes, manifest %+v", im.Path, len(body), im)
		}
	}
	// A shard naming MaxShardImages image files is full.
	wf := newWriter(t, shard.Config{Bucket: b, Prefix: "sets/full", TempDir: t.TempDir(), Meta: testMeta(), Images: shard.ImagesFiles})
	many := groupRows(shard.MaxShardImages, 1, 9) // MaxShardImages + 1 distinct images
	if err := wf.PutImages(ctx, many[:len(many)/2]); err != nil {
		t.Fatal(err)
	}
	if err := wf.Add(many[:len(many)/2]); err != nil || wf.Full() {
		t.Fatalf("half full: %v, full %v", err, wf.Full())
	}
	if err := wf.PutImages(ctx, many); err != nil {
		t.Fatal(err)
	}
	if err := wf.Add(many[len(many)/2:]); err != nil || !wf.Full() {
		t.Fatalf("%d image files: %v, full %v", shard.MaxShardImages+1, err, wf.Full())
	}
	// Every file lists the images its rows need.
	for _, f := range m.Files {
		if len(f.Images) == 0 {
			t.Errorf("%s lists no image files", f.Path)
		}
	}
	var got []shard.Row
	for _, f := range m.Files {
		if err := shard.ReadFile(ctx, download(t, b, f.Key, t.TempDir()), f.Format, func(r *shard.Row) error { got = append(got, *r); return nil }); err != nil {
			t.Fatal(err)
		}
	}
	// The independent reader reads the same rows: every value, the
	// images' paths included.
	shardtest.Require(t)
	var local []string
	for _, f := range m.Files {
		local = append(local, download(t, b, f.Key, t.TempDir()))
	}
	var npm []shard.Row
	for _, f := range shardtest.Read(t, local...) {
		rs, err := f.Decode()
		if err != nil {
			t.Fatal(err)
		}
		npm = append(npm, rs...)
	}
	// rows are what was written: PutImages replaced their images' bytes
	// by the files' paths (the rows share their Image values).
	for _, d := range shardtest.Diff(rows, npm) {
		t.Error(d)
	}
	for _, r := range got {
		for _, im := range r.Images {
			if im.Bytes != nil || im.Path != shard.ImagePath(im.SHA256) {
				t.Fatalf("row image %+v: want a path and no bytes", im)
			}
			data, err := shard.ReadImage(ctx, b, "sets/f", im)
			if err != nil || !bytes.Equal(data, want[im.SHA256]) {
				t.Fatalf("ReadImage %s: %d bytes, %v", im.SHA256, len(data), err)
			}
		}
	}
	if _, err := shard.ReadImage(ctx, b, "sets/f", shard.Image{SHA256: rows[0].Images[0].SHA256}); !errors.Is(err, shard.ErrImageNotInSet) {
		t.Errorf("ReadImage of a reference: %v, want ErrImageNotInSet", err)
	}
	// Another process writes the same images: the same files, no error.
	w2 := newWriter(t, shard.Config{Bucket: b, Prefix: "sets/f", TempDir: t.TempDir(), Meta: testMeta(), Images: shard.ImagesFiles})
	again := groupRows(4, 3, 1)
	if err := w2.PutImages(ctx, again); err != nil {
		t.Fatal(err)
	}
	if _, err := shard.Verify(ctx, b, "sets/f", t.TempDir()); err != nil {
		t.Fatal(err)
	}
	// Rows whose images were not stored, or whose bytes are not their
	// SHA-256, are refused.
	if err := w2.Add(groupRows(1, 1, 2)); err == nil || !strings.Contains(err.Error(), "PutImages") {
		t.Errorf("Add of rows with bytes in files mode: %v", err)
	}
	bad := groupRows(1, 1, 3)
	bad[0].Images[0].Bytes = append([]byte{0}, bad[0].Images[0].Bytes[1:]...)
	if err := w2.PutImages(ctx, bad); !errors.Is(err, blob.ErrChecksumMismatch) {
		t.Errorf("PutImages of bytes that are not their SHA-256: %v", err)
	}
}

// TestVerify writes a sound set (images as files and embedded) and damages
// it one way per case; verify passes on the sound set and fails on each
// damaged one with a problem naming the file and, for a row, the row and
// field. The flipped byte and the missing image file also run on MinIO.
func TestVerify(t *testing.T) {
	ctx := context.Background()
	var srv *miniotest.Server
	cases := []struct {
		name   string
		mode   shard.ImageMode
		s3     bool
		rows   func() []shard.Row
		damage func(t *testing.T, b blob.Bucket, m shard.Manifest)
		want   string // in a problem's text; "" for none
	}{
		{name: "sound files", mode: shard.ImagesFiles},
		{name: "sound embedded", mode: shard.ImagesEmbed},
		{name: "sound files on s3", mode: shard.ImagesFiles, s3: true},
		{name: "flipped byte in a shard", mode: shard.ImagesFiles, damage: flipByte(1), want: "part-1.arrow: shard file has"},
		{name: "flipped byte in a shard on s3", mode: shard.ImagesFiles, s3: true, damage: flipByte(0), want: "part-0.arrow: shard file has"},
		{name: "flipped byte in an image file", mode: shard.ImagesFiles, damage: func(t *testing.T, b blob.Bucket, m shard.Manifest) {
			overwrite(t, b, "sets/v/"+m.Images[2].Path, func(p []byte) { p[len(p)/2] ^= 1 })
		}, want: ": image file has"},
		{name: "missing image file", mode: shard.ImagesFiles, damage: func(t *testing.T, b blob.Bucket, m shard.Manifest) {
			if err := b.Delete(ctx, "sets/v/"+m.Images[0].Path); err != nil {
				t.Fatal(err)
			}
		}, want: ".png: image file is missing"},
		{name: "missing image file on s3", mode: shard.ImagesFiles, s3: true, damage: func(t *testing.T, b blob.Bucket, m shard.Manifest) {
			if err := b.Delete(ctx, "sets/v/"+m.Images[0].Path); err != nil {
				t.Fatal(err)
			}
		}, want: ".png: image file is missing"},
		{name: "duplicate row", mode: shard.ImagesFiles, rows: func() []shard.Row {
			rows := groupRows(4, 3, 1)
			dup := rows[4]
			dup.GroupID = "g-other"
			dup.GroupSize = 1
			return append(rows, dup)
		}, want: "part-2.arrow row 0 trajectory_id,step,candidate: (t0, 1, 2) is also part-0.arrow row 4"},
		{name: "truncated group", mode: shard.ImagesFiles, rows: func() []shard.Row {
			rows := groupRows(4, 3, 1)
			return slices.Delete(rows, 7, 8)
		}, want: "group_id: group g2 is incomplete: 2 rows, group_size is 3"},
		{name: "candidate twice", mode: shard.ImagesEmbed, rows: func() []shard.Row {
			rows := groupRows(4, 3, 1)
			rows[5].Candidate, rows[5].TrajectoryID = 1, "t9"
			return rows
		}, want: "part-0.arrow row 5 candidate: candidate 1 appears twice in group g1"},
		{name: "embedded bytes damaged", mode: shard.ImagesEmbed, rows: func() []shard.Row {
			rows := groupRows(4, 3, 1)
			rows[2].Images = slices.Clone(rows[2].Images)
			rows[2].Images[1].Bytes = bytes.Clone(rows[2].Images[1].Bytes)
			rows[2].Images[1].Bytes[9] ^= 1
			return rows
		}, want: "part-0.arrow row 2 images[1].bytes: embedded bytes have SHA-256"},
		{name: "references only", mode: shard.ImagesStore, rows: func() []shard.Row {
			rows := groupRows(4, 3, 1)
			for i := range rows {
				rows[i].Images = slices.Clone(rows[i].Images)
				for k := range rows[i].Images {
					rows[i].Images[k].Bytes = nil
				}
			}
			return rows
		}, want: "part-0.arrow row 0 images[0]: image"},
		{name: "manifest counts", mode: shard.ImagesFiles, damage: func(t *testing.T, b blob.Bucket, m shard.Manifest) {
			m.Counts.RowsPerApp["KAlgebra"]++
			if err := shard.WriteManifest(ctx, b, "sets/v", m); err != nil {
				t.Fatal(err)
			}
		}, want: `manifest.json counts.rows_per_app: app "KAlgebra": 7, the rows hold 6`},
		{name: "row of another judge version", mode: shard.ImagesFiles, rows: func() []shard.Row {
			rows := groupRows(4, 3, 1)
			for i := range rows {
				rows[i].JudgeVersion = "00000000000000a1"
			}
			rows[7].JudgeVersion = "00000000000000b2"
			return rows
		}, damage: func(t *testing.T, b blob.Bucket, m shard.Manifest) {
			m.JudgeVersion = "00000000000000a1"
			if err := shard.WriteManifest(ctx, b, "sets/v", m); err != nil {
				t.Fatal(err)
			}
		}, want: `row 1 judge_version: "00000000000000b2", the set is bound to judge version "00000000000000a1"`},
		{name: "missing manifest", mode: shard.ImagesFiles, damage: func(t *testing.T, b blob.Bucket, m shard.Manifest) {
			if err := b.Delete(ctx, "sets/v/manifest.json"); err != nil {
				t.Fatal(err)
			}
		}, want: "manifest.json: "},
	}
	outer := t // the server outlives the case that starts it
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := localBucket(t)
			if tc.s3 {
				if srv == nil {
					srv = miniotest.Start(outer)
				}
				var err error
				if b, err = blob.OpenBucket(ctx, srv.URL(srv.NewBucket(t)), srv.Config()); err != nil {
					t.Fatal(err)
				}
			}
			rows := groupRows(4, 3, 1)
			if tc.rows != nil {
				rows = tc.rows()
			}
			m := writeSet(t, b, "sets/v", tc.mode, rows, 6)
			if tc.damage != nil {
				tc.damage(t, b, m)
			}
			rep, err := shard.Verify(ctx, b, "sets/v", t.TempDir())
			if rep == nil {
				t.Fatal(err)
			}
			var out strings.Builder
			rep.Print(&out)
			if tc.want == "" {
				if err != nil || !rep.OK() || rep.Rows != int64(len(rows)) || rep.Groups != 4 {
					t.Fatalf("verify of a sound set: %v\n%s", err, out.String())
				}
				return
			}
			if !errors.Is(err, shard.ErrVerify) || !strings.Contains(out.String(), tc.want) {
				t.Fatalf("verify: %v; want a problem with %q in\n%s", err, tc.want, out.String())
			}
		})
	}
}

// flipByte flips one byte in the middle of the set's i-th shard file.
func flipByte(i int) func(t *testing.T, b blob.Bucket, m shard.Manifest) {
	return func(t *testing.T, b blob.Bucket, m shard.Manifest) {
		overwrite(t, b, m.Files[i].Key, func(p []byte) { p[len(p)/2] ^= 0x40 })
	}
}

// overwrite replaces the object key with its content changed by f, as
// damage on a disk or a bad copy would (no checksum recorded).
func overwrite(t *testing.T, b blob.Bucket, key string, f func([]byte)) {
	t.Helper()
	ctx := context.Background()
	rc, _, err := b.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = buf.ReadFrom(rc)
	rc.Close()
	if err != nil {
		t.Fatal(err)
	}
	p := buf.Bytes()
	f(p)
	if _, err := b.Put(ctx, key, bytes.NewReader(p), int64(len(p)), blob.PutOptions{}); err != nil {
		t.Fatal(err)
	}
}
