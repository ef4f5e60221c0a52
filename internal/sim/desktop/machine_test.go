package desktop_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"image"
	"io/fs"
	"net/url"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/apps/grass"
	"github.com/codapipe/codapipe/internal/sim/apps/kalgebra"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// The tests of the machine run it with the simulated apps (package apps),
// from outside the package.

func TestFieldEditing(t *testing.T) {
	m := desktoptest.New(t, 1, apps.All()...)
	m.Start("kalgebra 8000")
	field := func() string { return m.State().Fields["input"] }
	m.Write("ignored without focus")
	if m.State().Focus != "" || field() != "" {
		t.Fatalf("typing without focus changed %q", field())
	}
	m.Click("KAlgebra expression input")
	if m.State().Focus != "input" {
		t.Fatalf("focus %q", m.State().Focus)
	}
	steps := []struct {
		name string
		do   func()
		want string
	}{
		{"type", func() { m.Write("p := 3*4") }, "p := 3*4"},
		{"backspace", func() { m.Key("backspace") }, "p := 3*"},
		{"press char", func() { m.Key("5") }, "p := 3*5"},
		{"shift char", func() { m.Key("shift", "x") }, "p := 3*5X"},
		{"select all + type replaces", func() { m.Key("ctrl", "a"); m.Write("q") }, "q"},
		{"copy + paste", func() { m.Key("ctrl", "a"); m.Key("ctrl", "c"); m.Key("end"); m.Key("ctrl", "v") }, "qq"},
		{"select all + delete", func() { m.Key("ctrl", "a"); m.Key("delete") }, ""},
		{"space", func() { m.Write("a"); m.Key("space"); m.Write("b") }, "a b"},
		{"enter submits and clears", func() { m.Key("ctrl", "a"); m.Write("z := 2^10\n") }, ""},
	}
	for _, s := range steps {
		s.do()
		if got := field(); got != s.want {
			t.Fatalf("%s: field %q, want %q", s.name, got, s.want)
		}
	}
	if v := m.Get("/vars", ""); v["z"] != "1024" {
		t.Fatalf("vars %v", v)
	}
	// A click elsewhere drops the focus.
	m.Click("KAlgebra 2D Graph tab")
	if m.State().Focus != "" {
		t.Fatalf("focus %q after clicking a tab", m.State().Focus)
	}
	// Tab focuses the next field and selects it.
	m.Key("tab")
	if m.State().Focus != "input2d" {
		t.Fatalf("tab focused %q", m.State().Focus)
	}
}

func TestMachineBasics(t *testing.T) {
	m := desktoptest.New(t, 3, apps.All()...)
	if st := m.State(); st.App != "" || len(st.AppState) != 0 {
		t.Fatalf("fresh machine runs %q", st.App)
	}
	if _, _, err := m.AppServe("GET", "/dump", nil, nil); !errors.Is(err, desktop.ErrNoApp) {
		t.Errorf("no app: %v, want ErrNoApp", err)
	}
	if err := m.Launch("firefox"); !errors.Is(err, desktop.ErrUnknownProgram) {
		t.Errorf("launching an unknown program: %v", err)
	}
	if err := m.Launch(`/bin/bash -ic "conda activate grass; LD_PRELOAD=/x FLASK_PORT=8000 /app/bin/grass --gui ~/grassdata/x"`); err != nil {
		t.Fatal(err)
	}
	if m.State().App != grass.Name {
		t.Fatalf("app %q", m.State().App)
	}
	if b, status, err := m.AppServe("GET", "/vars", nil, nil); status != 404 || err != nil || len(b) != 0 {
		t.Errorf("GRASS /vars: status %d, %q, %v; want 404 and no body", status, b, err)
	}
	if !strings.Contains(m.Accessibility(), `name="GRASS Layers tab"`) || strings.Contains(m.Accessibility(), `name="GRASS console"`) {
		t.Errorf("accessibility tree:\n%s", m.Accessibility())
	}
	m.Input(desktop.Event{Kind: desktop.EvMoveTo, X: 5000, Y: -3, HasXY: true})
	if c := m.Cursor(); c != image.Pt(desktop.ScreenW-1, 0) {
		t.Errorf("cursor %v not clamped", c)
	}
	if err := m.Machine.Input(desktop.Event{Kind: "teleport"}); err == nil {
		t.Error("unknown event kind accepted")
	}
	seq := m.State().Seq
	m.Reset()
	if st := m.State(); st.App != "" || st.Seq != 0 || seq == 0 {
		t.Errorf("after reset: %+v (seq before %d)", st, seq)
	}
}

