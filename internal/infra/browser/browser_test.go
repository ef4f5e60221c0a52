package browser

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// chromium skips the test when there is no Chromium (Find fails), unless
// CODAPIPE_REQUIRE_CHROMIUM=1 (make test sets it): then it fails.
func chromium(t *testing.T) {
	t.Helper()
	if _, err := Find(""); err != nil {
		if os.Getenv(RequireEnv) == "1" {
			t.Fatalf("%v (%s=1: this test needs Chromium; `make chromium` installs it)", err, RequireEnv)
		}
		t.Skipf("no Chromium, skipped: %v (`make chromium` installs it; CODAPIPE_REQUIRE_CHROMIUM=1 makes this a failure)", err)
	}
}

// writePage writes an HTML page into a test folder and returns its path.
func writePage(t *testing.T, html string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "page.html")
	if err := os.WriteFile(p, []byte(html), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// clean fails the test when the page reported an error of any kind.
func clean(t *testing.T, r *Result) {
	t.Helper()
	if len(r.Console)+len(r.Exceptions)+len(r.FailedLoads) > 0 {
		t.Errorf("errors on a clean page: console %q, exceptions %q, failed loads %q", r.Console, r.Exceptions, r.FailedLoads)
	}
}

func TestRender(t *testing.T) {
	chromium(t)
	tests := []struct {
		name    string
		html    string
		opt     Options
		wantErr string // a part of Render's error; "" means none
		check   func(t *testing.T, r *Result)
	}{{
		name: "tall page, full-page screenshot",
		html: `<!doctype html><body style="margin:0">
<div style="height:2900px;background:#f00"></div><div style="height:100px;background:#00f"></div>`,
		opt: Options{Screenshot: true},
		check: func(t *testing.T, r *Result) {
			clean(t, r)
			if r.Height < 3000 || r.Width != 1280 {
				t.Errorf("size %dx%d, want width 1280, height >= 3000", r.Width, r.Height)
			}
			img, err := png.Decode(bytes.NewReader(r.PNG))
			if err != nil {
				t.Fatalf("PNG (%d bytes): %v", len(r.PNG), err)
			}
			if b := img.Bounds(); b.Dx() != 1280 || b.Dy() != r.Height {
				t.Fatalf("PNG %dx%d, want 1280x%d", b.Dx(), b.Dy(), r.Height)
			}
			// Beyond the 800 px viewport the page is drawn too: red above
			// 2900 px, blue below.
			for _, p := range []struct {
				y       int
				r, g, b uint32
			}{{10, 0xffff, 0, 0}, {2000, 0xffff, 0, 0}, {2950, 0, 0, 0xffff}} {
				r, g, b, _ := img.At(640, p.y).RGBA()
				if r != p.r || g != p.g || b != p.b {
					t.Errorf("pixel (640,%d) = %04x %04x %04x, want %04x %04x %04x", p.y, r, g, b, p.r, p.g, p.b)
				}
			}
		},
	}, {
		name: "console errors, exceptions, failed loads",
		html: `<!doctype html><body><img src="missing.png"><img src="data:image/png;base64,!!notbase64">
<script>
console.log("not reported");
console.error("boom", {a: 1}, 42);
console.warn("careful");
throw new Error("kaboom");
</script>`,
		check: func(t *testing.T, r *Result) {
			if want := []string{"error: boom {a: 1} 42", "warning: careful"}; strings.Join(r.Console, "\n") != strings.Join(want, "\n") {
				t.Errorf("Console %q, want %q", r.Console, want)
			}
			if len(r.Exceptions) != 1 || !strings.HasPrefix(r.Exceptions[0], "Uncaught Error: kaboom (file://") ||
				!strings.Contains(r.Exceptions[0], "/page.html:6:") {
				t.Errorf("Exceptions %q, want one: Uncaught Error: kaboom (file://…/page.html:6:column)", r.Exceptions)
			}
			failed := strings.Join(r.FailedLoads, "\n")
			if len(r.FailedLoads) != 2 || !strings.Contains(failed, "/missing.png: net::ERR_FILE_NOT_FOUND") ||
				!strings.Contains(failed, "data:image/png;base64,!!notbase64: net::ERR_INVALID_URL") {
				t.Errorf("FailedLoads %q, want the missing file and the broken data: URI", r.FailedLoads)
			}
		},
	}, {
		name: "clean page",
		html: `<!doctype html><title>ok</title><p>Nothing wrong here.</p><script>console.log("hello"); console.info("fine")</script>`,
		check: func(t *testing.T, r *Result) {
			clean(t, r)
			if r.Console == nil || r.Exceptions == nil || r.FailedLoads == nil {
				t.Errorf("nil lists (want empty): %#v %#v %#v", r.Console, r.Exceptions, r.FailedLoads)
			}
			if r.Width != 1280 || r.Height != 800 {
				t.Errorf("size %dx%d, want the viewport, 1280x800", r.Width, r.Height)
			}
			if r.Load <= 0 || r.Load > time.Minute {
				t.Errorf("Load %v", r.Load)
			}
			if !strings.HasPrefix(r.Version, "Chrome/") && !strings.HasPrefix(r.Version, "HeadlessChrome/") {
				t.Errorf("Version %q", r.Version)
			}
			if string(r.Eval) != "null" || r.PNG != nil {
				t.Errorf("Eval %s, PNG %d bytes: want null and none", r.Eval, len(r.PNG))
			}
		},
	}, {
		name: "eval returns an object, awaited",
		html: `<!doctype html><title>Report</title><body style="margin:0"><div style="height:1500px"></div>`,
		opt: Options{Width: 800, Height: 600, Eval: `new Promise(resolve => setTimeout(() => resolve({
  title: document.title, width: innerWidth, items: [1, "two", null], nested: {ok: true}}), 10))`},
		check: func(t *testing.T, r *Result) {
			clean(t, r)
			var got struct {
				Title  string
				Width  int
				Items  []any
				Nested struct{ OK bool }
			}
			if err := json.Unmarshal(r.Eval, &got); err != nil {
				t.Fatalf("Eval %s: %v", r.Eval, err)
			}
			if got.Title != "Report" || got.Width != 800 || len(got.Items) != 3 || got.Items[1] != "two" || !got.Nested.OK {
				t.Errorf("Eval %s", r.Eval)
			}
			if r.Width != 800 || r.Height != 1500 {
				t.Errorf("size %dx%d, want 800x1500", r.Width, r.Height)
			}
		},
	}, {
		name:    "eval throws",
		html:    `<!doctype html><p>x</p>`,
		opt:     Options{Eval: `nope()`},
		wantErr: "eval in ",
		check: func(t *testing.T, r *Result) {
			t.Errorf("Render succeeded: %+v", r)
		},
	}}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			r, err := Render(ctx, writePage(t, tc.html), tc.opt)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one with %q", err, tc.wantErr)
				}
				t.Logf("error, as wanted: %v", err)
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tc.check(t, r)
		})
	}
}

