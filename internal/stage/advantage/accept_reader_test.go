package advantage

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/shard/shardtest"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

// readerCase is one configuration of the service: its flags and the
// configuration the expectation is computed with.
type readerCase struct {
	name   string
	args   []string
	mode   string
	label  grpo.LabelMode
	est    grpo.Estimator
	format shard.Format
	images shard.ImageMode // "" for the default, files
	s3     bool
	race   bool // also run under the race detector (the others only without it)
}

func readerCases() []readerCase {
	def := grpo.DefaultEstimator()
	with := func(f func(*grpo.Estimator)) grpo.Estimator { e := def; f(&e); return e }
	return []readerCase{
		{name: "grpo", args: []string{"--rows-per-shard", "7"}, est: def, format: shard.FormatArrow, race: true},
		{name: "grpo-population-eps", args: []string{"--std", "population", "--eps", "0.1"},
			est: with(func(e *grpo.Estimator) { e.PopulationStd, e.Eps = true, 0.1 }), format: shard.FormatArrow},
		{name: "drgrpo", args: []string{"--estimator", "drgrpo"},
			est: with(func(e *grpo.Estimator) { e.Method = grpo.MethodDrGRPO }), format: shard.FormatArrow},
		{name: "rloo", args: []string{"--estimator", "rloo"},
			est: with(func(e *grpo.Estimator) { e.Method = grpo.MethodRLOO }), format: shard.FormatArrow},
		{name: "zero-var-drop", args: []string{"--zero-var", "drop"},
			est: with(func(e *grpo.Estimator) { e.ZeroVariance = grpo.ZeroVarianceDrop }), format: shard.FormatArrow},
		{name: "parquet-embedded", args: []string{"--format", "parquet", "--embed-images"},
			est: def, format: shard.FormatParquet, images: shard.ImagesEmbed},
		{name: "prefix-labels-store", args: []string{"--label", "prefix", "--images", "store"}, label: grpo.LabelModePrefix, est: def,
			format: shard.FormatArrow, images: shard.ImagesStore},
		{name: "outcome", args: []string{"--mode", "outcome"}, mode: ModeOutcome, est: def, format: shard.FormatArrow},
		{name: "outcome-rloo-parquet", args: []string{"--mode", "outcome", "--estimator", "rloo", "--format", "parquet"},
			mode: ModeOutcome, est: with(func(e *grpo.Estimator) { e.Method = grpo.MethodRLOO }), format: shard.FormatParquet, race: true},
		{name: "s3-arrow-embedded", args: []string{"--embed-images"}, est: def, format: shard.FormatArrow, images: shard.ImagesEmbed, s3: true, race: true},
		{name: "s3-parquet-files", args: []string{"--format", "parquet"}, est: def, format: shard.FormatParquet, s3: true},
	}
}

