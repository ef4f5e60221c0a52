package guest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"image"
	"image/png"
	"io"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/leaktest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	vmguest "github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// The conformance test checks the simulated guest against the guest
// protocol as docs/guest-protocol.md writes it down, through the client
// every VM backend uses (pkg/vmpool/guest). It runs a real simulated Machine.

// startGuest starts a simulated machine behind its guest and app servers
// and returns the guest server's URL and a client for both (StateURL =
// the app server's URL).
func startGuest(t *testing.T, cfg guest.Config, opts vmguest.Options) (string, *vmguest.Client, desktop.Machine) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 7})
	srv, err := guest.Start(ctx, m, cfg)
	if err != nil {
		t.Fatal(err)
	}
	base := srv.URL
	opts.StateURL = srv.AppURL
	if opts.RetryWait == 0 {
		opts.RetryWait = time.Millisecond
	}
	g, err := vmguest.New(base, opts)
	if err != nil {
		t.Fatal(err)
	}
	return base, g, m
}

// raw sends a request outside the client and returns status and body.
func raw(t *testing.T, method, url, contentType, body string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	c := &http.Client{Timeout: 10 * time.Second}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, b
}

// simState reads GET /sim/state.
func simState(t *testing.T, base string) desktop.State {
	t.Helper()
	code, b := raw(t, "GET", base+"/sim/state", "", "")
	var st desktop.State
	if code != 200 || json.Unmarshal(b, &st) != nil {
		t.Fatalf("/sim/state: %d %s", code, b)
	}
	return st
}

// a11yNode is an element of the accessibility XML.
type a11yNode struct {
	XMLName  xml.Name
	Name     string     `xml:"name,attr"`
	ID       string     `xml:"id,attr"`
	X        int        `xml:"x,attr"`
	Y        int        `xml:"y,attr"`
	W        int        `xml:"width,attr"`
	H        int        `xml:"height,attr"`
	Children []a11yNode `xml:",any"`
}

func (n a11yNode) find(name string) (a11yNode, bool) {
	if n.Name == name {
		return n, true
	}
	for _, c := range n.Children {
		if f, ok := c.find(name); ok {
			return f, true
		}
	}
	return a11yNode{}, false
}

