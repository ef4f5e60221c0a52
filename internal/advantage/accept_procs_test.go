package advantage

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/natstest"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/internal/proctest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Two advantage processes drain one shard set's durable consumer at the
// same time (step and outcome modes); one is killed with SIGKILL in the
// middle and started again. Both drains end, and the set holds every
// expected row exactly once with one manifest counting them: an outcome
// group is written by one process only (its flush lease), the manifest by
// one writer at a time (the manifest lease).
func TestAcceptAdvantageTwoProcesses(t *testing.T) {
	for _, mode := range []string{ModeStep, ModeOutcome} {
		if raceEnabled && mode == ModeOutcome {
			continue // run without the race detector (make test's acceptance run)
		}
		t.Run(mode, func(t *testing.T) { twoProcesses(t, mode) })
	}
}

func twoProcesses(t *testing.T, mode string) {
	// The judged corpus is the package's shared one (the test's own copy of
	// its data directory: blob store and archive); the advantage processes
	// drain a fresh NATS server, on which the test publishes the copies of
	// its judged trajectories, and nothing else.
	srv := natstest.Start(t)
	dir, judged := corpus(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	b := pipetest.Bus(t, srv.URL())
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	store, err := blob.Open(ctx, filepath.Join(dir, "blobs"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var all []*traj.Judged
	copies := 18 // about 200 messages (the corpus has 12 judged trajectories)
	if raceEnabled {
		copies = 7
	}
	for round := 1; round <= copies; round++ {
		all = append(all, publishJudgedCopies(t, b, store, judged, round)...)
	}

	args := []string{"--drain", "--nats", srv.URL(), "--data", dir, "--log-level", "warn", "--mode", mode,
		"--concurrency", "4", "--ack-wait", "2s", "--max-delay", "100ms", "--rows-per-shard", "40", "--since", SinceAll}
	start := func(name string) (*exec.Cmd, chan error) {
		logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		cmd := proctest.Command(t, "", args...)
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }() // owned by the test: every done is received below
		return cmd, done
	}
	wait := func(name string, done chan error) {
		t.Helper()
		select {
		case err := <-done:
			if err != nil {
				log, _ := os.ReadFile(filepath.Join(dir, name+".log"))
				t.Fatalf("advantage %s: %v\n%s", name, err, log)
			}
		case <-ctx.Done():
			t.Fatalf("advantage %s: its drain did not end", name)
		}
	}
	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 11))
	a, aDone := start("a")
	_, bDone := start("b")
	killed := false
	select {
	case err := <-aDone: // a fast machine: the drain beat the kill
		if err != nil {
			t.Fatalf("advantage a: %v", err)
		}
	case <-time.After(time.Duration(300+rng.IntN(700)) * time.Millisecond):
		_ = a.Process.Kill()
		<-aDone
		killed = true
		_, aDone = start("a")
		wait("a", aDone)
	}
	wait("b", bDone)
	checkShardSet(t, dir, store, all, mode, fmt.Sprintf("two processes, one killed: %v", killed))
}