func TestShell(t *testing.T) {
	m := desktoptest.New(t, 0, apps.All()...)
	cases := []struct {
		cmd  string
		out  string // stdout then stderr
		code int
	}{
		{"echo hello world", "hello world\n", 0},
		{"printf '%s' 'a b' > ~/Desktop/x.txt && cat /home/user/Desktop/x.txt", "a b", 0},
		{"printf 'line\\n' >> ~/Desktop/x.txt; cat ~/Desktop/x.txt", "a bline\n", 0},
		{"ls ~/Desktop", "x.txt\n", 0},
		{"rm ~/Desktop/x.txt && ls ~/Desktop", "", 0},
		{"rm /nope", "rm: cannot remove '/nope': No such file or directory\n", 1},
		{"rm -f /nope /home/user/.config/ChimeraX/ui-*", "", 0},
		{"mkdir -p /tmp/a/b && touch /tmp/a/b/c && ls /tmp/a/b", "c\n", 0},
		{"false || echo fallback", "fallback\n", 0},
		{"false && echo skipped", "", 1},
		{"LD_LIBRARY_PATH=/x true", "", 0},
		{"cat /missing 2>/dev/null", "", 1},
		{"frobnicate --now", "sh: 1: frobnicate: not found\n", 127},
		{"echo 'unterminated", "sh: 1: Syntax error: unterminated single quote\n", 2},
		{`echo "a \"b\" $c"`, "a \"b\" $c\n", 0},
		{"curl -fsSL -o ~/Downloads/p.cif https://example.org/p.cif && cat ~/Downloads/p.cif", "simulated download of https://example.org/p.cif\n", 0},
		{"wget -q https://example.org/x", "simulated download of https://example.org/x\n", 0},
		{"echo a # a comment\necho b", "a\nb\n", 0},
		{"echo '#not' a#b", "#not a#b\n", 0},
		{"bash -c 'echo in; exit 3; echo after'", "in\n", 3},
		{"/bin/sh -lc \"printf x > /tmp/sc && cat /tmp/sc\"", "x", 0},
		{"printf 'echo one\\nfalse\\n' > /tmp/s.sh && bash /tmp/s.sh", "one\n", 1},
		{"bash /tmp/none.sh", "bash: /tmp/none.sh: No such file or directory\n", 127},
		{"/bin/bash /home/user/server/reset.sh", "", 0},
		{"code /home/user/sci /home/user/sci/Sci/Basic.lean", "", 0},
		{"echo x > /nope/y", "sh: 1: cannot create /nope/y: No such file or directory\n", 2},
		{"echo x > /tmp/s.sh/y", "sh: 1: cannot create /tmp/s.sh/y: Not a directory\n", 2},
	}
	for _, c := range cases {
		t.Run(c.cmd, func(t *testing.T) {
			stdout, stderr, code := m.Shell(c.cmd)
			if out := stdout + stderr; out != c.out || code != c.code {
				t.Errorf("Shell(%q) = %q, %d; want %q, %d", c.cmd, out, code, c.out, c.code)
			}
		})
	}
	// Starting and stopping an app from the shell.
	if _, stderr, code := m.Shell("rm /nope"); code != 1 || stderr == "" {
		t.Errorf("rm /nope: the message is not on stderr (%q, %d)", stderr, code)
	}
	if _, _, code := m.Shell("nohup /app/bin/kalgebra 8000 &"); code != 0 || m.State().App != kalgebra.Name {
		t.Fatalf("shell launch: code %d, app %q", code, m.State().App)
	}
	if _, _, code := m.Shell("pkill kalgebra"); code != 0 || m.State().App != "" {
		t.Fatalf("pkill: code %d, app %q", code, m.State().App)
	}
}

