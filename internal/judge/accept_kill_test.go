package judge

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/natstest"
	"github.com/codapipe/codapipe/internal/proctest"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/pkg/traj"
)

// judgeProcess starts the judge command in a child process (the test
// binary in its TestMain mode) with args; its output goes to log.
func judgeProcess(t *testing.T, log *os.File, args ...string) *exec.Cmd {
	t.Helper()
	cmd := proctest.Command(t, "", args...)
	cmd.Stdout, cmd.Stderr = log, log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return cmd
}

// Acceptance 4: the judge is killed with SIGKILL at random moments (3
// times) while it drains a run, and started again until it finishes. No
// call that had answered before a kill is made again — the calls exceed
// those of an uninterrupted run (the same judge against a second
// simulated endpoint with the same configuration) only by the calls in
// flight at each kill, at most the concurrency per kill — every
// trajectory has exactly one judged message, and the judgements are those
// of the uninterrupted run.
func TestAcceptKillAndRestart(t *testing.T) {
	const (
		kills       = 3
		concurrency = 4
	)
	srv := natstest.Start(t)
	dir := t.TempDir()
	c := sharedCorpus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	b, err := bus.Open(ctx, bus.Config{URL: srv.URL(), Logger: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	raw := republish(t, b, c.trajs, "kill-"+traj.NewID(), 24)

	// Judge calls take 40 ms, so that kills land in the middle of calls.
	edit := func(c *simmodels.Config) {
		c.Clock = fault.Clock{Scale: 1}
		c.Judge.Faults.Latency = fault.Fixed(40 * time.Millisecond)
	}
	models, ep := startSimJudge(t, 1, edit)
	args := []string{
		"--drain", "--nats", srv.URL(), "--data", filepath.Join(dir, "judge"), "--store", filepath.Join(c.dir, "blobs"),
		"--max-frames", fmt.Sprint(testFrames),
		"--judge", ep.URL + "=" + ep.Model, "--concurrency", fmt.Sprint(concurrency), "--log-level", "warn",
		"--ack-wait", "2s", // a killed process's trajectories come back quickly
	}
	logf, err := os.Create(filepath.Join(dir, "judge.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	defer func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("judge processes' output:\n%s", b)
		}
	}()

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	killed := 0
	for killed < kills {
		before := len(models.Answered("judge"))
		cmd := judgeProcess(t, logf, args...)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }() // owned: received below
		// A random moment: after 1 to 5 more answered calls, plus up to
		// 30 ms (often in the middle of a call).
		target := before + 1 + rng.IntN(5)
		deadline := time.Now().Add(time.Minute)
		var done bool
		for !done && len(models.Answered("judge")) < target && time.Now().Before(deadline) {
			select {
			case err := <-exited:
				t.Fatalf("the judge process ended before it was killed (%v): the run is too short for %d kills", err, kills)
			case <-time.After(2 * time.Millisecond):
			}
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("kill %d: the process ended with %v, not by the kill", killed+1, err)
		}
		killed++
		t.Logf("kill %d after %d answered calls", killed, len(models.Answered("judge")))
	}
	cmd := judgeProcess(t, logf, args...)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("the last judge process: %v", err)
	}

	// What an uninterrupted run calls and decides.
	refModels, refEP := startSimJudge(t, 1, edit)
	pol := DefaultPolicy()
	pol.MaxFrames = testFrames
	ref, err := New(Config{Endpoints: []EndpointSpec{refEP}, Policy: pol, Store: c.store(t), Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	refDecision := map[string]*traj.Judgement{}
	for _, tr := range raw {
		jd, err := ref.Judge(ctx, tr, false)
		if err != nil {
			t.Fatal(err)
		}
		refDecision[tr.ID] = jd
	}

	calls, refCalls := models.Answered("judge"), refModels.Answered("judge")
	count := map[string]int{}
	for _, c := range calls {
		count[c]++
	}
	refSet := map[string]bool{}
	for _, c := range refCalls {
		refSet[c] = true
		if count[c] == 0 {
			t.Errorf("call %s of the uninterrupted run was never made", c)
		}
	}
	repeated := 0
	for c, n := range count {
		if !refSet[c] {
			t.Errorf("call %s is not one the uninterrupted run makes", c)
		}
		repeated += n - 1
	}
	t.Logf("%d calls, uninterrupted %d: %d repeated after %d kills", len(calls), len(refCalls), repeated, kills)
	if extra := len(calls) - len(refCalls); extra > kills*concurrency || extra != repeated {
		t.Errorf("%d calls beyond the uninterrupted run's %d; at most %d (the concurrency %d per kill) may be", extra, len(refCalls), kills*concurrency, concurrency)
	}

	docs, _ := judgedOn(t, b)
	seen := map[string]int{}
	for _, d := range docs {
		id := d.Trajectory.ID
		seen[id]++
		if r := refDecision[id]; r == nil || r.Decision != d.Judgement.Decision || len(r.Votes) != len(d.Judgement.Votes) {
			t.Errorf("trajectory %s: judged %s with %d votes, uninterrupted %+v", id, d.Judgement.Decision, len(d.Judgement.Votes), r)
		}
	}
	for _, tr := range raw {
		if seen[tr.ID] != 1 {
			t.Errorf("trajectory %s has %d judged messages, want 1", tr.ID, seen[tr.ID])
		}
	}
	if len(docs) != len(raw) {
		t.Errorf("%d judged messages for %d trajectories", len(docs), len(raw))
	}
}
