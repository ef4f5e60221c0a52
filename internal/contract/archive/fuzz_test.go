package archive

import (
	"testing"
)

// FuzzParse feeds arbitrary archive keys (a listing of the archive
// bucket: sftpack, the chaos accounting) to Parse, and arbitrary names to
// Key: a key Parse accepts is the key Key makes of the names it returns,
// and any names make a key under Prefix that Parse takes back apart into
// the same names.
func FuzzParse(f *testing.F) {
	f.Add(Key("nightly-2026-11-25-chimerax", "ChimeraX", "01KAKQ3J0G7ZR4X2M5T8V9W6YB", "v3"), "run", "app", "id", "ver")
	f.Add("judged/a/b/c.d.json", "../x", "a/b", "*", ">")
	f.Add("judged/a/b/c.d.e.json", "run.1", "app 1", "id.x", "v.1")
	f.Add("judged/%2e%2e/b/c.d.json", "\x00\n", "日本", "", ".")
	f.Fuzz(func(t *testing.T, key, run, app, id, ver string) {
		if n, ok := Parse(key); ok {
			if n.Key != key || Key(n.Run, n.App, n.ID, n.Version) != key {
				t.Fatalf("Parse(%q) = %+v, whose Key is %q", key, n, Key(n.Run, n.App, n.ID, n.Version))
			}
		}
		k := Key(run, app, id, ver)
		n, ok := Parse(k)
		// bus.KeyToken makes "=00" of both "" and "\x00" (the one pair of
		// names it does not tell apart; neither is a valid name), and
		// ParseKeyToken reads "=00" as "\x00".
		same := func(got, want string) bool { return got == want || want == "" && got == "\x00" }
		if !ok || !same(n.Run, run) || !same(n.App, app) || !same(n.ID, id) || !same(n.Version, ver) {
			t.Fatalf("Parse(Key(%q, %q, %q, %q)) = %+v, %v", run, app, id, ver, n, ok)
		}
	})
}
