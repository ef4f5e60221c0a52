package rollout

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/bus"
)

func TestLedger(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	b, err := bus.Open(ctx, bus.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	l, err := OpenLedger(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
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
	b, err = bus.Open(ctx, bus.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err = OpenLedger(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
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
