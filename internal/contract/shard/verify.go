package shard

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// ErrVerify is wrapped by the error Verify returns when the set has
// problems (the report lists them).
var ErrVerify = errors.New("the shard set failed verification")

// Problem is one thing wrong with a set: where (a file, and within a
// shard file a row and a field, when known) and what.
type Problem struct {
	// File is the path of the file relative to the manifest's folder
	// (a shard, an image file, or the manifest itself).
	File string `json:"file"`
	// Row is the row's index in File (from 0), -1 when the problem is not
	// one row's.
	Row int64 `json:"row"`
	// Field is the column or manifest field concerned, "" when none.
	Field string `json:"field,omitempty"`
	// Message says what is wrong.
	Message string `json:"message"`
}

func (p Problem) String() string {
	var b strings.Builder
	b.WriteString(p.File)
	if p.Row >= 0 {
		fmt.Fprintf(&b, " row %d", p.Row)
	}
	if p.Field != "" {
		fmt.Fprintf(&b, " %s", p.Field)
	}
	b.WriteString(": ")
	b.WriteString(p.Message)
	return b.String()
}

// maxProblems bounds the problems a report lists (the others are counted).
const maxProblems = 200

// Report is what Verify found.
type Report struct {
	// Set is the set's location as given.
	Set string `json:"set"`
	// SchemaVersion and Images are the manifest's.
	SchemaVersion int       `json:"schema_version"`
	Images        ImageMode `json:"images"`
	// Files, Rows, Groups and ImageFiles count what was checked.
	Files      int   `json:"files"`
	Rows       int64 `json:"rows"`
	Groups     int   `json:"groups"`
	ImageFiles int   `json:"image_files"`
	// EmbeddedImages counts the row images whose bytes are embedded and
	// match their SHA-256; FileImages those naming a checked image file.
	EmbeddedImages int64 `json:"embedded_images"`
	FileImages     int64 `json:"file_images"`
	// Problems lists what is wrong (at most maxProblems), Omitted how many
	// more there were.
	Problems []Problem `json:"problems"`
	Omitted  int       `json:"omitted,omitempty"`
}

// OK reports whether the set has no problem.
func (r *Report) OK() bool { return len(r.Problems) == 0 }

func (r *Report) add(file string, row int64, field, format string, args ...any) {
	if len(r.Problems) >= maxProblems {
		r.Omitted++
		return
	}
	r.Problems = append(r.Problems, Problem{File: file, Row: row, Field: field, Message: fmt.Sprintf(format, args...)})
}

// Print writes the report in a few lines: the counts, then one line per
// problem.
func (r *Report) Print(w io.Writer) {
	fmt.Fprintf(w, "verify %s: schema %d, images %s: %d files, %d rows, %d groups, %d image files; %d row images embedded, %d as files\n",
		r.Set, r.SchemaVersion, cmpOr(string(r.Images), "as rows carry them"), r.Files, r.Rows, r.Groups, r.ImageFiles, r.EmbeddedImages, r.FileImages)
	if r.OK() {
		fmt.Fprintf(w, "verify %s: OK\n", r.Set)
		return
	}
	for _, p := range r.Problems {
		fmt.Fprintf(w, "verify %s: PROBLEM %s\n", r.Set, p)
	}
	if r.Omitted > 0 {
		fmt.Fprintf(w, "verify %s: ... and %d more problems\n", r.Set, r.Omitted)
	}
	fmt.Fprintf(w, "verify %s: FAILED with %d problems\n", r.Set, len(r.Problems)+r.Omitted)
}

