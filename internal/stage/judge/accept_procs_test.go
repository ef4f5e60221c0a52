package judge

import (
	"context"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Two judge processes drain one run on the shared durable consumer; one is
// killed with SIGKILL in the middle and started again. Both drains end,
// and every trajectory has exactly one judged message (message ids; a
// trajectory the killed process held comes back after --ack-wait and is
// judged by either).
func TestAcceptJudgeTwoProcesses(t *testing.T) {
	// The rig first (the first test of the pass to ask for the shared corpus
	// builds it), then the deadline of the drains.
	rig := newProcRig(t.Context(), t, "procs-"+traj.NewID())
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	models, ep := startSimJudge(t, 1, func(c *simmodels.Config) {
		c.Clock = fault.Clock{Scale: 1}
		c.Judge.Faults.Latency = fault.Fixed(20 * time.Millisecond)
	})
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
		cmd, exited := rig.start(t, rig.args(name, ep, 3)) // exited is received below
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

	docs := rig.checkJudgedOnce(t)
	t.Logf("%d trajectories, %d judged messages, %d judge calls", len(rig.raw), len(docs), len(models.Answered("judge")))
}