func TestFindMissing(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "chromium")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	page := writePage(t, "<p>x</p>")
	tests := []struct{ name, binary, env string }{
		{"missing path", filepath.Join(dir, "no-chromium"), ""},
		{"not executable", notExec, ""},
		{"not in PATH", "no-such-chromium-binary", ""},
		{"missing CODAPIPE_CHROMIUM", "", filepath.Join(dir, "no-chromium")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envBinary, tc.env) // no t.Parallel: Setenv
			if _, err := Find(tc.binary); !errors.Is(err, ErrNoChromium) {
				t.Errorf("Find(%q): %v, want ErrNoChromium", tc.binary, err)
			}
			r, err := Render(t.Context(), page, Options{Binary: tc.binary})
			if !errors.Is(err, ErrNoChromium) || r != nil {
				t.Errorf("Render: %v, %v, want ErrNoChromium", r, err)
			}
		})
	}
}

// TestRenderChromiumExits: a Chromium that exits at once is an error
// with its exit status and the end of its output (no Chromium needed).
func TestRenderChromiumExits(t *testing.T) {
	fake := filepath.Join(t.TempDir(), "chromium")
	script := "#!/bin/sh\necho 'starting' >&2\necho 'fake chromium: cannot open display' >&2\nexit 3\n"
	if err := os.WriteFile(fake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := Render(ctx, writePage(t, "<p>x</p>"), Options{Binary: fake})
	if err == nil || !strings.Contains(err.Error(), "exit status 3") || !strings.Contains(err.Error(), "fake chromium: cannot open display") {
		t.Fatalf("error %v, want Chromium's exit status and output", err)
	}
	t.Logf("error, as wanted: %v", err)
}

func TestRenderMissingPage(t *testing.T) {
	chromium(t)
	_, err := Render(t.Context(), filepath.Join(t.TempDir(), "none.html"), Options{})
	if !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("error %v, want one wrapping os.ErrNotExist", err)
	}
}