// TestFiles: ReadFile and WriteFile answer as the real file system does
// (the guest server's /read, /write, /append and /setup/upload rely on
// them), and create no folders.
func TestFiles(t *testing.T) {
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog()})
	for _, p := range []string{desktop.ResetScript, desktop.LeanFile} {
		if b, err := m.ReadFile(p); err != nil || len(b) == 0 {
			t.Errorf("snapshot file %s: %q, %v", p, b, err)
		}
	}
	if err := m.WriteFile(desktop.TeXDir+"/main.tex", []byte("a\r\n"), false); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteFile("atelier/main.tex", []byte("b"), true); err != nil { // relative to the home folder
		t.Fatal(err)
	}
	if b, err := m.ReadFile(desktop.TeXDir + "/main.tex"); string(b) != "a\r\nb" || err != nil {
		t.Errorf("read back %q, %v", b, err)
	}
	if b, err := m.ReadFile("/dev/null"); len(b) != 0 || err != nil {
		t.Errorf("/dev/null: %q, %v", b, err)
	}
	if err := m.WriteFile("/dev/null", []byte("x"), false); err != nil {
		t.Errorf("write /dev/null: %v", err)
	}
	for _, c := range []struct {
		p     string
		write bool
		want  syscall.Errno
	}{
		{"/home/user/nope.txt", false, syscall.ENOENT},
		{"/home/user/no/dir.txt", true, syscall.ENOENT},
		{"/home/user/Desktop", false, syscall.EISDIR},
		{"/home/user/Desktop", true, syscall.EISDIR},
		{desktop.LeanFile + "/x", false, syscall.ENOTDIR},
		{desktop.LeanFile + "/x", true, syscall.ENOTDIR},
	} {
		var err error
		if c.write {
			err = m.WriteFile(c.p, []byte("x"), false)
		} else {
			_, err = m.ReadFile(c.p)
		}
		var pe *fs.PathError
		if !errors.As(err, &pe) || pe.Err != c.want {
			t.Errorf("%s (write %v): %v, want %v", c.p, c.write, err, c.want)
		}
	}
	if _, err := m.ReadFile("/home/user/no/"); err == nil {
		t.Error("WriteFile created a folder")
	}
	m.Reset()
	if _, err := m.ReadFile(desktop.TeXDir + "/main.tex"); err == nil {
		t.Error("a written file survived the revert")
	}
}

func TestReadStateChunkErrors(t *testing.T) {
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
	png, err := m.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := desktop.ReadStateChunk(png); err != nil {
		t.Fatal(err)
	}
	corrupt := bytes.Clone(png)
	i := bytes.Index(corrupt, []byte(desktop.StateChunkKeyword))
	corrupt[i+len(desktop.StateChunkKeyword)+3] ^= 0xff
	plain, _ := screen.EncodePNG(image.NewRGBA(image.Rect(0, 0, 4, 4)))
	for name, data := range map[string][]byte{
		"not a png": []byte("GIF89a"), "crc mismatch": corrupt, "no chunk": plain, "truncated": png[:len(png)/2],
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := desktop.ReadStateChunk(data); err == nil {
				t.Error("no error")
			}
		})
	}
}

