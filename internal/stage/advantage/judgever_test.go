package advantage

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/traj"
)

// The processes of one set (states on one bucket) racing to bind it, each
// with a judgement of its own version, agree on one version: the first
// recorded. Each then takes that version and turns the others away.
func TestJudgeVersionFirstWinsAcrossProcesses(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := statesOn(ctx, t)
	const n = 6
	vers := make([]traj.JudgeVersion, n)
	binders := make([]*binder, n)
	for i := range n {
		vers[i] = traj.JudgeVersion{PromptSHA256: "p", Models: []string{"m"}, Policy: fmt.Sprintf("unanimous@%d", i+1)}
		binders[i] = &binder{st: open()}
		if rec, err := binders[i].start(ctx, ""); err != nil || rec != nil {
			t.Fatalf("start of an unbound set: %+v %v", rec, err)
		}
	}
	bound := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			_, _, b, err := binders[i].take(ctx, vers[i])
			if err != nil {
				t.Error(err)
			}
			bound[i] = b
		})
	}
	wg.Wait()
	for i := range n {
		if bound[i] != bound[0] {
			t.Fatalf("processes bound the set to %q", bound)
		}
	}
	for i, b := range binders {
		for j, v := range vers {
			ok, _, got, err := b.take(ctx, v)
			if err != nil || ok != (v.ID() == bound[0]) || got != bound[0] {
				t.Errorf("process %d, version %d: ok %v, bound %s, %v", i, j, ok, got, err)
			}
			if _, first, _, _ := b.take(ctx, v); first {
				t.Errorf("process %d, version %d: logged as new twice", i, j)
			}
		}
	}
	if rec, err := (&binder{st: open()}).start(ctx, ""); err != nil || rec == nil || rec.ID != bound[0] {
		t.Errorf("a later process reads %+v %v, want %s", rec, err, bound[0])
	}
}

// --judge-version binds a set at its start; a set made before bindings
// continues bound to the version most of its committed messages have.
func TestJudgeVersionAtStart(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	open := statesOn(ctx, t)
	given := traj.JudgeVersion{Policy: "majority@4"}
	b := &binder{st: open()}
	if rec, err := b.start(ctx, given.ID()); err != nil || rec == nil || rec.ID != given.ID() || !rec.Given {
		t.Fatalf("start with a version: %+v %v", rec, err)
	}
	if ok, _, _, err := b.take(ctx, traj.JudgeVersion{Policy: "unanimous@4"}); ok || err != nil {
		t.Errorf("another version taken: %v %v", ok, err)
	}
	if _, err := (&binder{st: open()}).start(ctx, traj.JudgeVersion{Policy: "x"}.ID()); err == nil {
		t.Error("a set bound to one version started with another")
	}

	st := open()
	st.set = "old-set"
	st.learn(Commit{ID: "c1", Messages: []string{"01A.bbbbbbbbbbbbbbbb", "01B.aaaaaaaaaaaaaaaa", "01C.bbbbbbbbbbbbbbbb",
		"group:run.1\x00ChimeraX/S01.cccccccccccccccc", "group:run.2\x00ChimeraX/S01.cccccccccccccccc", "group:r.3.cccccccccccccccc", "01D.not-a-version", "01E.not-a-version", "01F.not-a-version"}})
	if rec, err := (&binder{st: st}).start(ctx, ""); err != nil || rec == nil || rec.ID != "bbbbbbbbbbbbbbbb" {
		t.Errorf("an old set is bound to %+v (%v), want the version of most of its messages", rec, err)
	}
}
