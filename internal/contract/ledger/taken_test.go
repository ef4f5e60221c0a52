package ledger

import (
	"maps"
	"slices"
	"sync"
	"testing"
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