func TestGuestConformance(t *testing.T) {
	// A generous screenshot timeout: rendering under -race on a loaded
	// machine is slow, and the default is tested in pkg/vmpool/guest.
	base, g, _ := startGuest(t, guest.Config{Clock: fault.Clock{Scale: 0.0001}}, vmguest.Options{ScreenshotTimeout: time.Minute})
	ctx := context.Background()

	t.Run("platform", func(t *testing.T) {
		p, err := g.Platform(ctx)
		if err != nil || p != "Linux (codapipe simulator)" {
			t.Fatalf("Platform = %q, %v", p, err)
		}
	})

	t.Run("screenshot is a 1280x800 PNG", func(t *testing.T) {
		b, err := g.Screenshot(ctx)
		if err != nil {
			t.Fatal(err)
		}
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		if img.Bounds() != image.Rect(0, 0, 1280, 800) {
			t.Errorf("bounds %v", img.Bounds())
		}
	})

	t.Run("screen size", func(t *testing.T) {
		w, h, err := g.ScreenSize(ctx)
		if err != nil || w != 1280 || h != 800 {
			t.Fatalf("ScreenSize = %d×%d, %v", w, h, err)
		}
		// The real guest serves it on POST only (what the client sends
		// first); a GET is Flask's 405.
		if code, b := raw(t, "GET", base+"/screen_size", "", ""); code != 405 || !bytes.Contains(b, []byte("Method Not Allowed")) {
			t.Errorf("GET /screen_size: %d %s", code, b)
		}
	})

	// Task initialization as ScienceBoard's ChimeraX/A-01.json does it.
	t.Run("task initialization and launch", func(t *testing.T) {
		res, err := g.SetupExecute(ctx, vmguest.ArgvCommand("rm", "/home/user/.local/share/ChimeraX/commands",
			"/home/user/.local/share/ChimeraX/file_history", "/home/user/.local/share/ChimeraX/preregistration"))
		// preregistration does not exist: rm reports it and exits 1, as on
		// a real VM; ScienceBoard ignores the code.
		var ee *vmguest.ExecError
		if !errors.As(err, &ee) || res.ReturnCode != 1 || !strings.Contains(res.Error, "preregistration") {
			t.Fatalf("rm: %+v, %v", res, err)
		}
		if _, err := g.SetupExecute(ctx, vmguest.ShellCommand("rm -f /home/user/.config/ChimeraX/ui-*")); err != nil {
			t.Fatal(err)
		}
		if err := g.Launch(ctx, vmguest.ArgvCommand("chimerax", "--cmd", "remotecontrol rest start json true port 8000")); err != nil {
			t.Fatal(err)
		}
		if st := simState(t, base); st.App != "ChimeraX" {
			t.Fatalf("after launch the state says app %q", st.App)
		}
		// With a shell, Popen starts the shell, whatever it then runs.
		if err := g.Launch(ctx, vmguest.ShellCommand("no-such-app --flag")); err != nil {
			t.Errorf("launching an unknown program through the shell: %v", err)
		}
		// Without, Popen raises FileNotFoundError: 500 {"status": "error"}.
		err = g.Launch(ctx, vmguest.ArgvCommand("no-such-app", "--flag"))
		var he *vmguest.HTTPError
		if !errors.As(err, &he) || he.Status != 500 || he.JSONStatus != "error" || !strings.Contains(he.Message, "No such file or directory: 'no-such-app'") {
			t.Errorf("launching an unknown program: %v", err)
		}
	})

	var cmdline a11yNode
	t.Run("accessibility lists the app's elements", func(t *testing.T) {
		at, err := g.Accessibility(ctx)
		if err != nil {
			t.Fatal(err)
		}
		var root a11yNode
		if err := xml.Unmarshal([]byte(at), &root); err != nil {
			t.Fatalf("not XML: %v\n%s", err, at)
		}
		for _, label := range []string{"ChimeraX command line", "ChimeraX log", "ChimeraX graphics window", "ChimeraX Graphics tab"} {
			n, ok := root.find(label)
			if !ok {
				t.Fatalf("%q missing from\n%s", label, at)
			}
			el, _ := apps.Catalog().FindElement(label)
			if got := image.Rect(n.X, n.Y, n.X+n.W, n.Y+n.H); got != el.Box {
				t.Errorf("%s: box %v, the layout says %v", label, got, el.Box)
			}
		}
		cmdline, _ = root.find("ChimeraX command line")
	})

	t.Run("cursor position after moveTo", func(t *testing.T) {
		if _, err := g.ExecPyAutoGUI(ctx, "pyautogui.moveTo(100, 200)"); err != nil {
			t.Fatal(err)
		}
		if st := simState(t, base); st.Cursor != [2]int{100, 200} {
			t.Fatalf("cursor %v after moveTo(100, 200)", st.Cursor)
		}
		// The real /cursor_position returns a tuple of two ints, which
		// Flask cannot answer: 500.
		_, _, err := g.CursorPosition(ctx)
		var he *vmguest.HTTPError
		if !errors.As(err, &he) || he.Status != 500 || !strings.Contains(he.Message, "TypeError") {
			t.Fatalf("CursorPosition: %v", err)
		}
	})

	t.Run("click and type change the app state", func(t *testing.T) {
		if cmdline.W == 0 {
			t.Fatal("no command line element (the accessibility subtest did not find it)")
		}
		cx, cy := cmdline.X+cmdline.W/2, cmdline.Y+cmdline.H/2
		before := simState(t, base)
		if _, err := g.ExecPyAutoGUI(ctx, "pyautogui.click("+strconv.Itoa(cx)+", "+strconv.Itoa(cy)+")"); err != nil {
			t.Fatal(err)
		}
		if st := simState(t, base); st.Focus != "cmdline" || st.Seq != before.Seq+1 {
			t.Fatalf("after the click: focus %q seq %d (before %d)", st.Focus, st.Seq, before.Seq)
		}
		// What uitars.Render emits for type(content='set bgColor white\n').
		if _, err := g.ExecPyAutoGUI(ctx, "pyautogui.write('set bgColor white')\npyautogui.press('enter')"); err != nil {
			t.Fatal(err)
		}
		if st := simState(t, base); reflect.DeepEqual(st.AppState, before.AppState) {
			t.Fatalf("typing a command changed nothing: %v", st.AppState)
		}
	})

	t.Run("the app server and the guest's /chimerax/run", func(t *testing.T) {
		// ChimeraX's REST server on the app port; the guest server relays
		// /chimerax/run to it.
		b, err := g.Call(ctx, vmguest.Request{Server: vmguest.ServerApp, Method: "GET", Path: "/run", Query: url.Values{"command": {"open 1a0m"}}})
		if err != nil || !bytes.Contains(b, []byte(`"log messages"`)) {
			t.Fatalf("app GET /run: %s, %v", b, err)
		}
		b, err = g.Call(ctx, vmguest.Request{Server: vmguest.ServerGuest, Method: "POST", Path: "/chimerax/run",
			Body: []byte(`{"command": "turn y 90"}`), ContentType: "application/json"})
		if err != nil || !bytes.Contains(b, []byte(`"log messages"`)) {
			t.Fatalf("guest POST /chimerax/run: %s, %v", b, err)
		}
		if err := g.Launch(ctx, vmguest.ShellCommand("LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/celestia-qt6 8000")); err != nil {
			t.Fatal(err)
		}
		b, err = g.Call(ctx, vmguest.Request{Server: vmguest.ServerApp, Method: "POST", Path: "/dump", Body: []byte(`[]`)})
		var dump map[string]any
		if err != nil || json.Unmarshal(b, &dump) != nil || len(dump) == 0 {
			t.Fatalf("Celestia /dump: %s, %v", b, err)
		}
	})

	t.Run("shell command returns output and returncode", func(t *testing.T) {
		res, err := g.Execute(ctx, vmguest.ShellCommand("mkdir -p /tmp/conf && echo hello > /tmp/conf/a.txt && cat /tmp/conf/a.txt"))
		if err != nil || res.Status != "success" || res.Output != "hello\n" || res.ReturnCode != 0 {
			t.Fatalf("%+v, %v", res, err)
		}
		// A string without shell=true is split like Python's shlex.
		res, err = g.Execute(ctx, vmguest.Command{Line: `echo "a  b" 'c'`})
		if err != nil || res.Output != "a  b c\n" {
			t.Fatalf("shlex: %+v, %v", res, err)
		}
	})

	t.Run("invalid command returns non-zero returncode with an error", func(t *testing.T) {
		res, err := g.Execute(ctx, vmguest.ShellCommand("no-such-program --flag"))
		var ee *vmguest.ExecError
		if !errors.As(err, &ee) || res.ReturnCode != 127 || res.Status != "success" || !strings.Contains(res.Error, "not found") {
			t.Fatalf("shell: %+v, %v", res, err)
		}
		// Without a shell the program cannot be started at all: HTTP 500
		// {"status":"error","message":...} as Python's FileNotFoundError.
		res, err = g.Execute(ctx, vmguest.ArgvCommand("no-such-program", "--flag"))
		var he *vmguest.HTTPError
		if !errors.As(err, &ee) || !errors.As(err, &he) || he.Status != 500 || res.Status != "error" ||
			res.ReturnCode == 0 || !strings.Contains(res.Message, "No such file or directory") {
			t.Fatalf("argv: %+v, %v", res, err)
		}
		// Code the guest's Python cannot run: exit 1 with a traceback.
		res, err = g.ExecPyAutoGUI(ctx, "pyautogui.frobnicate(1)")
		if !errors.As(err, &ee) || res.ReturnCode != 1 || !strings.Contains(res.Error, "frobnicate") {
			t.Fatalf("python: %+v, %v", res, err)
		}
	})

	t.Run("time.sleep runs on the clock within the 120 s limit", func(t *testing.T) {
		start := time.Now()
		if _, err := g.ExecPyAutoGUI(ctx, "time.sleep(60)"); err != nil {
			t.Fatal(err)
		}
		if el := time.Since(start); el < 5*time.Millisecond || el > 2*time.Second {
			t.Errorf("60 simulated seconds at scale 1e-4 took %v", el)
		}
		res, err := g.ExecPyAutoGUI(ctx, "time.sleep(100)\ntime.sleep(100)")
		var ee *vmguest.ExecError
		if !errors.As(err, &ee) || res.Status != "error" || !strings.Contains(res.Message, "timed out after 120 seconds") {
			t.Fatalf("%+v, %v", res, err)
		}
	})

	t.Run("file upload and download", func(t *testing.T) {
		if err := g.Upload(ctx, "~/Documents/notes.txt", []byte("line 1\nit's line 2\n")); err != nil {
			t.Fatal(err)
		}
		b, err := g.Download(ctx, "/home/user/Documents/notes.txt")
		if err != nil || string(b) != "line 1\nit's line 2\n" {
			t.Fatalf("Download = %q, %v", b, err)
		}
		_, err = g.Download(ctx, "/nope")
		var he *vmguest.HTTPError
		if !errors.As(err, &he) || he.Status != 404 {
			t.Errorf("missing file: %v", err)
		}
		// The real file.save creates no folder.
		err = g.Upload(ctx, "/home/user/inbox/notes.txt", []byte("x"))
		if !errors.As(err, &he) || he.Status != 500 || !strings.Contains(he.Message, "FileNotFoundError") {
			t.Errorf("upload into a missing folder: %v", err)
		}
		if _, err := g.Download(ctx, "/home/user/inbox"); !errors.As(err, &he) || he.Status != 404 {
			t.Errorf("the upload created its folder: %v", err)
		}
	})

	t.Run("unknown path is 404", func(t *testing.T) {
		// Flask's page, and no app route on the guest port.
		for _, p := range []string{"/no/such/endpoint", "/dump", "/vars"} {
			code, b := raw(t, "GET", base+p, "", "")
			if code != 404 || !bytes.Contains(b, []byte("<title>404 Not Found</title>")) {
				t.Errorf("GET %s: %d %s", p, code, b)
			}
		}
		if code, b := raw(t, "GET", base+"/sim/nope", "", ""); code != 404 || !bytes.Contains(b, []byte(`"message"`)) {
			t.Errorf("GET /sim/nope: %d %s", code, b)
		}
		_, err := g.Call(ctx, vmguest.Request{Server: vmguest.ServerGuest, Method: "GET", Path: "/no/such/endpoint"})
		var he *vmguest.HTTPError
		if !errors.As(err, &he) || he.Status != 404 {
			t.Errorf("Call: %v", err)
		}
		if code, _ := raw(t, "GET", base+"/execute", "", ""); code != 405 {
			t.Errorf("GET /execute: %d, want 405", code)
		}
	})

	t.Run("bodies server.py cannot read", func(t *testing.T) {
		// What request.json and the code before server.py's try block
		// raise: Flask's HTML pages, never the {"status": "error"} reply.
		for _, c := range []struct {
			ct, body string
			code     int
			want     string
		}{
			{"application/json", `{"command": "ls"`, 400, "Failed to decode JSON object"},
			{"text/plain", `{"command": "ls"}`, 415, "Unsupported Media Type"},
			{"application/json", `{"command": 42}`, 500, "TypeError: &#x27;int&#x27; object is not iterable"},
			{"application/json", `{"command": [1]}`, 500, "AttributeError: &#x27;int&#x27; object has no attribute &#x27;startswith&#x27;"},
			{"application/json", `{"command": "echo 'x"}`, 500, "ValueError: No closing quotation"},
			{"application/json", `[]`, 500, "AttributeError: &#x27;list&#x27; object has no attribute &#x27;get&#x27;"},
		} {
			for _, p := range []string{"/execute", "/setup/execute", "/setup/launch"} {
				code, b := raw(t, "POST", base+p, c.ct, c.body)
				if code != c.code || !bytes.Contains(b, []byte(c.want)) || !bytes.HasPrefix(b, []byte("<!doctype html>")) {
					t.Errorf("POST %s %s %s: %d %s", p, c.ct, c.body, code, b)
				}
			}
		}
	})

	t.Run("sim control endpoints", func(t *testing.T) {
		if code, b := raw(t, "GET", base+"/sim/health", "", ""); code != 200 || !bytes.Contains(b, []byte(`"status":"ok"`)) ||
			!bytes.Contains(b, []byte(`"app_url":"http://127.0.0.1:`)) {
			t.Errorf("/sim/health: %d %s", code, b)
		}
		if code, b := raw(t, "POST", base+"/sim/reset", "", ""); code != 200 {
			t.Fatalf("/sim/reset: %d %s", code, b)
		}
		if st := simState(t, base); st.App != "" || st.Seq != 0 {
			t.Errorf("after reset: %+v", st)
		}
		if _, err := g.Download(ctx, "/home/user/Documents/notes.txt"); err == nil {
			t.Error("an uploaded file survived the revert")
		}
	})
}

