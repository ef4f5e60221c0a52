package ledger

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// openLedger opens a bus with cfg, closed when the test ends (closing it
// before is fine), and the ledger on it.
func openLedger(ctx context.Context, t *testing.T, cfg bus.Config) (*bus.Bus, *Ledger) {
	t.Helper()
	b, err := bus.Open(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	l, err := Open(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	return b, l
}

func TestLedger(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, l := openLedger(ctx, t, bus.Config{DataDir: dir})
	t0 := time.Date(2026, 11, 21, 2, 0, 0, 0, time.UTC)
	start, err := l.Start(ctx, "nightly chimerax.v2", t0)
	if err != nil || !start.Equal(t0) {
		t.Fatalf("start %v %v", start, err)
	}
	// A second start of the same run keeps the first time.
	if again, err := l.Start(ctx, "nightly chimerax.v2", t0.Add(time.Hour)); err != nil || !again.Equal(t0) {
		t.Fatalf("restart got %v %v, want %v", again, err, t0)
	}
	tasks := []string{"GRASS GIS/A-01", "ChimeraX/A.01", "ChimeraX/A_01"}
	for i, tk := range tasks {
		if err := l.MarkDone(ctx, "nightly chimerax.v2", EpisodeKey{tk, i}, Record{ID: "id" + tk, Outcome: "finished", Passed: i == 0, Steps: i}, false); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.MarkDone(ctx, "other", EpisodeKey{"ChimeraX/A.01", 0}, Record{ID: "x"}, false); err != nil {
		t.Fatal(err)
	}
	b.Close()

	// Reopen on the same data directory: the ledger survives.
	_, l = openLedger(ctx, t, bus.Config{DataDir: dir})
	done, err := l.Done(ctx, "nightly chimerax.v2", tasks[:2])
	if err != nil {
		t.Fatal(err)
	}
	want := map[EpisodeKey]Record{
		{"GRASS GIS/A-01", 0}: {ID: "idGRASS GIS/A-01", Outcome: "finished", Passed: true, Steps: 0},
		{"ChimeraX/A.01", 1}:  {ID: "idChimeraX/A.01", Outcome: "finished", Steps: 1},
	}
	if len(done) != len(want) {
		t.Fatalf("done = %v, want %v", done, want)
	}
	for k, v := range want {
		if done[k] != v {
			t.Errorf("done[%v] = %+v, want %+v", k, done[k], v)
		}
	}

	// A duplicate publish keeps the record of the trajectory on the stream.
	if err := l.MarkDone(ctx, "nightly chimerax.v2", EpisodeKey{"ChimeraX/A.01", 1}, Record{ID: "other", Outcome: "failed"}, true); err != nil {
		t.Fatal(err)
	}
	if err := l.MarkDone(ctx, "nightly chimerax.v2", EpisodeKey{"ChimeraX/A.01", 2}, Record{ID: "new", Outcome: "failed"}, true); err != nil {
		t.Fatal(err)
	}
	done, err = l.Done(ctx, "nightly chimerax.v2", tasks[:2])
	if err != nil {
		t.Fatal(err)
	}
	if got := done[EpisodeKey{"ChimeraX/A.01", 1}]; got.ID != "idChimeraX/A.01" {
		t.Errorf("kept record %+v was overwritten", got)
	}
	if got := done[EpisodeKey{"ChimeraX/A.01", 2}]; got.ID != "new" {
		t.Errorf("missing record %+v was not written", got)
	}

	// A run without records, and one with many (read in one pass).
	if done, err := l.Done(ctx, "never ran", tasks); err != nil || len(done) != 0 {
		t.Errorf("empty run: %v, %v", done, err)
	}
	for i := range 1500 {
		if err := l.MarkDone(ctx, "big", EpisodeKey{"T", i}, Record{ID: fmt.Sprint(i)}, false); err != nil {
			t.Fatal(err)
		}
	}
	if done, err := l.Done(ctx, "big", []string{"T"}); err != nil || len(done) != 1500 || done[EpisodeKey{"T", 1499}].ID != "1499" {
		t.Errorf("big run: %d records, %v", len(done), err)
	}
}

func TestGroundingOf(t *testing.T) {
	rc := uitars.Resized()
	shot := traj.ImageRef{Width: 1280, Height: 800}
	tr := &traj.Trajectory{
		Models: traj.Models{Executor: traj.ModelRef{Coords: &rc}},
		Steps: []traj.Step{{Screenshot: shot, Candidates: []traj.Candidate{
			{ExecutorOutput: "Action: click(start_box='(644,406)')", Action: &traj.Action{Type: traj.Click, Point: &traj.Point{X: 0.5, Y: 0.5}}},
			{ExecutorOutput: "Action: drag(...)", Action: &traj.Action{Type: traj.Drag, Start: &traj.Point{X: 0.25, Y: 1}, End: &traj.Point{X: 1, Y: 0}}},
			{ExecutorOutput: "Action: click(start_box='(2000,1)')", ParseError: "x out", ParseErrorKind: traj.ParseOutOfRange},
			{ExecutorOutput: "garbage", ParseError: "bad", ParseErrorKind: traj.ParseSyntax},
			{ParseError: "empty input", ParseErrorKind: traj.ParseSyntax},                           // the executor answered nothing
			{Plan: "Thought: x\nAction: ANS 4", Action: &traj.Action{Type: traj.Answer, Text: "4"}}, // not grounded
		}}},
	}
	got := GroundingOf(tr)
	want := Grounding{Grounded: 5, Unparsed: 2, OutOfRange: 1, Points: 3, MaxX: 1288, MaxY: 812, ExtW: 1288, ExtH: 812}
	if got != want {
		t.Fatalf("GroundingOf = %+v, want %+v", got, want)
	}
	// A version 1 trajectory has no coords: grid1000.
	tr.Models.Executor.Coords = nil
	if g := GroundingOf(tr); g.ExtW != 1000 || g.MaxX != 1000 || g.MaxY != 1000 {
		t.Errorf("v1 trajectory: %+v, want grid extents", g)
	}
}
