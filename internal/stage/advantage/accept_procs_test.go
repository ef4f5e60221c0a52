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

	"github.com/codapipe/codapipe/pkg/traj"
)

// Two advantage processes drain one shard set's durable consumer at the
// same time (step and outcome modes); one is killed with SIGKILL in the
// middle and started again. Both drains end, and the set holds every
// expected row exactly once with one manifest counting them: an outcome
// group is written by one process only (its flush lease), the manifest by
// one writer at a time (the manifest lease).
func TestAcceptAdvantageTwoProcesses(t *testing.T) {
	forDrainModes(t, twoProcesses)
}

func twoProcesses(t *testing.T, mode string) {
	rig := newDrainRig(t.Context(), t, mode) // the rig first (it may build the corpus), then the drains' deadline
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	dir := rig.dir
	var all []*traj.Judged
	copies := 18 // about 200 messages (the corpus has 12 judged trajectories)
	if raceEnabled {
		copies = 7
	}
	for round := 1; round <= copies; round++ {
		all = append(all, publishJudgedCopies(t, rig.b, rig.store, rig.judged, round)...)
	}

	start := func(name string) (*exec.Cmd, chan error) {
		logf, err := os.OpenFile(filepath.Join(dir, name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { logf.Close() })
		return rig.start(t, logf) // every done is received below
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
	checkShardSet(t, dir, rig.store, all, mode, fmt.Sprintf("two processes, one killed: %v", killed))
}