func TestGuestFaultHangingScreenshotTimesOut(t *testing.T) {
	cfg := guest.Config{Endpoints: map[string]fault.Faults{"/screenshot": {HangProb: 1}}}
	_, g, _ := startGuest(t, cfg, vmguest.Options{ScreenshotTimeout: 150 * time.Millisecond})
	ctx := context.Background()
	start := time.Now()
	_, err := g.Screenshot(ctx)
	el := time.Since(start)
	var te *vmguest.TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, vmguest.ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	if want := "vmpool: guest " + g.Host() + ": screenshot: no answer within 150ms"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if el < 150*time.Millisecond || el > 5*time.Second {
		t.Errorf("Screenshot failed after %v, want just over 150ms", el)
	}
	// Only /screenshot hangs.
	if _, err := g.Platform(ctx); err != nil {
		t.Errorf("Platform: %v", err)
	}
}

// countingClient counts the requests a client sends.
func countingClient(n *atomic.Int32) *http.Client {
	return &http.Client{Transport: roundTripFunc(func(r *http.Request) (*http.Response, error) {
		n.Add(1)
		return http.DefaultTransport.RoundTrip(r)
	})}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func TestGuestFaultHTTP500AfterBoundedRetries(t *testing.T) {
	var sent atomic.Int32
	base, g, _ := startGuest(t, guest.Config{Faults: fault.Faults{ErrorProb: 1}},
		vmguest.Options{Retries: 2, HTTPClient: countingClient(&sent)})
	ctx := context.Background()

	_, err := g.Screenshot(ctx)
	var he *vmguest.HTTPError
	// An injected fault is Flask's page for an exception, not the
	// {"status": "error"} reply of a command that could not run: the agent
	// takes it for a VM fault.
	if !errors.As(err, &he) || he.Status != 500 || !strings.Contains(he.Message, "injected fault") || he.JSONStatus != "" {
		t.Fatalf("err = %v", err)
	}
	if sent.Load() != 3 {
		t.Errorf("Screenshot sent %d requests, want 1 + 2 retries", sent.Load())
	}

	sent.Store(0)
	res, err := g.ExecPyAutoGUI(ctx, "pyautogui.click(10, 10)")
	var ee *vmguest.ExecError
	if !errors.As(err, &ee) || !errors.As(err, &he) || he.Status != 500 || he.JSONStatus != "" {
		t.Fatalf("execute: %+v, %v", res, err)
	}
	if sent.Load() != 1 {
		t.Errorf("Execute sent %d requests; it must not be retried", sent.Load())
	}

	var stats struct{ Calls map[string]int }
	_, b := raw(t, "GET", base+"/sim/stats", "", "")
	if err := json.Unmarshal(b, &stats); err != nil || stats.Calls["/screenshot"] != 3 || stats.Calls["/execute"] != 1 {
		t.Errorf("/sim/stats: %s", b)
	}
}

func TestGuestFaultDeadUntilReset(t *testing.T) {
	for _, mode := range []string{guest.DeathReset, guest.DeathHang} {
		t.Run(mode, func(t *testing.T) {
			cfg := guest.Config{DieProb: 1, DeathMode: mode}
			// Short timeouts for the calls that meet the dead VM; no
			// screenshots (slow to render under -race on a busy machine).
			base, g, _ := startGuest(t, cfg, vmguest.Options{Retries: 1, DefaultTimeout: 150 * time.Millisecond,
				AccessibilityTimeout: 150 * time.Millisecond, ExecuteTimeout: 150 * time.Millisecond})
			ctx := context.Background()
			if _, err := g.Platform(ctx); err == nil {
				t.Fatal("a guest with die_prob 1 answered")
			}
			// The VM stays dead even when the probability drops to 0 ...
			if code, b := raw(t, "PUT", base+"/sim/faults", "application/json", `{"die_prob":0}`); code != 200 {
				t.Fatalf("PUT /sim/faults: %d %s", code, b)
			}
			for range 2 {
				_, err := g.Accessibility(ctx)
				if err == nil {
					t.Fatal("a dead guest answered")
				}
				if mode == guest.DeathHang && !errors.Is(err, vmguest.ErrTimeout) {
					t.Errorf("hang: err = %v", err)
				}
				if mode == guest.DeathReset && errors.Is(err, vmguest.ErrTimeout) {
					t.Errorf("reset: err = %v", err)
				}
				if _, err := g.Execute(ctx, vmguest.ShellCommand("true")); err == nil {
					t.Fatal("a dead guest ran a command")
				}
			}
			if code, b := raw(t, "GET", base+"/sim/health", "", ""); code != 503 || !bytes.Contains(b, []byte(`"dead"`)) {
				t.Errorf("/sim/health of a dead guest: %d %s", code, b)
			}
			// ... until it is reverted.
			if code, b := raw(t, "POST", base+"/sim/reset", "", ""); code != 200 {
				t.Fatalf("/sim/reset: %d %s", code, b)
			}
			if p, err := g.Platform(ctx); err != nil || p == "" {
				t.Fatalf("after reset: %q, %v", p, err)
			}
			if _, err := g.Accessibility(ctx); err != nil {
				t.Fatalf("after reset: %v", err)
			}
		})
	}
}

func TestGuestBootAndRevertTime(t *testing.T) {
	cfg := guest.Config{
		BootTime:   fault.Fixed(100 * time.Second),
		RevertTime: fault.Fixed(10 * time.Second),
		Clock:      fault.Clock{Scale: 0.01}, // boot 1 s, revert 100 ms
	}
	base, g, _ := startGuest(t, cfg, vmguest.Options{Retries: -1})
	ctx := context.Background()
	_, err := g.Platform(ctx)
	var he *vmguest.HTTPError
	if !errors.As(err, &he) || he.Status != 503 || !strings.Contains(he.Message, "booting") {
		t.Fatalf("while booting: %v", err)
	}
	if code, b := raw(t, "GET", base+"/sim/health", "", ""); code != 503 || !bytes.Contains(b, []byte("booting")) {
		t.Errorf("/sim/health while booting: %d %s", code, b)
	}
	// A client with retries rides out the boot.
	g2, _ := vmguest.New(base, vmguest.Options{Retries: 10, RetryWait: 100 * time.Millisecond, MaxRetryWait: 400 * time.Millisecond})
	if _, err := g2.Platform(ctx); err != nil {
		t.Fatalf("with retries: %v", err)
	}
	start := time.Now()
	if code, b := raw(t, "POST", base+"/sim/reset", "", ""); code != 200 {
		t.Fatalf("/sim/reset: %d %s", code, b)
	}
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("revert took %v, want ≥ 100ms", el)
	}
}

