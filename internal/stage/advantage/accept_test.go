package advantage

import (
	"bytes"
	"context"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"log/slog"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/proctest"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// judgeCommand judges the simulated corpora of the tests.
var judgeCommand = judge.Command()

// corpusSpec is the judged simulated run the tests read: four ChimeraX
// tasks three times each, G = 3, a good planner (the default's skill is
// low for ChimeraX). Seeded, so always the same corpus; it holds the clean
// successes of two steps or more the tests need (corpus checks).
var corpusSpec = pipetest.Spec{
	Tasks: []string{"S01", "S02", "S03", "S04"}, Samples: 3, Group: 3, Seed: 3, Run: "adv",
	Sim: `{"models": {"planner": {"default_skill": 0.85, "skill": {}}}}`, Judge: &judgeCommand,
}

// smallSpec is a judged corpus small enough for the tests that run under
// the race detector (make test runs TestAccept* without it): two tasks
// twice, a very good planner and an accurate judge, so it still holds
// clean successes.
var smallSpec = pipetest.Spec{
	Tasks: []string{"S01", "S02"}, Samples: 2, Group: 2, Seed: 3, Run: "adv-small", Judge: &judgeCommand,
	Sim: `{"models": {"planner": {"default_skill": 0.95, "skill": {}},
		"judge": {"recall": 0.97, "false_positive_rate": 0.03, "low_res": {"recall": 1, "false_positive_rate": 0.03}, "vote_correlation": 0.9,
			"second": {"recall": 0.97, "false_positive_rate": 0.03, "vote_correlation": 0.9}}}}`,
}

// corpus returns the test's own copy of the shared judged corpus: its
// data directory (blob store and embedded NATS server) and the judged
// trajectories on the stream.
func corpus(t *testing.T) (dir string, judged []*traj.Judged) {
	t.Helper()
	p := pipetest.Shared(t, corpusSpec)
	p.RequireCleanSuccesses(t, 2, 2)
	return p.Dir, p.Judged
}

// advantageCLI runs the advantage command on dir and returns its output.
// Without a selection in args it asks for --since all: the test corpora
// are one stream whose every judged trajectory the tests want.
func advantageCLI(t testing.TB, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	var out, errb bytes.Buffer
	full := append([]string{"--data", dir, "--log-level", "warn", "--drain"}, args...)
	if !slices.ContainsFunc(args, func(a string) bool { return a == "--runs" || a == "--checkpoints" || a == "--since" }) {
		full = append(full, "--since", SinceAll)
	}
	if code := service.MainContext(ctx, Command(), full, &out, &errb); code != 0 {
		t.Fatalf("advantage %v: exit %d\n%s", args, code, errb.String())
	}
	return out.String()
}

// expectedRows is what pkg/grpo says the judged trajectories give in step
// mode under the default configuration: rows, groups, kept groups.
func expectedRows(t *testing.T, judged []*traj.Judged) (rows, groups, kept int) {
	t.Helper()
	_, sum := stepExpectation(t, judged)
	return sum.KeptCandidates, sum.Groups, sum.KeptGroups
}

// Acceptance 1 (Go side): after a simulated rollout and judge --drain,
// advantage --drain writes shards and a manifest whose counts agree with
// what pkg/grpo says the judged trajectories produce; every file's
// SHA-256 matches; a second drain writes nothing again.
func TestAcceptAdvantageAfterJudge(t *testing.T) {
	dir, judged := corpus(t)
	wantRows, wantGroups, _ := expectedRows(t, judged)
	if wantRows == 0 {
		t.Fatal("the run gave no rows: the test needs clean successes")
	}
	out := advantageCLI(t, dir)
	if !strings.Contains(out, fmt.Sprintf("holds %d rows", wantRows)) {
		t.Fatalf("advantage output:\n%s\nwant %d rows", out, wantRows)
	}
	ctx := context.Background()
	bucket, err := blob.OpenBucket(ctx, dir+"/shards", blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	if m.Counts.Rows != wantRows || m.Counts.Groups != wantGroups || m.Counts.Trajectories != len(judged) {
		t.Fatalf("manifest counts %+v; want %d rows, %d groups, %d trajectories", m.Counts, wantRows, wantGroups, len(judged))
	}
	total := 0
	for _, f := range m.Files {
		info, err := bucket.Stat(ctx, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		body, err := blob.ReadAll(ctx, bucket, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		if blob.SumSHA256(body) != f.SHA256 || info.Size != f.Bytes {
			t.Errorf("%s: size or SHA-256 differ from the manifest", f.Key)
		}
		total += int(f.Rows)
	}
	if total != wantRows {
		t.Fatalf("files hold %d rows, want %d", total, wantRows)
	}
	t.Logf("first drain:\n%s", out)
	again := advantageCLI(t, dir)
	if !strings.Contains(again, "this run wrote 0 rows") || !strings.Contains(again, fmt.Sprintf("holds %d rows", wantRows)) {
		t.Fatalf("a second drain:\n%s", again)
	}
}

// Bad input: a message that is not a judged trajectory, a judged
// trajectory whose screenshot is missing from the blob store, one whose
// prompt set cannot be found, and one whose groups cannot be formed (its
// decision contradicts its verdict) are each dead-lettered with a
// reason naming the problem; every good trajectory's rows are written.
func TestAcceptBadInputDeadLettered(t *testing.T) {
	dir, judged := corpus(t)
	var good *traj.Judged
	for _, jd := range judged {
		if jd.Judgement.Decision == traj.CleanSuccess && len(jd.Trajectory.Steps) >= 2 {
			good = jd
			break
		}
	}
	if good == nil {
		t.Fatal("the run gave no clean success of two steps or more: the test needs one")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	env, b, _ := pipetest.Open(t, &service.Common{DataDir: dir})
	subject := bus.Subject(bus.Judged, good.Trajectory.Task.App)
	publish := func(id string, body []byte) {
		t.Helper()
		if _, err := b.Publish(ctx, subject, id, body, nil); err != nil {
			t.Fatal(err)
		}
	}
	variant := func(change func(*traj.Judged)) (string, *traj.Judged) {
		cp := *good
		cp.Trajectory.ID = traj.NewID()
		cp.Judgement.TrajectoryID = cp.Trajectory.ID
		cp.Trajectory.Steps = append([]traj.Step(nil), good.Trajectory.Steps...)
		for i := range cp.Trajectory.Steps {
			cp.Trajectory.Steps[i].Candidates = append([]traj.Candidate(nil), good.Trajectory.Steps[i].Candidates...)
		}
		change(&cp)
		body, err := traj.MarshalCompact(cp)
		if err != nil {
			t.Fatal(err)
		}
		id := archive.MessageID(cp.Trajectory.ID, cp.Judgement.Judge.ID())
		publish(id, body)
		return id, &cp
	}
	gone := strings.Repeat("ab", 32)
	noPrompts := strings.Repeat("cd", 32)
	publish("corrupt-1", []byte(`{"schema_version": 4, "judgement": `))
	shotID, _ := variant(func(jd *traj.Judged) { jd.Trajectory.Steps[1].Screenshot.SHA256 = gone })
	promptID, _ := variant(func(jd *traj.Judged) { jd.Trajectory.Prompts = noPrompts })
	// A judgement whose decision (clean success) contradicts its verdict.
	malformedID, _ := variant(func(jd *traj.Judged) {
		v := *jd.Judgement.Verdict
		v.Correctness = false
		jd.Judgement.Verdict = &v
	})
	_, okCopy := variant(func(*traj.Judged) {})

	env.Close() // the embedded server's data directory is the service's next
	out := advantageCLI(t, dir)
	_, b, _ = pipetest.Open(t, &service.Common{DataDir: dir})
	t.Logf("%s", out)
	if !strings.Contains(out, "4 dead-lettered") {
		t.Errorf("advantage output does not report 4 dead letters:\n%s", out)
	}
	pipetest.CheckDeadLetters(t, b, map[string][]string{
		"corrupt-1": {"not a valid judged trajectory"},
		shotID:      {"screenshot", gone, "missing"},
		promptID:    {"prompt set", noPrompts},
		malformedID: {"judgement.decision", "verdict says"},
	})

	// Every good trajectory's rows are written, the bad ones' are not.
	checkWrittenOnce(t, filepath.Join(dir, "shards"), expectedKeys(t, append(append([]*traj.Judged(nil), judged...), okCopy)))
}

// The input of BenchmarkAdvantageService.
const (
	benchShardBytes = 2e9       // the shard bytes the run must write at least
	benchImages     = 24        // distinct screenshots
	benchImageBytes = 250 << 10 // about the size of each (PNG, incompressible)
	benchGroup      = 8         // G: a step has G+1 candidates, G rows
	benchMinSteps   = 3         // trajectories have 3..12 steps
	benchMaxSteps   = 12
	benchMaxRSS     = 300 << 20 // the target of advantage.peak_rss_mb
)

// benchScreenshot is a 1280×800 PNG of about benchImageBytes: a flat
// screen with a band of random pixels (which no compressor shrinks), so
// its size is that of a real screenshot while it encodes fast.
func benchScreenshot(rng *rand.Rand, i int) []byte {
	const w, h = 1280, 800
	img := image.NewNRGBA(image.Rect(0, 0, w, h))
	bg := color.NRGBA{R: uint8(40 + 7*i), G: 90, B: 160, A: 255}
	band := benchImageBytes / (3 * w) // rows of noise (RGB)
	top := (i * 29) % (h - band)
	for y := range h {
		for x := range w {
			o := img.PixOffset(x, y)
			if y >= top && y < top+band {
				v := rng.Uint32()
				img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = uint8(v), uint8(v>>8), uint8(v>>16), 255
				continue
			}
			img.Pix[o], img.Pix[o+1], img.Pix[o+2], img.Pix[o+3] = bg.R, bg.G, bg.B, bg.A
		}
	}
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, img); err != nil {
		panic(err)
	}
	return buf.Bytes()
}

// benchCandidate is a candidate whose plan clicks at (x, y) (fractions).
func benchCandidate(k int, x, y float64) traj.Candidate {
	a := &traj.Action{Type: traj.Click, Point: &traj.Point{X: x, Y: y}}
	text := uitars.Format(*a, uitars.DefaultOptions())
	return traj.Candidate{
		Index: k, Plan: fmt.Sprintf("Thought: the button I need is at the top of the panel, candidate %d.\nAction: %s", k, text),
		Thought:        fmt.Sprintf("the button I need is at the top of the panel, candidate %d.", k),
		ExecutorOutput: "Action: " + text, Action: a, FinishReason: "stop",
		PlanTokens: traj.Tokens{Prompt: 2900, Completion: 40}, ExecTokens: traj.Tokens{Prompt: 1400, Completion: 12},
		PlanMS: 400, ExecMS: 300,
	}
}

// benchJudged builds a clean success of the given steps over the stored
// screenshots shots (its step i sees shots[(n+i) % len]).
func benchJudged(rng *rand.Rand, n, steps int, prompts string, shots []traj.ImageRef) *traj.Judged {
	apps := []string{"ChimeraX", "Celestia", "KAlgebra", "GRASS GIS"}
	app := apps[n%len(apps)]
	id := traj.NewID()
	now := time.Now().UTC()
	coords := &traj.Coords{Space: traj.Grid1000}
	sampling := &traj.Sampling{Temperature: 1, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 512}
	t := traj.Trajectory{
		SchemaVersion: traj.SchemaVersion, ID: id, Run: "bench",
		Task:    traj.TaskRef{ID: fmt.Sprintf("%s/B-%02d", app, n%20), App: app, Instruction: "Color the protein chain A red and show its surface.", StepLimit: 15},
		Samples: 1, Group: benchGroup,
		Models: traj.Models{
			Planner:  traj.ModelRef{Endpoint: "http://planner", Model: "planner-32b", Checkpoint: "ckpt-7", Coords: coords, Sampling: sampling},
			Executor: traj.ModelRef{Endpoint: "http://executor", Model: "executor-7b", Coords: coords, Sampling: sampling},
		},
		Prompts: prompts, VM: "vm-0", Outcome: traj.Outcome{Kind: traj.OutcomeFinished}, StartedAt: now, EndedAt: now,
	}
	for i := range steps {
		st := traj.Step{Index: i, Screenshot: shots[(n+i)%len(shots)], Executed: 0, Code: "pyautogui.click(640, 400)", StartedAt: now}
		x, y := rng.Float64(), rng.Float64()
		for k := range benchGroup + 1 {
			cx, cy := x, y
			if k > 0 {
				cx, cy = min(max(x+0.1*rng.NormFloat64(), 0), 1), min(max(y+0.1*rng.NormFloat64(), 0), 1)
			}
			st.Candidates = append(st.Candidates, benchCandidate(k, cx, cy))
		}
		t.Steps = append(t.Steps, st)
	}
	v := &traj.Verdict{Correctness: true, Redundant: []int{}, Optimized: true}
	return &traj.Judged{
		SchemaVersion: traj.SchemaVersion,
		Judgement: traj.Judgement{
			SchemaVersion: traj.SchemaVersion, TrajectoryID: id, Run: t.Run, TaskID: t.Task.ID, App: app,
			Verdict: v, Decision: traj.CleanSuccess,
			Votes:    []traj.Vote{{Model: "judge-72b", Endpoint: "http://judge", Resolution: "1280x800", Temperature: 1, TopP: 0.6, Verdict: v, LatencyMS: 900}},
			Judge:    traj.JudgeVersion{PromptSHA256: strings.Repeat("ab", 32), Models: []string{"judge-72b"}, Policy: "unanimous@4"},
			JudgedAt: now,
		},
		Trajectory: t,
	}
}

// benchInput stores the prompt set and the screenshots in the blob store
// of the data directory dir and publishes judged trajectories on
// CODA_JUDGED until their rows embed benchShardBytes (plus 5 %) of
// images. It returns the rows pkg/grpo says they give and the image bytes
// the rows embed.
func benchInput(b *testing.B, dir, natsURL string) (rows, trajectories int, imageBytes int64) {
	ctx := context.Background()
	common := &service.Common{DataDir: dir}
	common.NATS.URL = natsURL
	env, bb, store := pipetest.Open(b, common)
	defer env.Close()
	p, err := prompt.Load("")
	if err != nil {
		b.Fatal(err)
	}
	if err := prompt.Store(ctx, store, p); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	shots := make([]traj.ImageRef, benchImages)
	for i := range shots {
		body := benchScreenshot(rng, i)
		ref, err := store.PutBytes(ctx, body)
		if err != nil {
			b.Fatal(err)
		}
		shots[i] = traj.ImageRef{SHA256: ref.SHA256, Size: int64(len(body)), Width: 1280, Height: 800}
	}
	for n := 0; imageBytes < benchShardBytes*105/100; n++ {
		steps := benchMinSteps + n%(benchMaxSteps-benchMinSteps+1)
		jd := benchJudged(rng, n, steps, p.Hash(), shots)
		for i := range jd.Trajectory.Steps {
			img := jd.Trajectory.Steps[i].Screenshot.Size
			if i > 0 {
				img += jd.Trajectory.Steps[i-1].Screenshot.Size
			}
			imageBytes += benchGroup * img
		}
		_, _, sum := stepAdvantages(b, jd)
		rows += sum.KeptCandidates
		trajectories++
		body, err := traj.MarshalCompact(jd)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := bb.Publish(ctx, bus.Subject(bus.Judged, jd.Trajectory.Task.App), archive.MessageID(jd.Trajectory.ID, jd.Judgement.Judge.ID()), body, nil); err != nil {
			b.Fatal(err)
		}
	}
	return rows, trajectories, imageBytes
}

// BenchmarkAdvantageService runs the advantage command (step mode, --drain,
// --embed-images, Arrow shards, default settings otherwise: 64 handlers,
// 512 MiB shards) in a child process over judged trajectories whose rows
// embed more than 2 GB of screenshots, and reports advantage.rows_per_s
// (rows over the command's wall time, start to exit) and
// advantage.peak_rss_mb (the child's VmHWM; target ≤ 300, checked). The
// input is synthetic: clean successes of 3–12 steps with G = 8 over 24
// distinct ~250 KB PNG screenshots (1280×800) in the local blob store of
// the data directory, on a NATS server of the parent process (so the
// child's memory is the service's, not the server's). Every row embeds
// its prompt's images (the step's screenshot and the previous one), so 74
// trajectories give 4,344 rows and 2.1 GB of shards. The run checks the
// manifest: the rows pkg/grpo says, at least 2e9 bytes. One run per
// iteration (~10 s, plus ~5 s of input).
func BenchmarkAdvantageService(b *testing.B) {
	for b.Loop() {
		b.StopTimer()
		srv := natstest.Start(b)
		dir := b.TempDir()
		wantRows, trajectories, imageBytes := benchInput(b, dir, srv.URL())

		args := []string{"--drain", "--nats", srv.URL(), "--data", dir, "--log-level", "warn", "--embed-images", "--since", SinceAll}
		report := filepath.Join(b.TempDir(), "report.json")
		cmd := proctest.Command(b, report, args...)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		b.StartTimer()
		err := cmd.Run()
		b.StopTimer()
		if err != nil {
			b.Fatalf("advantage: %v\n%s", err, out.String())
		}
		rep, err := proctest.ReadReport(report)
		if err != nil {
			b.Fatalf("%v\n%s", err, out.String())
		}

		ctx := context.Background()
		bucket, set := shardSet(ctx, b, dir)
		if set == "" {
			b.Fatalf("no manifest\n%s", out.String())
		}
		m, err := shard.ReadManifest(ctx, bucket, set)
		if err != nil {
			b.Fatal(err)
		}
		var total int64
		for _, f := range m.Files {
			total += f.Bytes
		}
		if m.Counts.Rows != wantRows || m.Counts.Trajectories != trajectories {
			b.Fatalf("manifest: %d rows of %d trajectories, want %d of %d\n%s", m.Counts.Rows, m.Counts.Trajectories, wantRows, trajectories, out.String())
		}
		if total < benchShardBytes {
			b.Fatalf("the run wrote %d bytes of shards, want at least %d", total, int64(benchShardBytes))
		}
		b.Logf("%d trajectories, %d rows, %d files, %.2f GB of shards (%.2f GB of embedded images), %.1f s, peak RSS %d MB",
			trajectories, wantRows, len(m.Files), float64(total)/1e9, float64(imageBytes)/1e9, rep.Seconds, rep.PeakRSS>>20)
		b.ReportMetric(float64(wantRows)/rep.Seconds, "advantage.rows_per_s")
		b.ReportMetric(float64(rep.PeakRSS)/(1<<20), "advantage.peak_rss_mb")
		b.ReportMetric(float64(total)/1e6/rep.Seconds, "advantage.shard_MB_per_s")
		b.ReportMetric(float64(total)/1e9, "advantage.shard_gb")
		if rep.PeakRSS > benchMaxRSS {
			b.Errorf("peak RSS %d MB, want at most %d MB; the command's output:\n%s", rep.PeakRSS>>20, benchMaxRSS>>20, out.String())
		}
		srv.Shutdown()
		b.StartTimer()
	}
}
