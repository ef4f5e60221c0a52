package archive

import "testing"

// TestParse: keys made by Key come apart into the
// same names, whatever characters they hold; other keys are refused.
func TestParse(t *testing.T) {
	for _, n := range []struct{ run, app, id, ver string }{
		{"sft-expert", "ChimeraX", "01ABC", "3612d87c3c433c43"},
		{"night/1", "GRASS GIS", "01X", "v1"},
		{"..", "a.b", "id.with.dots", "ver"},
		{"ünï=cødé", "=41", "x", "y"},
	} {
		key := Key(n.run, n.app, n.id, n.ver)
		k, ok := Parse(key)
		if !ok || k.Run != n.run || k.App != n.app || k.ID != n.id || k.Version != n.ver || k.Key != key {
			t.Errorf("%q: %+v %v", key, k, ok)
		}
	}
	for _, key := range []string{"judged/a/b/c.json", "judged/a/b/c.d.e.json", "judged/a/c.v.json", "other/a/b/c.v.json", "judged/a/b/c.v.txt", "judged/a=4/b/c.v.json", "judged/a=zz/b/c.v.json"} {
		if k, ok := Parse(key); ok {
			t.Errorf("%q parsed as %+v", key, k)
		}
	}
}