func TestGuestFaultsReproducible(t *testing.T) {
	run := func(seed uint64) string {
		cfg := guest.Config{Seed: seed, Faults: fault.Faults{ErrorProb: 0.4, Latency: fault.LogNormal(time.Second, 1, 0)},
			Clock: fault.Clock{Scale: 0.001}}
		_, g, _ := startGuest(t, cfg, vmguest.Options{Retries: -1})
		var out strings.Builder
		for range 24 {
			if _, err := g.Platform(context.Background()); err != nil {
				out.WriteByte('x')
			} else {
				out.WriteByte('.')
			}
		}
		return out.String()
	}
	a, b, c := run(1), run(1), run(2)
	if a != b {
		t.Errorf("same seed, different outcomes: %s vs %s", a, b)
	}
	if a == c {
		t.Errorf("seeds 1 and 2 gave the same outcomes %s", a)
	}
	if !strings.Contains(a, "x") || !strings.Contains(a, ".") {
		t.Errorf("error_prob 0.4 over 24 calls gave %s", a)
	}
}

// TestGuestStopsWithContext: a call hanging in the server ends when the
// server's context ends, and the server stops (Done) and no longer
// answers.
func TestGuestStopsWithContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
	srv, err := guest.Start(ctx, m, guest.Config{Faults: fault.Faults{HangProb: 1}})
	if err != nil {
		t.Fatal(err)
	}
	base := srv.URL
	g, _ := vmguest.New(base, vmguest.Options{DefaultTimeout: 5 * time.Second, Retries: -1})
	done := make(chan error, 1)
	go func() { _, err := g.Platform(context.Background()); done <- err }()
	// The server reports the call once it has arrived and hangs (GET
	// /sim/stats is a control call: never faulted).
	poll.Until(t, "the call to reach the server and hang", 10*time.Second, func() bool {
		var stats struct {
			Calls map[string]int
			Hangs int
		}
		_, b := raw(t, "GET", base+"/sim/stats", "", "")
		if err := json.Unmarshal(b, &stats); err != nil {
			t.Fatalf("/sim/stats: %s: %v", b, err)
		}
		return stats.Calls["/platform"] == 1 && stats.Hangs == 1
	})
	select {
	case err := <-done:
		t.Fatalf("the hung call ended before the context (%v)", err)
	default:
	}
	cancel() // ends the hung call and the server
	select {
	case err := <-done:
		if err == nil || errors.Is(err, vmguest.ErrTimeout) {
			t.Errorf("hung call ended with %v, want the server going away", err)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the hung call outlived the server")
	}
	select {
	case <-srv.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the server did not stop after its context ended")
	}
	if resp, err := http.Get(base + "/sim/health"); err == nil {
		resp.Body.Close()
		t.Fatal("the server still answers after it stopped")
	}
}