// TestConcurrentUse drives one machine from several goroutines (run with
// -race).
func TestConcurrentUse(t *testing.T) {
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
	if err := m.Launch("chimerax"); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				switch (g + i) % 5 {
				case 0:
					m.Input(desktop.Event{Kind: desktop.EvClick, X: 300 + i, Y: 736, HasXY: true, Button: "left", Clicks: 1})
				case 1:
					m.Input(desktop.Event{Kind: desktop.EvWrite, Text: "turn y 1\n"})
				case 2:
					m.AppServe("GET", "/run", url.Values{"command": {"info models"}}, nil)
				case 3:
					m.State()
					m.Accessibility()
				case 4:
					if g == 0 && i%10 == 4 {
						if _, err := m.Screenshot(); err != nil {
							t.Error(err)
						}
					}
				}
			}
		}(g)
	}
	wg.Wait()
}

// TestNewCatalogRejects: names, element ids and labels must be unique,
// boxes on the screen, program patterns valid.
func TestNewCatalogRejects(t *testing.T) {
	el := func(id, label string, box image.Rectangle) desktop.Element {
		return desktop.Element{ID: id, Label: label, Kind: "button", Box: box}
	}
	app := func(name string, elems ...desktop.Element) desktop.AppSpec {
		return desktop.AppSpec{Name: name, Programs: []string{strings.ToLower(name) + "*"}, Elements: elems}
	}
	ok := image.Rect(10, 60, 50, 80)
	good := app("Good", el("a", "Good A", ok))
	badPattern := app("X")
	badPattern.Programs = []string{"x["}
	for _, c := range []struct {
		name string
		apps []desktop.AppSpec
		want string
	}{
		{"duplicate name", []desktop.AppSpec{good, good}, `duplicate name`},
		{"duplicate id", []desktop.AppSpec{app("X", el("a", "X A", ok), el("a", "X B", ok))}, `duplicate element id "a"`},
		{"duplicate label", []desktop.AppSpec{good, app("X", el("b", "good a", ok))}, `duplicate element label "good a"`},
		{"off screen", []desktop.AppSpec{app("X", el("a", "X A", image.Rect(1200, 700, 1300, 900)))}, "off the screen"},
		{"empty box", []desktop.AppSpec{app("X", el("a", "X A", image.Rectangle{}))}, "off the screen"},
		{"bad pattern", []desktop.AppSpec{badPattern}, `program pattern "x["`},
	} {
		t.Run(c.name, func(t *testing.T) {
			if _, err := desktop.NewCatalog(c.apps...); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("NewCatalog: %v, want an error with %q", err, c.want)
			}
		})
	}
	cat, err := desktop.NewCatalog(good)
	if err != nil {
		t.Fatal(err)
	}
	if e, found := cat.FindElement("GOOD A"); !found || e.App != "Good" {
		t.Errorf("FindElement = %+v, %v", e, found)
	}
}

func TestRangeJSON(t *testing.T) {
	for _, c := range []struct {
		body string
		want []any
		bad  bool
	}{
		{body: `[1, "a"]`, want: []any{json.Number("1"), "a"}},
		{body: `{"b": 2, "a": [1]}`, want: []any{[]any{json.Number("1")}, json.Number("2")}},
		{body: `null`},
		{body: ` "x" `, want: []any{"x"}},
		{body: `[1] [2]`, bad: true},
		{body: `[1`, bad: true},
	} {
		got, err := desktop.RangeJSON([]byte(c.body), true)
		if (err != nil) != c.bad || !reflect.DeepEqual(got, c.want) {
			t.Errorf("RangeJSON(%s) = %#v, %v", c.body, got, err)
		}
	}
	if got, err := desktop.RangeJSON([]byte(`[1.5]`), false); err != nil || !reflect.DeepEqual(got, []any{1.5}) {
		t.Errorf("RangeJSON float64: %#v, %v", got, err)
	}
	if _, err := desktop.RangeJSON([]byte(`[1e400]`), false); err == nil {
		t.Errorf("RangeJSON float64 accepts 1e400")
	}
}