func cmpOr(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// rowKey is a row's identity in a set.
type rowKey struct {
	traj       string
	step, cand int32
}

// rowAt is where a row is: its file and index.
type rowAt struct {
	file string
	row  int64
}

// groupSeen is what Verify saw of one group.
type groupSeen struct {
	size       int32
	rows       int32
	candidates map[int32]bool
	trajs      map[string]bool
	file       string // where it was first seen
	row        int64
}

// Verify checks the shard set at prefix in b against its manifest: every
// listed file's size and SHA-256, each shard's row count, every image a
// row names (embedded bytes with the image's SHA-256, or an image file
// listed in the manifest whose content matches), every group complete
// (step mode: group_size rows with distinct candidates; outcome mode: at
// most group_size trajectories), no (trajectory_id, step, candidate)
// twice, and the manifest's counts (rows, rows per app, groups less
// dropped groups, rows with token ids) equal to the rows'. Shard files are downloaded to tempDir
// (default os.TempDir()) one at a time. It returns the report and, when
// the report has problems, an error wrapping ErrVerify; other errors
// (the bucket cannot be read) are returned as they are.
func Verify(ctx context.Context, b blob.Bucket, prefix, tempDir string) (*Report, error) {
	if tempDir == "" {
		tempDir = os.TempDir()
	}
	rep := &Report{Set: b.String(), Problems: []Problem{}}
	if p := strings.Trim(prefix, "/"); p != "" {
		rep.Set += "/" + p
	}
	m, err := ReadManifest(ctx, b, prefix)
	if err != nil {
		if ctx.Err() != nil {
			return nil, err
		}
		rep.add(ManifestName, -1, "", "%v", err)
		return rep, fmt.Errorf("shard: verify %s: %w", rep.Set, ErrVerify)
	}
	rep.SchemaVersion, rep.Images = m.SchemaVersion, m.Meta.Images
	if err := m.Validate(); err != nil {
		rep.add(ManifestName, -1, "", "%v", err)
	}
	images := map[string]ImageFile{}
	for _, im := range m.Images {
		images[im.Path] = im
	}
	// Image files first: a row naming one that is damaged is reported
	// with the file, once.
	badImage := map[string]bool{}
	for _, im := range m.Images {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		rep.ImageFiles++
		n, sum, err := copyFile(ctx, b, ResolveKey(prefix, File{Path: im.Path}), io.Discard)
		switch {
		case errors.Is(err, blob.ErrNotFound):
			rep.add(im.Path, -1, "", "image file is missing")
			badImage[im.Path] = true
		case err != nil && !blob.Damaged(err):
			return nil, err
		case err != nil || n != im.Bytes || sum != im.SHA256:
			rep.add(im.Path, -1, "", "image file has %d bytes with SHA-256 %s, the manifest says %d bytes with SHA-256 %s", n, sum, im.Bytes, im.SHA256)
			badImage[im.Path] = true
		}
	}
	v := &verifier{rep: rep, mode: m.Meta.Mode, judge: m.JudgeVersion, images: images, badImage: badImage, keys: map[rowKey]rowAt{},
		groups: map[string]*groupSeen{}, perApp: map[string]int{}, notInSet: map[string]bool{}}
	for _, f := range m.Files {
		rep.Files++
		if err := v.file(ctx, b, f, tempDir); err != nil {
			return nil, err
		}
	}
	groups, perApp, idRows := v.groups, v.perApp, v.idRows
	rep.Groups = len(groups)
	ids := make([]string, 0, len(groups))
	for id := range groups {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		g := groups[id]
		switch {
		case m.Meta.Mode == ModeOutcome && int32(len(g.trajs)) > g.size:
			rep.add(g.file, g.row, "group_id", "group %s has rows of %d trajectories, group_size is %d", id, len(g.trajs), g.size)
		case m.Meta.Mode != ModeOutcome && g.rows != g.size:
			rep.add(g.file, g.row, "group_id", "group %s is incomplete: %d rows, group_size is %d", id, g.rows, g.size)
		}
	}
	if rep.Rows != int64(m.Counts.Rows) {
		rep.add(ManifestName, -1, "counts.rows", "%d, the files hold %d rows", m.Counts.Rows, rep.Rows)
	}
	if w := m.Counts.Groups - m.Counts.DroppedGroups; m.Counts.Groups != 0 && w != len(groups) {
		rep.add(ManifestName, -1, "counts.groups", "%d groups less %d dropped is %d written, the rows hold %d groups", m.Counts.Groups, m.Counts.DroppedGroups, w, len(groups))
	}
	if m.Counts.RowsPerApp != nil {
		apps := map[string]bool{}
		for a := range perApp {
			apps[a] = true
		}
		for a := range m.Counts.RowsPerApp {
			apps[a] = true
		}
		names := make([]string, 0, len(apps))
		for a := range apps {
			names = append(names, a)
		}
		sort.Strings(names)
		for _, a := range names {
			if m.Counts.RowsPerApp[a] != perApp[a] {
				rep.add(ManifestName, -1, "counts.rows_per_app", "app %q: %d, the rows hold %d", a, m.Counts.RowsPerApp[a], perApp[a])
			}
		}
	}
	if m.TokenData.RowsWithTokenIDs != idRows {
		rep.add(ManifestName, -1, "token_data.rows_with_token_ids", "%d, the rows hold %d", m.TokenData.RowsWithTokenIDs, idRows)
	}
	if !rep.OK() {
		return rep, fmt.Errorf("shard: verify %s: %d problems: %w", rep.Set, len(rep.Problems)+rep.Omitted, ErrVerify)
	}
	return rep, nil
}

// verifier is what Verify learns from the rows, file after file.
type verifier struct {
	rep      *Report
	mode     string
	judge    string               // the manifest's judge version: every row's ("" : not bound)
	images   map[string]ImageFile // the manifest's image files by path
	badImage map[string]bool      // image files found missing or damaged
	keys     map[rowKey]rowAt
	groups   map[string]*groupSeen
	perApp   map[string]int
	idRows   int64
	notInSet map[string]bool // images reported as not in the set
}

// file checks one shard file and its rows.
func (v *verifier) file(ctx context.Context, b blob.Bucket, f File, tempDir string) error {
	rep := v.rep
	path, remove, err := Fetch(ctx, b, f, tempDir)
	var mm *MismatchError
	switch {
	case errors.As(err, &mm):
		rep.add(f.Path, -1, "", "shard file has %d bytes with SHA-256 %s, the manifest says %d bytes with SHA-256 %s", mm.Bytes, mm.SHA256, mm.WantBytes, mm.WantSHA256)
		return nil // its rows cannot be trusted: not read
	case errors.Is(err, blob.ErrNotFound):
		rep.add(f.Path, -1, "", "shard file is missing")
		return nil
	case err != nil && !blob.Damaged(err):
		return fmt.Errorf("shard: verify: %w", err)
	case err != nil:
		rep.add(f.Path, -1, "", "shard file is damaged: %v", err)
		return nil // its rows cannot be trusted: not read
	case f.Bytes <= 0 || f.SHA256 == "":
		remove()
		rep.add(f.Path, -1, "", "the manifest gives no size or SHA-256 for the shard file")
		return nil
	}
	defer remove()
	var i int64
	err = ReadFile(ctx, path, f.Format, func(r *Row) error {
		v.row(r, f.Path, i)
		i++
		return nil
	})
	if err != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		rep.add(f.Path, i, "", "unreadable: %v", err)
	}
	rep.Rows += i
	if i != f.Rows {
		rep.add(f.Path, -1, "rows", "the file holds %d rows, the manifest says %d", i, f.Rows)
	}
	return nil
}