func TestGuestConfig(t *testing.T) {
	cfg := guest.Config{
		Faults:    fault.Faults{ErrorProb: 0.1, Latency: fault.Fixed(time.Second)},
		Endpoints: map[string]fault.Faults{"/accessibility": {HangProb: 0.5}},
		BootTime:  fault.LogNormal(30*time.Second, 0.5, 0), DieProb: 0.01, DeathMode: guest.DeathReset,
		Clock: fault.Clock{Scale: 0.01}, Seed: 9,
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	var back guest.Config
	if err := json.Unmarshal(b, &back); err != nil || back.Validate() != nil || back.Endpoints["/accessibility"].HangProb != 0.5 ||
		back.DeathMode != guest.DeathReset || back.Clock.Scale != 0.01 {
		t.Fatalf("round trip: %s → %+v, %v", b, back, err)
	}
	for _, bad := range []guest.Config{
		{DieProb: 2}, {DeathMode: "explode"}, {Faults: fault.Faults{ErrorProb: -1}},
		{Endpoints: map[string]fault.Faults{"screenshot": {}}}, {BootTime: fault.Dist{Kind: "weird"}}, {ExecLimit: -1},
	} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
		if _, err := guest.Start(context.Background(), desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog()}), bad); err == nil {
			t.Errorf("Start accepted %+v", bad)
		}
	}
}

