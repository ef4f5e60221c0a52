package guest

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// These tests cover the client's own edge cases against httptest servers.
// The protocol itself is checked against the simulated guest in
// internal/sim/guest/conformance_test.go.

var tinyPNG = []byte("\x89PNG\r\n\x1a\n-not-really-an-image")

// fast are options for tests: short waits, a few retries.
func fast() Options {
	return Options{Retries: 2, RetryWait: time.Millisecond, MaxRetryWait: 4 * time.Millisecond}
}

func newTestClient(t *testing.T, h http.HandlerFunc, opts Options) (*Client, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	}))
	t.Cleanup(srv.Close)
	g, err := New(srv.URL, opts)
	if err != nil {
		t.Fatal(err)
	}
	return g, &n
}

func TestNewURLs(t *testing.T) {
	for _, tc := range []struct{ in, base, state, opt string }{
		{"http://10.0.0.5:5000", "http://10.0.0.5:5000", "http://10.0.0.5:8000", ""},
		{"10.0.0.5", "http://10.0.0.5:5000", "http://10.0.0.5:8000", ""},
		{"10.0.0.5:5001/", "http://10.0.0.5:5001", "http://10.0.0.5:8000", ""},
		{"http://[::1]:5000", "http://[::1]:5000", "http://[::1]:8000", ""},
		{"http://127.0.0.1:4000", "http://127.0.0.1:4000", "http://127.0.0.1:4000", "http://127.0.0.1:4000"},
		{"https://vm.example:443", "https://vm.example:443", "http://state.example:9000", "state.example:9000"},
	} {
		g, err := New(tc.in, Options{StateURL: tc.opt})
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if g.BaseURL() != tc.base || g.StateURL() != tc.state {
			t.Errorf("%s: base %s state %s, want %s %s", tc.in, g.BaseURL(), g.StateURL(), tc.base, tc.state)
		}
	}
	for _, bad := range []string{"", "ftp://x:1", "http://:5000", "http://h:1/?q=1"} {
		if _, err := New(bad, Options{}); err == nil {
			t.Errorf("New(%q) accepted", bad)
		}
	}
}

func TestDefaultsAreBounded(t *testing.T) {
	g, err := New("h", Options{})
	if err != nil {
		t.Fatal(err)
	}
	o := g.opts
	if o.ScreenshotTimeout != 10*time.Second || o.ExecuteTimeout != 130*time.Second ||
		o.AccessibilityTimeout != 30*time.Second || o.DefaultTimeout != 10*time.Second ||
		g.retries != 3 || o.RetryWait != 5*time.Second {
		t.Errorf("defaults: %+v retries %d", o, g.retries)
	}
	g, _ = New("h", Options{Retries: -1, RetryWait: -1})
	if g.retries != 0 || g.backoff(0) != 0 {
		t.Errorf("negative Retries/RetryWait: retries %d wait %v", g.retries, g.backoff(0))
	}
}

func TestBackoff(t *testing.T) {
	g, _ := New("h", Options{RetryWait: 100 * time.Millisecond, MaxRetryWait: 300 * time.Millisecond})
	for n, want := range []time.Duration{100, 200, 300, 300, 300} {
		want *= time.Millisecond
		for range 50 {
			d := g.backoff(n)
			if d < want/2 || d > want {
				t.Fatalf("backoff(%d) = %v, want in [%v, %v]", n, d, want/2, want)
			}
		}
	}
}

func TestRetriesIdempotentThenSucceeds(t *testing.T) {
	var calls atomic.Int32
	g, n := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/screenshot" || r.Method != "GET" {
			t.Errorf("%s %s", r.Method, r.URL.Path)
		}
		if calls.Add(1) < 3 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		_, _ = w.Write(tinyPNG)
	}, fast())
	png, err := g.Screenshot(context.Background())
	if err != nil || string(png) != string(tinyPNG) {
		t.Fatalf("Screenshot: %q, %v", png, err)
	}
	if n.Load() != 3 {
		t.Errorf("attempts = %d, want 3", n.Load())
	}
}

func TestRetriesAreBounded(t *testing.T) {
	g, n := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(500)
		_, _ = io.WriteString(w, `{"status":"error","message":"Xlib: display :0 gone"}`)
	}, fast())
	_, err := g.Platform(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 500 || he.Message != "Xlib: display :0 gone" || he.Op != "platform" {
		t.Fatalf("err = %#v", err)
	}
	if n.Load() != 3 {
		t.Errorf("attempts = %d, want 1 + 2 retries", n.Load())
	}
	if want := "vmpool: guest " + g.Host() + ": platform: HTTP 500: Xlib: display :0 gone"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
}