// row checks one row: its key, its group and its images.
func (v *verifier) row(r *Row, file string, i int64) {
	rep, keys, groups := v.rep, v.keys, v.groups
	v.perApp[r.App]++
	if r.CompletionTokenIDs != nil {
		v.idRows++
	}
	k := rowKey{traj: r.TrajectoryID, step: r.Step, cand: r.Candidate}
	if first, dup := keys[k]; dup {
		rep.add(file, i, "trajectory_id,step,candidate", "(%s, %d, %d) is also %s row %d", r.TrajectoryID, r.Step, r.Candidate, first.file, first.row)
	} else {
		keys[k] = rowAt{file: file, row: i}
	}
	if v.judge != "" && r.JudgeVersion != v.judge {
		rep.add(file, i, "judge_version", "%q, the set is bound to judge version %q (manifest judge_version)", r.JudgeVersion, v.judge)
	}
	g := groups[r.GroupID]
	if g == nil {
		g = &groupSeen{size: r.GroupSize, candidates: map[int32]bool{}, trajs: map[string]bool{}, file: file, row: i}
		groups[r.GroupID] = g
	}
	g.rows++
	g.trajs[r.TrajectoryID] = true
	if r.GroupSize != g.size {
		rep.add(file, i, "group_size", "%d, earlier rows of group %s say %d", r.GroupSize, r.GroupID, g.size)
	}
	if v.mode != ModeOutcome {
		if g.candidates[r.Candidate] {
			rep.add(file, i, "candidate", "candidate %d appears twice in group %s", r.Candidate, r.GroupID)
		}
		g.candidates[r.Candidate] = true
	}
	for k, im := range r.Images {
		field := fmt.Sprintf("images[%d]", k)
		switch {
		case im.Bytes != nil:
			if sum := blob.SumSHA256(im.Bytes); sum != im.SHA256 {
				rep.add(file, i, field+".bytes", "embedded bytes have SHA-256 %s, want %s", sum, im.SHA256)
				continue
			}
			rep.EmbeddedImages++
		case im.Path != "":
			f, ok := v.images[im.Path]
			switch {
			case !ok:
				rep.add(file, i, field+".path", "image file %s is not listed in the manifest", im.Path)
			case f.SHA256 != im.SHA256:
				rep.add(file, i, field+".path", "image file %s has SHA-256 %s in the manifest, the row's image is %s", im.Path, f.SHA256, im.SHA256)
			case v.badImage[im.Path]:
				// reported with the file
			default:
				rep.FileImages++
			}
		case !v.notInSet[im.SHA256]: // reported once per image
			v.notInSet[im.SHA256] = true
			rep.add(file, i, field, "image %s is not in the set (references only: the blob store it was written from holds it)", im.SHA256)
		}
	}
}