// TestStartWaitsForItsGoroutines: once Done is closed no goroutine runs
// code of this package — not the server's own goroutines, not a handler —
// even with a hung call in flight, an idle keep-alive connection and a
// connection that never sends a request (which keeps Shutdown waiting
// until its grace ends and the server closes it).
func TestStartWaitsForItsGoroutines(t *testing.T) {
	before, dir := leaktest.Take(), leaktest.Dir()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := guest.Start(ctx, desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1}), guest.Config{Faults: fault.Faults{HangProb: 1}})
	if err != nil {
		t.Fatal(err)
	}

	// A call that hangs in the handler until the context ends.
	hung := make(chan error, 1)
	go func() {
		resp, err := http.Get(srv.URL + "/platform")
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	// An idle keep-alive connection (control calls are never faulted).
	keepAlive := &http.Client{Transport: &http.Transport{}}
	defer keepAlive.CloseIdleConnections()
	poll.Until(t, "the hung call to reach the server", 10*time.Second, func() bool {
		var stats struct{ Hangs int }
		resp, err := keepAlive.Get(srv.URL + "/sim/stats")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err := json.Unmarshal(b, &stats); err != nil {
			t.Fatalf("/sim/stats: %s: %v", b, err)
		}
		return stats.Hangs > 0
	})
	// A connection that never sends a request.
	conn, err := net.Dial("tcp", strings.TrimPrefix(srv.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	// The check sees the server while it runs (its goroutines and the
	// hung handler), so an empty answer below means they have ended.
	if n := len(before.Running(dir, false)); n < 3 {
		t.Fatalf("%d goroutines of the guest server while it runs, want at least 3 (serve, shutdown, the hung handler)", n)
	}

	select {
	case <-srv.Done():
		t.Fatal("Done before the context ended")
	default:
	}
	cancel()
	select {
	case <-srv.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop within 10 s of its context ending")
	}
	if err := <-hung; err == nil {
		t.Error("the hung call got an answer; want the connection dropped")
	}
	before.WaitGone(t, dir, false, "after Done")
}