func TestClientErrorsAreNotRetried(t *testing.T) {
	g, n := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(404)
		_, _ = io.WriteString(w, "<html><title>404 Not Found</title></html>")
	}, fast())
	_, err := g.Accessibility(context.Background())
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 404 || !strings.Contains(he.Message, "404 Not Found") {
		t.Fatalf("err = %v", err)
	}
	if n.Load() != 1 {
		t.Errorf("attempts = %d, want 1", n.Load())
	}
}

func TestScreenshotNotPNG(t *testing.T) {
	g, n := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "GIF89a...")
	}, fast())
	_, err := g.Screenshot(context.Background())
	if !errors.Is(err, ErrNotPNG) {
		t.Fatalf("err = %v", err)
	}
	if n.Load() != 3 {
		t.Errorf("attempts = %d, want 3 (a bad payload is retried)", n.Load())
	}
}

func TestTimeoutIsNotRetried(t *testing.T) {
	opts := fast()
	opts.ScreenshotTimeout = 50 * time.Millisecond
	g, n := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		<-r.Context().Done() // a wedged guest
	}, opts)
	start := time.Now()
	_, err := g.Screenshot(context.Background())
	el := time.Since(start)
	var te *TimeoutError
	if !errors.As(err, &te) || !errors.Is(err, ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v", err)
	}
	if want := "vmpool: guest " + g.Host() + ": screenshot: no answer within 50ms"; err.Error() != want {
		t.Errorf("message %q, want %q", err, want)
	}
	if el > 3*time.Second || n.Load() != 1 {
		t.Errorf("took %v with %d attempts, want ~50ms and 1", el, n.Load())
	}
}

func TestCallerDeadlineAndCancel(t *testing.T) {
	g, _ := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		// The server notices a client that left only once the body is read.
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}, fast())
	ctx, cancel := context.WithTimeout(context.Background(), 40*time.Millisecond)
	defer cancel()
	_, err := g.Accessibility(ctx) // AccessibilityTimeout 30 s: the caller's deadline comes first
	var te *TimeoutError
	if !errors.As(err, &te) || te.Timeout > 40*time.Millisecond || te.Op != "accessibility" {
		t.Fatalf("err = %v", err)
	}

	// Cancelled once the request has reached the server: the call ends with
	// the caller's cancellation, not as a timeout of the guest.
	arrived := make(chan struct{})
	var once sync.Once
	g2, _ := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		_, _ = io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}, fast())
	ctx, cancel = context.WithCancel(context.Background())
	go func() { // owned: ends when the request arrives or the test's call returns
		<-arrived
		cancel()
	}()
	_, err = g2.Execute(ctx, ShellCommand("sleep 100"))
	cancel()
	select {
	case <-arrived:
	default:
		t.Fatalf("the call never reached the server: err = %v", err)
	}
	if !errors.Is(err, context.Canceled) || errors.Is(err, ErrTimeout) {
		t.Fatalf("canceled: err = %v", err)
	}
}

// A retry wait that would pass the caller's deadline ends the call with the
// last answer — and not as a timeout: no deadline expired, and the pool
// quarantines timed-out VMs at once.
func TestRetryWaitRespectsDeadline(t *testing.T) {
	opts := Options{Retries: 3, RetryWait: time.Hour, MaxRetryWait: time.Hour}
	g, n := newTestClient(t, func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(503) }, opts)
	// A call that waited for the deadline would end with DeadlineExceeded
	// (after a minute): the 503 itself says it gave up at once.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	_, err := g.Platform(ctx)
	var he *HTTPError
	if !errors.As(err, &he) || he.Status != 503 || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, ErrTimeout) {
		t.Fatalf("err = %v", err)
	}
	if n.Load() != 1 {
		t.Errorf("attempts = %d", n.Load())
	}
}

