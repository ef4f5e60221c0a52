package advantage

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/proctest"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
)

// rowKey identifies a row: trajectory, step, candidate.
type rowKey struct {
	traj            string
	step, candidate int32
}

// expectedKeys lists the step-mode rows the judged trajectories give under
// the default configuration, by pkg/grpo.
func expectedKeys(t *testing.T, judged []*traj.Judged) map[rowKey]bool {
	t.Helper()
	want, _ := stepExpectation(t, judged)
	return want
}

// stepExpectation runs pkg/grpo over the judged trajectories in step mode
// under the default configuration: the rows' keys and the summed summary.
func stepExpectation(t *testing.T, judged []*traj.Judged) (map[rowKey]bool, grpo.Summary) {
	t.Helper()
	want := map[rowKey]bool{}
	var total grpo.Summary
	for _, jd := range judged {
		b, stats, sum := stepAdvantages(t, jd)
		total.Add(sum)
		for g, grp := range b.Groups {
			if stats[g].Dropped {
				continue
			}
			for k := grp.Offset; k < grp.Offset+grp.Size; k++ {
				want[rowKey{jd.Trajectory.ID, int32(grp.Step), int32(b.Candidates[k])}] = true
			}
		}
	}
	return want, total
}

// readKeys reads the row keys of every Arrow IPC file the manifest lists.
func readKeys(t *testing.T, bucket blob.Bucket, m shard.Manifest) map[rowKey]int {
	t.Helper()
	got := map[rowKey]int{}
	for _, f := range m.Files {
		body, err := blob.ReadAll(context.Background(), bucket, f.Key)
		if err != nil {
			t.Fatal(err)
		}
		r, err := ipc.NewFileReader(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("%s: %v", f.Key, err)
		}
		for i := 0; i < r.NumRecords(); i++ {
			rec, err := r.RecordBatch(i)
			if err != nil {
				t.Fatal(err)
			}
			sc := rec.Schema()
			col := func(name string) int {
				idx := sc.FieldIndices(name)
				if len(idx) != 1 {
					t.Fatalf("%s: no column %s", f.Key, name)
				}
				return idx[0]
			}
			ids := rec.Column(col("trajectory_id")).(*array.String)
			steps := rec.Column(col("step")).(*array.Int32)
			cands := rec.Column(col("candidate")).(*array.Int32)
			for j := 0; j < int(rec.NumRows()); j++ {
				got[rowKey{ids.Value(j), steps.Value(j), cands.Value(j)}]++
			}
		}
		r.Close()
	}
	return got
}