// Acceptances 1, 5 and 6: after a simulated rollout and judge --drain,
// advantage --drain runs under each estimator option, mode, label mode and
// format (and once with --out on a real MinIO). The independent reader
// (npm apache-arrow / DuckDB) reads every shard of each set; every value
// of every row equals the row the service meant to write for the judged
// trajectories; and every advantage, recomputed in the test from the
// reader's reward and group columns with the formulas of docs/grpo.md,
// matches to 1e-9.
func TestAcceptReaderAndEstimators(t *testing.T) {
	shardtest.Require(t)
	dir, judged := corpus(t)
	ctx := context.Background()
	store, err := blob.Open(ctx, dir+"/blobs", blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var srv *miniotest.Server
	outer := t // the server outlives the case that starts it
	for _, c := range readerCases() {
		if raceEnabled && !c.race {
			continue // run without the race detector (make test's acceptance run)
		}
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "shards")
			bcfg := blob.Config{}
			if c.s3 {
				if srv == nil {
					srv = miniotest.Start(outer)
				}
				out = srv.URL(srv.NewBucket(t) + "/training/shards")
				bcfg = srv.Config()
				t.Setenv("AWS_ENDPOINT_URL_S3", srv.Endpoint)
				t.Setenv("AWS_ACCESS_KEY_ID", srv.AccessKey)
				t.Setenv("AWS_SECRET_ACCESS_KEY", srv.SecretKey)
				t.Setenv("AWS_REGION", miniotest.Region)
				t.Setenv("S3_FORCE_PATH_STYLE", "true")
			}
			advantageCLI(t, dir, append([]string{"--out", out}, c.args...)...)
			bucket, err := blob.OpenBucket(ctx, out, bcfg)
			if err != nil {
				t.Fatal(err)
			}
			m := onlyManifest(t, bucket)
			if m.Format != c.format {
				t.Fatalf("manifest format %q, want %q", m.Format, c.format)
			}
			want, cnt := expectedServiceRows(t, store, judged, c)
			if len(want) == 0 {
				t.Fatal("the configuration gives no rows: the case proves nothing")
			}
			got := readSet(t, bucket, m, c.format)
			sortRows(want)
			sortRows(got)
			for i, d := range shardtest.Diff(want, got) {
				if i == 30 {
					t.Error("… and more differences")
					break
				}
				t.Error(d)
			}
			if m.Counts.Rows != len(want) || m.Counts.Groups != cnt.Groups || m.Counts.DroppedGroups != cnt.Dropped ||
				m.Counts.ZeroVarianceGroups != cnt.ZeroVariance || m.Counts.Trajectories != len(judged) {
				t.Errorf("manifest counts %+v; want %d rows, %d groups, %d dropped, %d zero-variance, %d trajectories",
					m.Counts, len(want), cnt.Groups, cnt.Dropped, cnt.ZeroVariance, len(judged))
			}
			checkAdvantages(t, got, c)
			checkTokenColumns(t, got, m, judged)
			checkImages(t, ctx, store, got, cmp.Or(c.images, shard.ImagesFiles))
			checkProvenance(t, got, m, judged)
			checkVerify(t, bucket, m, cmp.Or(c.images, shard.ImagesFiles))
			if c.s3 { // advantage verify itself, on s3://
				var stdout, stderr bytes.Buffer
				args := []string{"verify", "--data", dir, "--log-level", "warn", "--set", out + "/" + m.Set}
				if code := service.MainContext(ctx, Command(), args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), ": OK") {
					t.Errorf("advantage %v: exit %d\n%s%s", args, code, stdout.String(), stderr.String())
				}
			}
			t.Logf("%d rows in %d files; %d groups, %d zero-variance, %d dropped", len(got), len(m.Files), cnt.Groups, cnt.ZeroVariance, cnt.Dropped)
		})
	}
}

