package judge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/natstest"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/poll"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Two judge processes drain one run on the shared durable consumer; one is
// killed with SIGKILL in the middle and started again. Both drains end,
// and every trajectory has exactly one judged message (message ids; a
// trajectory the killed process held comes back after --ack-wait and is
// judged by either).
func TestAcceptJudgeTwoProcesses(t *testing.T) {
	srv := natstest.Start(t)
	dir := t.TempDir()
	c := sharedCorpus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := pipetest.Bus(t, srv.URL())
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	raw := republish(t, b, c.trajs, "procs-"+traj.NewID(), 24)
	models, ep := startSimJudge(t, 1, func(c *simmodels.Config) {
		c.Clock = fault.Clock{Scale: 1}
		c.Judge.Faults.Latency = fault.Fixed(20 * time.Millisecond)
	})
	args := func(name string) []string {
		return []string{
			"--drain", "--nats", srv.URL(), "--data", filepath.Join(dir, name), "--store", filepath.Join(c.dir, "blobs"),
			"--max-frames", fmt.Sprint(testFrames), "--judge", ep.URL + "=" + ep.Model, "--concurrency", "3",
			"--log-level", "warn", "--ack-wait", "2s",
		}
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
	wait := func(name string, exited chan error) {
		t.Helper()
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("judge %s: %v", name, err)
			}
		case <-ctx.Done():
			t.Fatalf("judge %s: its drain did not end", name)
		}
	}
	start := func(name string) (chan error, func() error) {
		cmd := judgeProcess(t, logf, args(name)...)
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }() // owned: received below
		return exited, cmd.Process.Kill
	}
	aExited, killA := start("a")
	bExited, _ := start("b")
	poll.Until(t, "a few judge calls", time.Minute, func() bool { return len(models.Answered("judge")) >= 6 })
	if err := killA(); err != nil {
		t.Fatal(err)
	}
	<-aExited // killed (or, on a fast machine, done)
	aExited, _ = start("a")
	wait("a", aExited)
	wait("b", bExited)

	docs, _ := judgedOn(t, b)
	seen := map[string]int{}
	for _, d := range docs {
		seen[d.Trajectory.ID]++
	}
	for _, tr := range raw {
		if seen[tr.ID] != 1 {
			t.Errorf("trajectory %s has %d judged messages, want 1", tr.ID, seen[tr.ID])
		}
	}
	if len(docs) != len(raw) {
		t.Errorf("%d judged messages for %d trajectories", len(docs), len(raw))
	}
	t.Logf("%d trajectories, %d judged messages, %d judge calls", len(raw), len(docs), len(models.Answered("judge")))
}