// checkWrittenOnce opens the folder dir as a bucket and checks that its one
// shard set holds each row of want exactly once and no other row, in its
// files and in its manifest's count; it returns the manifest.
func checkWrittenOnce(t *testing.T, dir string, want map[rowKey]bool) shard.Manifest {
	t.Helper()
	if len(want) == 0 {
		t.Fatal("no rows expected: the corpus gives none, so the check would prove nothing")
	}
	bucket, err := blob.OpenBucket(context.Background(), dir, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := onlyManifest(t, bucket)
	got := readKeys(t, bucket, m)
	for k := range want {
		if got[k] != 1 {
			t.Errorf("row %v written %d times, want once", k, got[k])
		}
	}
	if len(got) != len(want) || m.Counts.Rows != len(want) {
		t.Errorf("the set holds %d distinct rows (manifest: %d), want %d", len(got), m.Counts.Rows, len(want))
	}
	return m
}

// Acceptance 3 (step and outcome modes): advantage is killed with SIGKILL at 5 random
// moments while it drains the judged stream, and started again until it
// finishes. The final shard set holds every expected row exactly once
// (key: trajectory, step, candidate): none missing, none twice.
func TestAcceptAdvantageKillAndRestart(t *testing.T) {
	forDrainModes(t, killAndRestart)
}

// forDrainModes runs test in step and outcome modes, each as a subtest;
// outcome mode only without the race detector (make test's acceptance
// run).
func forDrainModes(t *testing.T, test func(t *testing.T, mode string)) {
	for _, mode := range []string{ModeStep, ModeOutcome} {
		if raceEnabled && mode == ModeOutcome {
			continue
		}
		t.Run(mode, func(t *testing.T) { test(t, mode) })
	}
}

// drainRig is the set-up of a test that runs advantage processes: the
// judged corpus is the package's shared one (the test's own copy of its
// data directory: blob store and archive); the processes drain a fresh
// NATS server, on which the test publishes copies of its judged
// trajectories, and nothing else.
type drainRig struct {
	dir    string // the data directory
	judged []*traj.Judged
	b      *bus.Bus
	store  *blob.Store
	// args are those of an advantage drain of the rig in its mode.
	args []string
}

// newDrainRig starts the NATS server with the topology and opens the
// corpus's copy for a drain in mode.
func newDrainRig(ctx context.Context, t *testing.T, mode string) *drainRig {
	t.Helper()
	srv := natstest.Start(t)
	dir, judged := corpus(t)
	b := pipetest.Bus(t, srv.URL())
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(ctx, filepath.Join(dir, "blobs"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return &drainRig{dir: dir, judged: judged, b: b, store: store,
		args: []string{"--drain", "--nats", srv.URL(), "--data", dir, "--log-level", "warn", "--mode", mode,
			"--concurrency", "4", "--ack-wait", "2s", "--max-delay", "100ms", "--rows-per-shard", "40", "--since", SinceAll}}
}

// start starts an advantage drain writing its output to logf; done
// receives its end (the caller receives it).
func (r *drainRig) start(t *testing.T, logf *os.File) (cmd *exec.Cmd, done chan error) {
	t.Helper()
	cmd = proctest.Command(t, "", r.args...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done = make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	return cmd, done
}

// killAndRestart is TestAcceptAdvantageKillAndRestart in one mode. In outcome mode
// the groups (the samples of one task in one run) are completed by their
// last member, whose message may come in another process than the
// others': the members wait in the KV bucket across the kills.
func killAndRestart(t *testing.T, mode string) {
	const kills = 5
	rig := newDrainRig(t.Context(), t, mode)
	// Many more messages: each judged trajectory again under new ids (and,
	// so that each copy is a whole outcome group of its own, in a new run),
	// so that the drain takes long enough to be killed in the middle. The
	// copies go into the judge's archive too, where outcome mode reads the
	// members of a complete group.
	if len(expectedKeys(t, rig.judged)) == 0 {
		t.Fatal("the run gave no clean-success rows: the test needs them")
	}
	var all []*traj.Judged
	copies := 26 // about 300 messages (the corpus has 12 judged trajectories)
	if raceEnabled {
		copies = 9
	}
	round := 0
	publishCopies := func(n int) {
		for range n {
			round++
			all = append(all, publishJudgedCopies(t, rig.b, rig.store, rig.judged, round)...)
		}
	}
	publishCopies(copies)

	logf, err := os.Create(filepath.Join(rig.dir, "advantage.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	killed, early := 0, 0
	for killed < kills {
		cmd, done := rig.start(t, logf)
		select {
		case err := <-done:
			// The drain beat the kill (a fast machine): give it more
			// work and try again, up to a bound.
			if early++; err != nil || early > 10 {
				t.Fatalf("advantage finished before kill %d (%v), %d times", killed+1, err, early)
			}
			publishCopies(copies)
		case <-time.After(time.Duration(300+rng.IntN(700)) * time.Millisecond):
			_ = cmd.Process.Kill()
			<-done
			killed++
		}
	}
	_, done := rig.start(t, logf)
	if err := <-done; err != nil {
		log, _ := os.ReadFile(logf.Name())
		t.Fatalf("the last run failed: %v\n%s", err, log)
	}
	checkShardSet(t, rig.dir, rig.store, all, mode, fmt.Sprintf("%d kills", killed))
}

// publishJudgedCopies publishes each judged trajectory again under a new
// id in a new run ("<run>-copy<round>", so that in outcome mode each
// copy's group is a group of its own), and puts the copies in the judge's
// archive too, where outcome mode reads the members of a complete group.
func publishJudgedCopies(t *testing.T, b *bus.Bus, store *blob.Store, judged []*traj.Judged, round int) []*traj.Judged {
	t.Helper()
	ctx := context.Background()
	var out []*traj.Judged
	for _, jd := range judged {
		cp := *jd
		cp.Trajectory.ID = traj.NewID()
		cp.Trajectory.Run = fmt.Sprintf("%s-copy%d", jd.Trajectory.Run, round)
		cp.Judgement.TrajectoryID, cp.Judgement.Run = cp.Trajectory.ID, cp.Trajectory.Run
		body, err := traj.MarshalCompact(cp)
		if err != nil {
			t.Fatal(err)
		}
		key := archive.Key(cp.Trajectory.Run, cp.Trajectory.Task.App, cp.Trajectory.ID, cp.Judgement.Judge.ID())
		if _, err := store.Bucket().Put(ctx, key, bytes.NewReader(body), int64(len(body)), blob.PutOptions{ContentType: "application/json"}); err != nil {
			t.Fatal(err)
		}
		if _, err := b.Publish(ctx, bus.Subject(bus.Judged, cp.Trajectory.Task.App), archive.MessageID(cp.Trajectory.ID, cp.Judgement.Judge.ID()), body, nil); err != nil {
			t.Fatal(err)
		}
		out = append(out, &cp)
	}
	return out
}

// checkShardSet reads the one shard set under dir/shards and checks it
// holds every row the judged trajectories all give in mode exactly once,
// and a manifest that counts them and every trajectory.
func checkShardSet(t *testing.T, dir string, store *blob.Store, all []*traj.Judged, mode, what string) {
	t.Helper()
	ctx := context.Background()
	var want map[rowKey]bool
	if mode == ModeStep {
		want = expectedKeys(t, all)
	} else {
		rows, _ := expectedServiceRows(t, store, all, readerCase{mode: ModeOutcome, est: grpo.DefaultEstimator()})
		want = map[rowKey]bool{}
		for _, r := range rows {
			want[rowKey{r.TrajectoryID, r.Step, r.Candidate}] = true
		}
	}
	bucket, set := shardSet(ctx, t, dir)
	m, err := shard.ReadManifest(ctx, bucket, set)
	if err != nil {
		t.Fatal(err)
	}
	got := readKeys(t, bucket, m)
	missing, dup := 0, 0
	for k := range want {
		switch n := got[k]; {
		case n == 0:
			missing++
		case n > 1:
			dup++
		}
	}
	extra := 0
	for k := range got {
		if !want[k] {
			extra++
		}
	}
	t.Logf("%s mode: %s; %d messages, %d rows expected, %d files; %d missing, %d duplicated, %d unexpected",
		mode, what, len(all), len(want), len(m.Files), missing, dup, extra)
	if missing+dup+extra != 0 || m.Counts.Rows != len(want) || m.Counts.Trajectories != len(all) {
		t.Fatalf("after %s: %d missing, %d duplicated, %d unexpected rows; manifest %+v (want %d rows of %d trajectories)",
			what, missing, dup, extra, m.Counts, len(want), len(all))
	}
}

// shardSet opens the shard bucket of data directory dir and returns it with
// the name of the (last listed) set that has a manifest ("": none).
func shardSet(ctx context.Context, tb testing.TB, dir string) (blob.Bucket, string) {
	tb.Helper()
	bucket, err := blob.OpenBucket(ctx, filepath.Join(dir, "shards"), blob.Config{})
	if err != nil {
		tb.Fatal(err)
	}
	var set string
	for info, err := range bucket.List(ctx, "") {
		if err != nil {
			tb.Fatal(err)
		}
		if filepath.Base(info.Key) == shard.ManifestName {
			set = filepath.Dir(info.Key)
		}
	}
	return bucket, set
}

// stepAdvantages is what pkg/grpo makes of one judged trajectory in step
// mode under the default configuration: its groups, their statistics and
// the summary.
func stepAdvantages(tb testing.TB, jd *traj.Judged) (*grpo.StepBatch, []grpo.GroupStats, grpo.Summary) {
	tb.Helper()
	labels, err := grpo.LabelSteps(&jd.Trajectory, &jd.Judgement, grpo.LabelModeClean)
	if err != nil {
		tb.Fatal(err)
	}
	b := &grpo.StepBatch{}
	if _, err := b.Add(&jd.Trajectory, labels, grpo.DefaultStepOptions()); err != nil {
		tb.Fatal(err)
	}
	_, stats, sum, err := b.Advantages(grpo.DefaultEstimator())
	if err != nil {
		tb.Fatal(err)
	}
	return b, stats, sum
}