func TestExecute(t *testing.T) {
	var got []map[string]any
	g, n := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
			t.Error(err)
		}
		got = append(got, body)
		switch body["command"] {
		case "ls /nope":
			_, _ = io.WriteString(w, `{"status":"success","output":"","error":"ls: cannot access '/nope'\nNo such file or directory","returncode":2}`)
		case "boom":
			w.WriteHeader(500)
			_, _ = io.WriteString(w, `{"status":"error","message":"[Errno 2] No such file or directory: 'boom'"}`)
		default:
			_, _ = io.WriteString(w, `{"status":"success","output":"hi\n","error":"","returncode":0}`)
		}
	}, fast())
	ctx := context.Background()

	res, err := g.Execute(ctx, ShellCommand("echo hi"))
	if err != nil || res.Output != "hi\n" || res.ReturnCode != 0 {
		t.Fatalf("echo: %+v %v", res, err)
	}
	res, err = g.Execute(ctx, ShellCommand("ls /nope"))
	var ee *ExecError
	if !errors.As(err, &ee) || res.ReturnCode != 2 || ee.Result.ReturnCode != 2 ||
		!strings.HasSuffix(err.Error(), `execute "ls /nope": exit status 2: No such file or directory`) {
		t.Fatalf("ls: %+v %v", res, err)
	}
	before := n.Load()
	res, err = g.SetupExecute(ctx, Command{Line: "boom"})
	var he *HTTPError
	if !errors.As(err, &ee) || !errors.As(err, &he) || he.Status != 500 || res.Status != "error" || res.ReturnCode != -1 ||
		!strings.Contains(ee.Error(), "setup execute \"boom\": could not run: [Errno 2]") {
		t.Fatalf("boom: %+v %v", res, err)
	}
	if n.Load()-before != 1 {
		t.Errorf("execute was retried: %d attempts", n.Load()-before)
	}
	if _, err := g.ExecPyAutoGUI(ctx, "pyautogui.click(1, 2)"); err != nil {
		t.Fatal(err)
	}
	argv, _ := got[len(got)-1]["command"].([]any)
	if len(argv) != 3 || argv[0] != "python3" || argv[1] != "-c" ||
		argv[2] != "import pyautogui; import time; pyautogui.FAILSAFE = False; pyautogui.click(1, 2)" || got[len(got)-1]["shell"] != false {
		t.Errorf("ExecPyAutoGUI sent %v", got[len(got)-1])
	}
	for _, tok := range []string{"DONE", "WAIT", "FAIL", "ANS 42", " "} {
		if _, err := g.ExecPyAutoGUI(ctx, tok); err == nil {
			t.Errorf("ExecPyAutoGUI(%q) accepted", tok)
		}
	}
	if _, err := g.Execute(ctx, Command{}); err == nil {
		t.Error("empty command accepted")
	}
}

func TestExecuteRetriedOnlyWhenUnsent(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // connection refused from now on
	var dials atomic.Int32
	tr := &http.Transport{DialContext: func(ctx context.Context, network, a string) (net.Conn, error) {
		dials.Add(1)
		return (&net.Dialer{}).DialContext(ctx, network, a)
	}}
	opts := fast()
	opts.HTTPClient = &http.Client{Transport: tr}
	g, err := New(addr, opts)
	if err != nil {
		t.Fatal(err)
	}
	_, err = g.Execute(context.Background(), ShellCommand("true"))
	if err == nil || !strings.Contains(err.Error(), "connection refused") || !strings.HasPrefix(err.Error(), "vmpool: guest "+addr+": execute: ") {
		t.Fatalf("err = %v", err)
	}
	if dials.Load() != 3 {
		t.Errorf("dials = %d, want 3 (a refused connection proves the command never arrived)", dials.Load())
	}

	// A connection that dies after the request went out is not retried.
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		c, _, _ := http.NewResponseController(w).Hijack()
		c.Close()
	}))
	defer srv.Close()
	g, _ = New(srv.URL, fast())
	if _, err := g.Execute(context.Background(), ShellCommand("true")); err == nil || n.Load() != 1 {
		t.Fatalf("err %v after %d attempts, want an error after 1", err, n.Load())
	}
	n.Store(0)
	if _, err := g.Platform(context.Background()); err == nil || n.Load() != 3 {
		t.Fatalf("platform: err %v after %d attempts, want an error after 3", err, n.Load())
	}
}

