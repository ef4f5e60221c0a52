package sft

import (
	"slices"
	"testing"
)

// TestConfigSpellsApps: --apps names ScienceBoard apps in any case as the
// benchmark spells them (the archive's app names); globs and other names
// are kept as they are.
func TestConfigSpellsApps(t *testing.T) {
	o := Options{Out: t.TempDir(), Apps: []string{"kalgebra", "Chimera*", "Lab"}, Workers: 1}
	cfg, err := o.config()
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"KAlgebra", "Chimera*", "Lab"}; !slices.Equal(cfg.Apps, want) {
		t.Errorf("apps %q, want %q", cfg.Apps, want)
	}
}