// onlyManifest reads the one shard set's manifest under the bucket.
func onlyManifest(t testing.TB, bucket blob.Bucket) shard.Manifest {
	t.Helper()
	ctx := context.Background()
	var sets []string
	for info, err := range bucket.List(ctx, "") {
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasSuffix(info.Key, "/"+shard.ManifestName) {
			sets = append(sets, strings.TrimSuffix(info.Key, "/"+shard.ManifestName))
		}
	}
	if len(sets) != 1 {
		t.Fatalf("manifests %v, want one", sets)
	}
	m, err := shard.ReadManifest(ctx, bucket, sets[0])
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// readSet downloads every file of the set, checks its size and SHA-256
// against the manifest, and reads it with the independent reader.
func readSet(t *testing.T, bucket blob.Bucket, m shard.Manifest, format shard.Format) []shard.Row {
	t.Helper()
	local := t.TempDir()
	var paths []string
	for i, f := range m.Files {
		if f.Format != format || !strings.HasSuffix(f.Key, "."+string(format)) {
			t.Errorf("%s: format %q, want %q", f.Key, f.Format, format)
		}
		body, err := blob.ReadAll(context.Background(), bucket, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if int64(len(body)) != f.Bytes || blob.SumSHA256(body) != f.SHA256 {
			t.Errorf("%s: size or SHA-256 differ from the manifest", f.Key)
		}
		p := filepath.Join(local, fmt.Sprintf("%04d.%s", i, format))
		if err := os.WriteFile(p, body, 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	var rows []shard.Row
	for _, f := range shardtest.Read(t, paths...) {
		if f.NumRows != len(f.Rows) {
			t.Errorf("%s: num_rows %d, %d rows read", f.Path, f.NumRows, len(f.Rows))
		}
		r, err := f.Decode()
		if err != nil {
			t.Fatal(err)
		}
		rows = append(rows, r...)
	}
	return rows
}

// expectedServiceRows computes, without the bus or the shard writer, the
// rows the service means to write for the judged trajectories under c:
// step mode row by row, outcome mode group by group (the K samples of one
// task in one run; the run is finished, so every group is complete).
func expectedServiceRows(t *testing.T, store *blob.Store, judged []*traj.Judged, c readerCase) (rows []shard.Row, total Counts) {
	t.Helper()
	ctx := context.Background()
	cfg := Config{Mode: cmp.Or(c.mode, ModeStep), Label: cmp.Or(c.label, grpo.LabelModeClean), Estimator: c.est,
		Step: grpo.DefaultStepOptions(), Outcome: grpo.DefaultOutcomeConfig()}
	// The rows as rendered with their bytes (embed) or without (store);
	// with files the set's rows name the image file instead of the bytes.
	mode := shard.ImagesStore
	if c.images == shard.ImagesEmbed {
		mode = shard.ImagesEmbed
	}
	s := &server{cfg: cfg, render: newRenderer(store, mode)}
	defer func() {
		if cmp.Or(c.images, shard.ImagesFiles) != shard.ImagesFiles {
			return
		}
		for i := range rows {
			imgs := slices.Clone(rows[i].Images)
			for k := range imgs {
				imgs[k].Path = shard.ImagePath(imgs[k].SHA256)
			}
			rows[i].Images = imgs
		}
	}()
	if cfg.Mode == ModeStep {
		for _, jd := range judged {
			r, cnt, err := s.stepRows(ctx, &jd.Trajectory, &jd.Judgement)
			if err != nil {
				t.Fatalf("trajectory %s: %v", jd.Trajectory.ID, err)
			}
			rows = append(rows, r...)
			total.Merge(cnt)
		}
		return rows, total
	}
	groups := map[string][]*traj.Judged{}
	var order []string
	for _, jd := range judged {
		k := jd.Trajectory.Run + "\x00" + jd.Trajectory.Task.ID
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], jd)
	}
	for _, k := range order {
		var items []grpo.Judged
		judgements := map[string]*traj.Judgement{}
		for _, jd := range groups[k] {
			items = append(items, grpo.Judged{Trajectory: &jd.Trajectory, Judgement: &jd.Judgement})
			judgements[jd.Trajectory.ID] = &jd.Judgement
		}
		r, cnt, err := s.outcomeRows(ctx, items, judgements)
		if err != nil {
			t.Fatalf("outcome group %q: %v", k, err)
		}
		rows = append(rows, r...)
		total.Merge(cnt)
	}
	return rows, total
}

// sortRows orders rows by trajectory, step and candidate.
func sortRows(rows []shard.Row) {
	slices.SortFunc(rows, func(a, b shard.Row) int {
		return cmp.Or(strings.Compare(a.TrajectoryID, b.TrajectoryID), cmp.Compare(a.Step, b.Step), cmp.Compare(a.Candidate, b.Candidate))
	})
}

// checkAdvantages recomputes every advantage from the rows the reader
// read, with the formulas of docs/grpo.md and nothing of pkg/grpo: the
// group's members are its candidates (step mode) or its trajectories
// (outcome mode, one reward per trajectory); μ their mean reward, σ their
// standard deviation with divisor n−1 (unbiased) or n (population);
// grpo: (r−μ)/(σ+ε); drgrpo: r−μ; rloo: n/(n−1)·(r−μ); 0 in a
// zero-variance group (max−min ≤ tol), which under drop is not written.
func checkAdvantages(t *testing.T, rows []shard.Row, c readerCase) {
	t.Helper()
	groups := map[string]map[string]float64{}
	for _, r := range rows {
		key := r.TrajectoryID
		if c.mode != ModeOutcome {
			key = fmt.Sprintf("%s/%d/%d", key, r.Step, r.Candidate)
		}
		if groups[r.GroupID] == nil {
			groups[r.GroupID] = map[string]float64{}
		}
		if prev, ok := groups[r.GroupID][key]; ok && prev != r.Reward {
			t.Fatalf("group %s member %s: rewards %v and %v", r.GroupID, key, prev, r.Reward)
		}
		groups[r.GroupID][key] = r.Reward
	}
	const tol = 1e-9
	near := func(a, b float64) bool { return math.Abs(a-b) <= tol*math.Max(1, math.Abs(b)) }
	zeroVar, bad := 0, 0
	for _, r := range rows {
		members := groups[r.GroupID]
		n := float64(len(members))
		if int(r.GroupSize) != len(members) {
			t.Fatalf("group %s: group_size %d, %d members in the set", r.GroupID, r.GroupSize, len(members))
		}
		var sum, lo, hi float64 = 0, math.Inf(1), math.Inf(-1)
		for _, v := range members {
			sum += v
			lo, hi = math.Min(lo, v), math.Max(hi, v)
		}
		mu := sum / n
		var ss float64
		for _, v := range members {
			ss += (v - mu) * (v - mu)
		}
		div := n - 1
		if c.est.PopulationStd {
			div = n
		}
		sigma := 0.0
		if div > 0 {
			sigma = math.Sqrt(ss / div)
		}
		var want float64
		zero := hi-lo <= c.est.Tol || n == 1
		switch {
		case zero:
			want = 0
			zeroVar++
			if c.est.ZeroVariance == grpo.ZeroVarianceDrop {
				t.Errorf("group %s is zero-variance but was written under --zero-var drop", r.GroupID)
			}
		case c.est.Method == grpo.MethodGRPO:
			want = (r.Reward - mu) / (sigma + c.est.Eps)
		case c.est.Method == grpo.MethodDrGRPO:
			want = r.Reward - mu
		case c.est.Method == grpo.MethodRLOO:
			want = n / (n - 1) * (r.Reward - mu)
		default:
			t.Fatalf("method %q", c.est.Method)
		}
		if r.ZeroVariance != zero || !near(r.GroupMean, mu) || (!zero && c.est.Method == grpo.MethodGRPO && !near(r.GroupStd, sigma)) ||
			!near(r.Advantage, want) || !near(r.Advantage, r.GroupScale*(r.Reward-r.GroupMean)) {
			if bad++; bad <= 20 {
				t.Errorf("%s step %d candidate %d (group %s, n %v): advantage %v mean %v std %v zero %v; recomputed %v, %v, %v, %v",
					r.TrajectoryID, r.Step, r.Candidate, r.GroupID, n, r.Advantage, r.GroupMean, r.GroupStd, r.ZeroVariance, want, mu, sigma, zero)
			}
		}
	}
	if zeroVar == len(rows) {
		t.Errorf("every row is in a zero-variance group: the recomputation checks nothing")
	}
}

// checkImages checks that every image the rows name is in the blob store
// and, when embedded, that its bytes hash to its SHA-256; as files, that
// each row names its image's file (the files themselves: checkVerify).
func checkImages(t *testing.T, ctx context.Context, store *blob.Store, rows []shard.Row, mode shard.ImageMode) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range rows {
		if len(r.Images) == 0 {
			t.Fatalf("%s step %d: no images", r.TrajectoryID, r.Step)
		}
		for _, im := range r.Images {
			if !strings.Contains(r.Prompt, prompt.RefScheme+im.SHA256) {
				t.Errorf("%s step %d: the prompt does not reference image %s", r.TrajectoryID, r.Step, im.SHA256)
			}
			switch {
			case mode == shard.ImagesEmbed:
				sum := sha256.Sum256(im.Bytes)
				if hex.EncodeToString(sum[:]) != im.SHA256 || im.Path != "" {
					t.Errorf("%s step %d: embedded image bytes do not hash to %s, or a path %q", r.TrajectoryID, r.Step, im.SHA256, im.Path)
				}
			case im.Bytes != nil:
				t.Errorf("%s step %d: image bytes embedded with --images %s", r.TrajectoryID, r.Step, mode)
			case mode == shard.ImagesFiles && im.Path != "images/"+im.SHA256+".png":
				t.Errorf("%s step %d: image %s has path %q", r.TrajectoryID, r.Step, im.SHA256, im.Path)
			case mode == shard.ImagesStore && im.Path != "":
				t.Errorf("%s step %d: image %s has path %q with --images store", r.TrajectoryID, r.Step, im.SHA256, im.Path)
			}
			if seen[im.SHA256] {
				continue
			}
			seen[im.SHA256] = true
			if _, err := store.Stat(ctx, im.SHA256); err != nil {
				t.Errorf("image %s: %v", im.SHA256, err)
			}
		}
	}
}

// checkTokenColumns checks the token-level columns of the rows the reader
// read (acceptance 2 of issue 22): the simulated planner gives token ids
// and log-probabilities for every plan, as vLLM does when asked, so every
// candidate of the corpus records them and every row has
// completion_token_ids and logprobs of the same, non-zero length, a
// finish_reason and its own completion_tokens; the manifest says the
// token data is complete.
func checkTokenColumns(t *testing.T, rows []shard.Row, m shard.Manifest, judged []*traj.Judged) {
	t.Helper()
	for _, jd := range judged {
		for _, st := range jd.Trajectory.Steps {
			for _, c := range st.Candidates {
				if len(c.PlanTokenIDs) == 0 {
					t.Fatalf("trajectory %s step %d candidate %d recorded no token ids", jd.Trajectory.ID, st.Index, c.Index)
				}
			}
		}
	}
	stops := 0
	for _, r := range rows {
		n := len(r.CompletionTokenIDs)
		if n == 0 || len(r.LogProbs) != n || r.FinishReason == "" || r.CompletionTokens == nil || int(*r.CompletionTokens) != n {
			t.Errorf("%s step %d candidate %d: %d token ids, %d logprobs, finish_reason %q, completion_tokens %v",
				r.TrajectoryID, r.Step, r.Candidate, n, len(r.LogProbs), r.FinishReason, r.CompletionTokens)
			continue
		}
		// The EOS rule of docs/shards.md: a plan that stopped ends with
		// the EOS id (the simulated planner stops on EOS, as vLLM reports
		// it); one cut at max_tokens holds none.
		eos := slices.Index(r.CompletionTokenIDs, simmodels.SimEOSID)
		switch r.FinishReason {
		case "stop":
			stops++
			if eos != n-1 {
				t.Errorf("%s step %d candidate %d: finish_reason stop, EOS at %d of %d token ids", r.TrajectoryID, r.Step, r.Candidate, eos, n)
			}
		case "length":
			if eos >= 0 {
				t.Errorf("%s step %d candidate %d: finish_reason length, EOS at %d", r.TrajectoryID, r.Step, r.Candidate, eos)
			}
		}
	}
	if stops == 0 {
		t.Error("no row with finish_reason stop: the EOS rule is not checked")
	}
	if td := m.TokenData; td.RowsWithTokenIDs != int64(len(rows)) || td.RowsWithoutTokenIDs != 0 || !td.Complete {
		t.Errorf("manifest token_data %+v; want all %d rows with token ids, complete", td, len(rows))
	}
}

// checkProvenance checks the provenance columns against the judged
// trajectories (written here without the service's code): each row names
// its trajectory's executor model, checkpoint and coordinate space (as
// JSON) and its prompt set; its prompt token ids are its step's; and the
// manifest counts the rows by executor and prompt set.
func checkProvenance(t *testing.T, rows []shard.Row, m shard.Manifest, judged []*traj.Judged) {
	t.Helper()
	byID := map[string]*traj.Trajectory{}
	for _, jd := range judged {
		byID[jd.Trajectory.ID] = &jd.Trajectory
	}
	execRows, promptRows := map[string]int64{}, map[string]int64{}
	for _, r := range rows {
		tr := byID[r.TrajectoryID]
		ex := tr.Models.Executor
		if ex.Coords == nil || ex.Model == "" || tr.Prompts == "" {
			t.Fatalf("trajectory %s records no executor coordinates, model or prompt set", tr.ID)
		}
		coords := fmt.Sprintf(`{"space":%q`, ex.Coords.Space)
		if ex.Coords.Factor != 0 {
			coords += fmt.Sprintf(`,"factor":%d,"min_pixels":%d,"max_pixels":%d`, ex.Coords.Factor, ex.Coords.MinPixels, ex.Coords.MaxPixels)
		}
		coords += "}"
		if r.ExecutorModel != ex.Model || r.ExecutorCheckpoint != ex.Checkpoint || r.ExecutorCoords != coords || r.PromptSet != tr.Prompts {
			t.Errorf("%s step %d: executor %q %q %s, prompt set %q; want %q %q %s, %q", r.TrajectoryID, r.Step,
				r.ExecutorModel, r.ExecutorCheckpoint, r.ExecutorCoords, r.PromptSet, ex.Model, ex.Checkpoint, coords, tr.Prompts)
		}
		ids := tr.Steps[r.Step].PlanPromptTokenIDs
		if len(ids) == 0 || !slices.Equal(r.PromptTokenIDs, ids) || r.PromptTokens == nil || int(*r.PromptTokens) != len(ids) {
			t.Errorf("%s step %d: %d prompt token ids (prompt_tokens %v), the step recorded %d", r.TrajectoryID, r.Step, len(r.PromptTokenIDs), r.PromptTokens, len(ids))
		}
		execRows[r.ExecutorModel+"|"+r.ExecutorCheckpoint+"|"+r.ExecutorCoords]++
		promptRows[r.PromptSet]++
	}
	gotExec, gotPrompt := map[string]int64{}, map[string]int64{}
	for _, e := range m.Executors {
		gotExec[e.Model+"|"+e.Checkpoint+"|"+e.Coords] += e.Rows
	}
	for _, p := range m.PromptSets {
		gotPrompt[p.PromptSet] += p.Rows
	}
	if fmt.Sprint(gotExec) != fmt.Sprint(execRows) || fmt.Sprint(gotPrompt) != fmt.Sprint(promptRows) {
		t.Errorf("manifest executors %v, prompt sets %v; the rows say %v, %v", gotExec, gotPrompt, execRows, promptRows)
	}
}

// checkVerify runs advantage verify's check on the set: it passes, with
// every row image found where the set's image mode says (a set with
// --images store names none and fails, saying so), and the manifest
// lists one image file per distinct image.
func checkVerify(t *testing.T, bucket blob.Bucket, m shard.Manifest, mode shard.ImageMode) {
	t.Helper()
	rep, err := shard.Verify(context.Background(), bucket, m.Set, t.TempDir())
	if rep == nil {
		t.Fatal(err)
	}
	if m.Meta.Images != mode {
		t.Errorf("manifest meta images %q, want %q", m.Meta.Images, mode)
	}
	if mode == shard.ImagesStore {
		if err == nil || !strings.Contains(fmt.Sprint(rep.Problems), "not in the set") {
			t.Errorf("verify of a references-only set: %v, %v; want it to fail naming the images not in the set", err, rep.Problems)
		}
		return
	}
	if err != nil {
		t.Fatalf("verify: %v: %v", err, rep.Problems)
	}
	if rep.Rows != int64(m.Counts.Rows) || rep.Files != len(m.Files) {
		t.Errorf("verify checked %d rows in %d files; the manifest has %d in %d", rep.Rows, rep.Files, m.Counts.Rows, len(m.Files))
	}
	if mode == shard.ImagesFiles && (rep.FileImages == 0 || rep.EmbeddedImages != 0 || rep.ImageFiles != len(m.Images)) {
		t.Errorf("verify: %d file images, %d embedded, %d image files; the manifest lists %d", rep.FileImages, rep.EmbeddedImages, rep.ImageFiles, len(m.Images))
	}
	if mode == shard.ImagesEmbed && (rep.EmbeddedImages == 0 || len(m.Images) != 0) {
		t.Errorf("verify: %d embedded images, the manifest lists %d image files", rep.EmbeddedImages, len(m.Images))
	}
}