func TestSmallCalls(t *testing.T) {
	g, _ := newTestClient(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.Method + " " + r.URL.Path {
		case "GET /platform":
			_, _ = io.WriteString(w, "Linux\n")
		case "POST /screen_size":
			w.WriteHeader(405)
		case "GET /screen_size":
			_, _ = io.WriteString(w, `{"width":1920,"height":1080}`)
		case "GET /cursor_position":
			_, _ = io.WriteString(w, `{"x":3,"y":4}`)
		case "GET /accessibility":
			_, _ = io.WriteString(w, `{"AT":"<desktop-frame/>"}`)
		case "POST /chimerax/run":
			b, _ := io.ReadAll(r.Body)
			if r.Header.Get("Content-Type") != "application/json" {
				t.Error("state POST without JSON content type")
			}
			_, _ = w.Write(b)
		case "POST /file":
			_ = r.ParseForm()
			_, _ = io.WriteString(w, "contents of "+r.PostForm.Get("file_path"))
		case "POST /setup/upload":
			if err := r.ParseMultipartForm(1 << 20); err != nil {
				t.Error(err)
			}
			f, _, err := r.FormFile("file_data")
			if err != nil {
				t.Error(err)
				return
			}
			b, _ := io.ReadAll(f)
			if r.FormValue("file_path") != "/home/user/a.txt" || string(b) != "abc" {
				t.Errorf("upload %q %q", r.FormValue("file_path"), b)
			}
		default:
			w.WriteHeader(404)
		}
	}, Options{StateURL: "", Retries: -1})
	ctx := context.Background()
	if p, err := g.Platform(ctx); p != "Linux" || err != nil {
		t.Errorf("Platform = %q, %v", p, err)
	}
	if w, h, err := g.ScreenSize(ctx); w != 1920 || h != 1080 || err != nil {
		t.Errorf("ScreenSize = %d×%d, %v", w, h, err)
	}
	if x, y, err := g.CursorPosition(ctx); x != 3 || y != 4 || err != nil {
		t.Errorf("CursorPosition = %d,%d, %v", x, y, err)
	}
	if at, err := g.Accessibility(ctx); at != "<desktop-frame/>" || err != nil {
		t.Errorf("Accessibility = %q, %v", at, err)
	}
	if b, err := g.Download(ctx, "~/x y.txt"); string(b) != "contents of ~/x y.txt" || err != nil {
		t.Errorf("Download = %q, %v", b, err)
	}
	if err := g.Upload(ctx, "/home/user/a.txt", []byte("abc")); err != nil {
		t.Error(err)
	}
	// The state server defaults to port 8000 of the same host.
	if !strings.HasSuffix(g.StateURL(), ":8000") {
		t.Errorf("StateURL = %s", g.StateURL())
	}
	g2, _ := New(g.BaseURL(), Options{StateURL: g.BaseURL()})
	if b, err := g2.Call(ctx, Request{Server: ServerApp, Method: "POST", Path: "/chimerax/run", Body: []byte(`{"command":"open 1abc"}`), ContentType: "application/json"}); string(b) != `{"command":"open 1abc"}` || err != nil {
		t.Errorf("Call POST = %q, %v", b, err)
	}
	if _, err := g2.Call(ctx, Request{Server: ServerApp, Method: "GET", Path: "vars"}); err == nil {
		t.Error("Call accepted a path without /")
	}
	if _, err := g2.Call(ctx, Request{Server: "db", Method: "GET", Path: "/vars"}); err == nil {
		t.Error("Call accepted an unknown server")
	}
}

func TestCommandJSON(t *testing.T) {
	for _, tc := range []struct {
		c    Command
		want string
	}{
		{ShellCommand("echo hi"), `{"command":"echo hi","shell":true}`},
		{ArgvCommand("python3", "-c", "print(1)"), `{"command":["python3","-c","print(1)"],"shell":false}`},
		{Command{Line: "chimerax --cmd 'open 1abc'"}, `{"command":"chimerax --cmd 'open 1abc'","shell":false}`},
	} {
		b, err := json.Marshal(tc.c)
		if err != nil || string(b) != tc.want {
			t.Errorf("%+v: %s %v, want %s", tc.c, b, err, tc.want)
		}
	}
	if s := ArgvCommand("echo", "a b", "it's").String(); s != `echo 'a b' 'it'\''s'` {
		t.Errorf("String = %s", s)
	}
	for _, bad := range []Command{{}, {Line: "x", Argv: []string{"x"}}, {Argv: []string{""}}} {
		if bad.Validate() == nil {
			t.Errorf("%+v validated", bad)
		}
	}
}