// TestRenderContextEnds: when ctx ends, Render returns promptly with ctx's
// error, having killed and waited for Chromium (no zombie, no process of
// its profile left) and removed the profile.
func TestRenderContextEnds(t *testing.T) {
	chromium(t)
	tests := []struct {
		name    string
		html    string
		timeout time.Duration // 0: canceled as soon as Chromium has started
		want    error
	}{
		{"canceled while starting", `<p>x</p>`, 0, context.Canceled},
		// The script never ends, the load event never comes.
		{"deadline while loading", `<p>x</p><script>for (;;) {}</script>`, 2 * time.Second, context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			if tc.timeout > 0 {
				ctx, cancel = context.WithTimeout(ctx, tc.timeout)
				defer cancel()
			}
			var pid int
			var profile string
			o := Options{Screenshot: true, started: func(p int, prof string) {
				pid, profile = p, prof
				if tc.timeout == 0 {
					cancel()
				}
			}}
			r, err := Render(ctx, writePage(t, tc.html), o)
			returned := time.Now()
			if !errors.Is(err, tc.want) || r != nil {
				t.Fatalf("Render: %v, %v; want %v", r, err, tc.want)
			}
			t.Logf("error, as wanted: %v", err)
			<-ctx.Done()
			// ctx ended before Render returned; how long before is not
			// known exactly for a cancel, but a deadline's is. Render waits
			// for Chromium's output to close, up to waitDelay.
			if dl, ok := ctx.Deadline(); ok {
				late := returned.Sub(dl)
				if late > waitDelay+3*time.Second {
					t.Errorf("Render returned %v after the deadline", late)
				}
				t.Logf("Render returned %v after the deadline", late)
			}
			if pid == 0 {
				t.Fatal("Chromium was not started")
			}
			// Waited for: a zombie would still take signal 0.
			if p, err := os.FindProcess(pid); err == nil {
				if err := p.Signal(syscall.Signal(0)); !errors.Is(err, os.ErrProcessDone) {
					t.Errorf("Chromium (pid %d) was not waited for: signal 0: %v", pid, err)
				}
			}
			if _, err := os.Stat(profile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("profile %s left: %v", profile, err)
			}
			if left := profileProcesses(t, profile, 3*time.Second); len(left) > 0 {
				t.Errorf("processes of the profile left: %q", left)
			}
		})
	}
}

// profileProcesses lists the processes (from /proc; none where there is
// no /proc) whose command line names profile, once they have had up to
// grace to end.
func profileProcesses(t *testing.T, profile string, grace time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(grace)
	for {
		var left []string
		cmdlines, _ := filepath.Glob("/proc/[0-9]*/cmdline")
		for _, f := range cmdlines {
			b, err := os.ReadFile(f)
			if err == nil && bytes.Contains(b, []byte("--user-data-dir="+profile)) {
				left = append(left, f+": "+string(bytes.ReplaceAll(b, []byte{0}, []byte{' '})))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(50 * time.Millisecond)
	}
}
