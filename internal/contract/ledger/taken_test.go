package ledger

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/nats-io/nats.go"
)

func TestTaken(t *testing.T) {
	var k Taken
	if runs, aside := k.Runs(); len(runs) != 0 || aside == nil || len(aside) != 0 {
		t.Fatalf("zero Taken: runs %v, aside %v; want none and an empty map", runs, aside)
	}
	var wg sync.WaitGroup
	for i, c := range []struct {
		run, app, id string
		aside        bool
	}{
		{"r2", "ChimeraX", "a", false},
		{"r1", "KAlgebra", "b", true},
		{"r1", "Celestia", "c", false},
		{"r2", "ChimeraX", "d", true},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k.Took(c.run, c.app, c.id, c.aside)
			if i == 0 {
				k.SetAside("e") // a dead letter of a trajectory whose run was not recorded
			}
		}()
	}
	wg.Wait()
	runs, aside := k.Runs()
	want := []RunApp{{"r1", "Celestia"}, {"r1", "KAlgebra"}, {"r2", "ChimeraX"}}
	if !slices.Equal(runs, want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
	if got := slices.Sorted(maps.Keys(aside)); !slices.Equal(got, []string{"b", "d", "e"}) {
		t.Errorf("aside %v, want b d e", got)
	}
	aside["x"] = true // a copy: the Taken is not changed
	if _, again := k.Runs(); again["x"] {
		t.Error("Runs returned the Taken's own map, not a copy")
	}
}

func TestTrajectoryOf(t *testing.T) {
	for in, want := range map[string]string{
		"01M8JPDBGNRWY43S881XW0E9T8":                  "01M8JPDBGNRWY43S881XW0E9T8",
		"01M8JPDBGNRWY43S881XW0E9T8~verify-3":         "01M8JPDBGNRWY43S881XW0E9T8", // rollout --verify's re-run
		"01M8JPDBGNRWY43S881XW0E9T8.8c5c93b64f4f3ac1": "01M8JPDBGNRWY43S881XW0E9T8", // a judged message
	} {
		if got := TrajectoryOf(in); got != want {
			t.Errorf("TrajectoryOf(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestDeadLettersRemove: the trajectories dead-lettered from the given
// subjects, by any process and under any message id that names them (a
// re-run's, a judged message's), are taken out of what the ledger check
// found missing; another app's dead letters are not; and when the dead
// letters cannot be read, what was missing is returned as it was, with the
// error.
func TestDeadLettersRemove(t *testing.T) {
	ctx := context.Background()
	b, _ := openLedger(ctx, t, bus.Config{DataDir: t.TempDir()})
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	dead := func(subject, msgID string) {
		t.Helper()
		h := nats.Header{}
		h.Set(bus.HeaderDeadMsgID, msgID)
		if _, err := b.Publish(ctx, bus.DeadSubject(subject), "dead-"+subject+"-"+msgID, []byte("{}"), h); err != nil {
			t.Fatal(err)
		}
	}
	raw, judged := bus.Subject(bus.Raw, "ChimeraX"), bus.Subject(bus.Judged, "ChimeraX")
	dead(raw, "t1")
	dead(raw, "t3~verify-1")
	dead(bus.Subject(bus.Raw, "KAlgebra"), "t2")
	dead(judged, "t4.v1")
	missing := []string{"t1", "t2", "t3", "t4", "t5"}
	d := DeadLetters{Bus: b}
	for _, tc := range []struct {
		subjects []string
		want     []string
	}{
		{[]string{raw}, []string{"t2", "t4", "t5"}},
		{[]string{raw, judged}, []string{"t2", "t5"}},
		{[]string{bus.Subject(bus.Raw, "Celestia")}, missing},
	} {
		got, err := d.Remove(ctx, missing, tc.subjects...)
		if err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("Remove(%v) = %v, %v; want %v", tc.subjects, got, err, tc.want)
		}
	}
	if !slices.Equal(missing, []string{"t1", "t2", "t3", "t4", "t5"}) {
		t.Errorf("Remove changed its argument: %v", missing)
	}

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	other := bus.Subject(bus.Raw, "Lean") // not read yet: the cancelled context fails the read
	if got, err := d.Remove(cctx, missing, other); err == nil || !slices.Equal(got, missing) {
		t.Errorf("Remove with the dead letters unreadable = %v, %v; want what was missing and an error", got, err)
	}
}

// TestDeadLettersLost: Lost is the ledger's comparison less the dead
// letters; the comparison's error is returned as it is, and nothing is
// read when nothing is missing.
func TestDeadLettersLost(t *testing.T) {
	ctx := context.Background()
	b, _ := openLedger(ctx, t, bus.Config{DataDir: t.TempDir()})
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	raw := bus.Subject(bus.Raw, "ChimeraX")
	h := nats.Header{}
	h.Set(bus.HeaderDeadMsgID, "t2~verify-1")
	if _, err := b.Publish(ctx, bus.DeadSubject(raw), "dead-t2", []byte("{}"), h); err != nil {
		t.Fatal(err)
	}
	listed := []string{"t1", "t2", "t3"}
	unreceived := func(_ context.Context, run string, have func(string) bool) ([]string, int, bool, error) {
		if run == "broken" {
			return nil, 0, false, errors.New("ledger unreadable")
		}
		var missing []string
		for _, id := range listed {
			if !have(id) {
				missing = append(missing, id)
			}
		}
		return missing, len(listed), true, nil
	}
	d := DeadLetters{Bus: b}
	lost, n, readErr, err := d.Lost(ctx, unreceived, "r", func(id string) bool { return id == "t1" }, raw)
	if err != nil || readErr != nil || n != 3 || !slices.Equal(lost, []string{"t3"}) {
		t.Errorf("Lost = %v, %d, %v, %v; want [t3], 3, no errors", lost, n, readErr, err)
	}
	if _, _, _, err := d.Lost(ctx, unreceived, "broken", func(string) bool { return false }, raw); err == nil {
		t.Error("Lost of an unreadable ledger: no error")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel() // nothing missing: the dead letters are not read, so the cancelled context does not matter
	if lost, _, readErr, err := d.Lost(cctx, unreceived, "r", func(string) bool { return true }, bus.Subject(bus.Raw, "Lean")); lost != nil || readErr != nil || err != nil {
		t.Errorf("Lost with nothing missing = %v, %v, %v; want nothing", lost, readErr, err)
	}
}
