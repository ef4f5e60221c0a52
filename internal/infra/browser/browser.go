// Package browser renders a local HTML page in headless Chromium, driven
// over the DevTools protocol (CDP) on a pipe, and reports what a person
// looking at the page would see: its full content height, the console
// errors and warnings, the uncaught exceptions, the resources that failed
// to load, the load time and, on request, a full-page PNG.
//
// Chromium is started with --remote-debugging-pipe: it reads CDP messages,
// each a JSON object terminated by a NUL byte, from its file descriptor 3
// and writes the responses and events, framed the same way, to its file
// descriptor 4. Each Render starts its own Chromium with a fresh temporary
// profile and stops it before it returns; nothing is reached over the
// network (the flags turn Chromium's own background traffic off).
//
// Only the standard library is used.
package browser

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/infra/syncio"
)

// Options says how Render renders a page. The zero value is usable.
type Options struct {
	// Binary is the Chromium executable (a path, or a name looked up in
	// PATH). Empty means the environment variable CODAPIPE_CHROMIUM, else
	// /usr/bin/chromium.
	Binary string
	// Width is the viewport width in CSS pixels; 0 means 1280.
	Width int
	// Height is the initial viewport height in CSS pixels; 0 means 800.
	// The screenshot covers the whole page whatever its height.
	Height int
	// Eval is an optional JavaScript expression evaluated in the page
	// after it has loaded (Runtime.evaluate with returnByValue and
	// awaitPromise: a promise is awaited). Its value, as JSON, is
	// Result.Eval; an exception it throws is Render's error.
	Eval string
	// Screenshot asks for a full-page PNG in Result.PNG.
	Screenshot bool

	// started, when set (by the tests), is called with the process id and
	// the temporary profile folder once Chromium has started.
	started func(pid int, profile string)
}

// Result is what Render saw of a page.
type Result struct {
	// Height is the page's full content height in CSS pixels after load
	// (and after Eval): Page.getLayoutMetrics' cssContentSize, never less
	// than the viewport height.
	Height int
	// Width is the page's full content width in CSS pixels: the viewport
	// width unless the page overflows it sideways.
	Width int
	// Console holds the console messages of level error and warning
	// (console.error, console.warn, console.assert and the browser's own
	// log entries), each as "error: text" or "warning: text".
	Console []string
	// Exceptions holds the uncaught exceptions (and unhandled promise
	// rejections), each as "Uncaught Error: text (url:line:column)".
	Exceptions []string
	// FailedLoads holds the resources that failed to load (a missing
	// file, a broken data: URI, ...), each as "url: net::ERR_…".
	FailedLoads []string
	// Load is the time from Page.navigate to the page's load event.
	Load time.Duration
	// Eval is the JSON value of Options.Eval: null when it is empty or
	// its value is undefined; NaN, ±Infinity, -0 and BigInt values, which
	// JSON cannot hold, as their JavaScript text in a JSON string.
	Eval json.RawMessage
	// PNG is the full page (Width × Height pixels, device scale factor
	// 1) when Options.Screenshot is set.
	PNG []byte
	// Version is the browser's product, for example "Chrome/156.0.8078.73".
	Version string
}

// RequireEnv is the environment variable that makes a missing Chromium
// a test failure rather than a skip ("1"; make test sets it).
const RequireEnv = "CODAPIPE_REQUIRE_CHROMIUM"

// ErrNoChromium is the error (wrapped) of Find and Render when there is no
// Chromium executable.
var ErrNoChromium = errors.New("chromium not found (set CODAPIPE_CHROMIUM to its path, or install Debian's chromium: make chromium)")

// defaultBinary is the Chromium executable used when neither
// Options.Binary nor CODAPIPE_CHROMIUM names one (Debian's chromium).
const defaultBinary = "/usr/bin/chromium"

// envBinary is the environment variable that names the Chromium executable
// when Options.Binary is empty.
const envBinary = "CODAPIPE_CHROMIUM"

// Find resolves the Chromium executable as Options.Binary says: binary
// itself when it is not empty, else $CODAPIPE_CHROMIUM, else
// /usr/bin/chromium; a name without a slash is looked up in PATH. A
// missing or non-executable file is an error wrapping ErrNoChromium.
func Find(binary string) (string, error) {
	if binary == "" {
		binary = os.Getenv(envBinary)
	}
	if binary == "" {
		binary = defaultBinary
	}
	p, err := exec.LookPath(binary)
	if err != nil {
		return "", fmt.Errorf("browser: %w: %w", ErrNoChromium, err)
	}
	return p, nil
}

// Defaults of Options.
const (
	defaultWidth  = 1280
	defaultHeight = 800
)

// closeTimeout bounds the graceful shutdown (Browser.close, then the
// process's exit) before Chromium is killed.
const closeTimeout = 5 * time.Second

// waitDelay bounds the wait for Chromium's output pipes once the process
// has exited (its child processes hold them open until they notice).
const waitDelay = 2 * time.Second

// Limits on what a page can make Render keep.
const (
	maxMessages  = 1000     // entries per list of Result
	maxText      = 2000     // bytes per entry
	stderrTail   = 16 << 10 // bytes of Chromium's output kept
	stderrInErrs = 2000     // bytes of it put into an error
)

// Render opens the local HTML file path (made absolute, as a file:// URL)
// in a new headless Chromium with a viewport of o.Width × o.Height CSS
// pixels, waits for its load event, evaluates o.Eval, measures the page
// and takes the screenshot, then closes Chromium. Every wait ends when ctx
// does: Render then returns an error wrapping ctx's error, after killing
// Chromium and waiting for it. Chromium is stopped and its temporary
// profile removed on every path.
//
// Console errors, exceptions and failed loads are not errors of Render:
// they are in the Result, for the caller to judge.
func Render(ctx context.Context, path string, o Options) (*Result, error) {
	bin, err := Find(o.Binary)
	if err != nil {
		return nil, err
	}
	if o.Width == 0 {
		o.Width = defaultWidth
	}
	if o.Height == 0 {
		o.Height = defaultHeight
	}
	if o.Width < 0 || o.Height < 0 {
		return nil, fmt.Errorf("browser: render %s: negative viewport %dx%d", path, o.Width, o.Height)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("browser: render %s: %w", path, err)
	}
	if fi, err := os.Stat(abs); err != nil {
		return nil, fmt.Errorf("browser: render: %w", err) // names the path
	} else if fi.IsDir() {
		return nil, fmt.Errorf("browser: render %s: is a directory", path)
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("browser: render %s: %w", path, err)
	}
	pageURL := (&url.URL{Scheme: "file", Path: filepath.ToSlash(abs)}).String()

	b, err := launch(ctx, bin, o)
	if err != nil {
		return nil, err
	}
	res, err := b.render(ctx, path, pageURL, o)
	if cerr := b.shutdown(ctx); err == nil && cerr != nil {
		return nil, cerr
	}
	if err != nil {
		return nil, err
	}
	return res, nil
}

// browser is one running Chromium and its CDP connection.
type browser struct {
	cmd     *exec.Cmd
	profile string
	out     *syncio.Ring // Chromium's stdout and stderr, the tail

	exited  chan struct{} // closed when cmd.Wait has returned
	waitErr error         // cmd.Wait's error, set before exited is closed
	stopCtx func() bool   // stops the kill on ctx end

	w   *os.File // our end of Chromium's fd 3
	r   *os.File // our end of Chromium's fd 4
	wmu sync.Mutex

	readerDone chan struct{} // closed when the reader goroutine has returned
	readErr    error         // why it returned, set before readerDone is closed

	mu      sync.Mutex
	nextID  int64
	pending map[int64]chan *message
	page    *pageState // the events of the page session; nil before attach
}

// message is one CDP message: a command, a response or an event.
type message struct {
	ID        int64           `json:"id,omitempty"`
	Method    string          `json:"method,omitempty"`
	Params    json.RawMessage `json:"params,omitempty"`
	SessionID string          `json:"sessionId,omitempty"`
	Result    json.RawMessage `json:"result,omitempty"`
	Error     *protoError     `json:"error,omitempty"`
}

// protoError is the "error" object of a response.
type protoError struct {
	Code    int64  `json:"code"`
	Message string `json:"message"`
	Data    string `json:"data,omitempty"`
}

func (e *protoError) Error() string {
	s := fmt.Sprintf("%s (code %d)", e.Message, e.Code)
	if e.Data != "" {
		s += ": " + e.Data
	}
	return s
}

// launch starts Chromium with a fresh profile and the pipe, and the
// goroutines that wait for it and read from it. On error nothing is left
// running and the profile is removed.
func launch(ctx context.Context, bin string, o Options) (_ *browser, err error) {
	profile, err := os.MkdirTemp("", "codapipe-chromium-")
	if err != nil {
		return nil, fmt.Errorf("browser: profile: %w", err)
	}
	var toClose []*os.File
	defer func() {
		for _, f := range toClose {
			f.Close()
		}
		if err != nil {
			os.RemoveAll(profile)
		}
	}()
	// Chromium reads commands from fd 3 (cmdR) and writes to fd 4 (evW).
	cmdR, cmdW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("browser: pipe: %w", err)
	}
	toClose = append(toClose, cmdR, cmdW)
	evR, evW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("browser: pipe: %w", err)
	}
	toClose = append(toClose, evR, evW)

	cmd := exec.Command(bin,
		"--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-extensions", "--hide-scrollbars", "--mute-audio",
		"--user-data-dir="+profile, "--remote-debugging-pipe", "about:blank")
	cmd.ExtraFiles = []*os.File{cmdR, evW}
	out := &syncio.Ring{Max: stderrTail}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = waitDelay
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("browser: start %s: %w", bin, err)
	}
	// Chromium has its ends: close ours of them, so that reading evR ends
	// when Chromium (and every process it passed fd 4 to) is gone.
	cmdR.Close()
	evW.Close()
	toClose = nil

	b := &browser{
		cmd:        cmd,
		profile:    profile,
		out:        out,
		exited:     make(chan struct{}),
		w:          cmdW,
		r:          evR,
		readerDone: make(chan struct{}),
		pending:    map[int64]chan *message{},
	}
	go func() {
		b.waitErr = cmd.Wait()
		close(b.exited)
	}()
	// Kill Chromium as soon as ctx ends: that also unblocks a write to
	// its pipe that Chromium does not read.
	b.stopCtx = context.AfterFunc(ctx, b.kill)
	go b.read()
	if o.started != nil {
		o.started(cmd.Process.Pid, profile)
	}
	return b, nil
}

// kill kills Chromium (its child processes exit when it is gone).
func (b *browser) kill() {
	b.cmd.Process.Kill() // an error means it has exited already
}

// shutdown stops Chromium (Browser.close, else kill; then the wait),
// stops the reader and removes the profile. It returns only the failure to
// remove the profile.
func (b *browser) shutdown(ctx context.Context) error {
	b.stopCtx()
	if ctx.Err() == nil && !b.hasExited() {
		cctx, cancel := context.WithTimeout(ctx, closeTimeout)
		if _, err := b.call(cctx, "", "Browser.close", nil); err == nil {
			select {
			case <-b.exited:
			case <-cctx.Done():
			}
		}
		cancel()
	}
	b.kill()
	// Closing our write end is, for Chromium, the end of the session too.
	b.w.Close()
	// A killed process is reaped at once; cmd.Wait's copying of the
	// output is bounded by WaitDelay.
	<-b.exited
	b.r.Close() // ends the reader if a child process still holds fd 4
	<-b.readerDone
	if err := os.RemoveAll(b.profile); err != nil {
		return fmt.Errorf("browser: remove profile: %w", err)
	}
	return nil
}

func (b *browser) hasExited() bool {
	select {
	case <-b.exited:
		return true
	default:
		return false
	}
}

// read is the reader goroutine: it reads the messages Chromium writes to
// fd 4 until the pipe ends or is closed, hands each response to the call
// that waits for it and each event of the page session to the page state.
func (b *browser) read() {
	defer close(b.readerDone)
	br := bufio.NewReaderSize(b.r, 64<<10)
	for {
		raw, err := br.ReadBytes(0)
		if err != nil {
			if errors.Is(err, io.EOF) || errors.Is(err, os.ErrClosed) {
				err = io.EOF
			}
			b.readErr = err
			return
		}
		var m message
		if err := json.Unmarshal(raw[:len(raw)-1], &m); err != nil {
			continue // not CDP: nothing waits for it
		}
		switch {
		case m.ID != 0:
			b.mu.Lock()
			ch := b.pending[m.ID]
			delete(b.pending, m.ID)
			b.mu.Unlock()
			if ch != nil {
				ch <- &m // buffered: never blocks
			}
		case m.Method != "":
			b.mu.Lock()
			p := b.page
			b.mu.Unlock()
			if p != nil && m.SessionID == p.session {
				p.event(m.Method, m.Params)
			}
		}
	}
}

// call sends the command method with params (nil: none) to the session
// sessionID ("" is the browser itself) and waits for its response: the
// result, or an error naming the method for an "error" response, the end
// of ctx or Chromium's exit.
func (b *browser) call(ctx context.Context, sessionID, method string, params any) (json.RawMessage, error) {
	ch := make(chan *message, 1)
	b.mu.Lock()
	b.nextID++
	id := b.nextID
	b.pending[id] = ch
	b.mu.Unlock()
	forget := func() {
		b.mu.Lock()
		delete(b.pending, id)
		b.mu.Unlock()
	}
	var p json.RawMessage
	if params != nil {
		var err error
		if p, err = json.Marshal(params); err != nil {
			forget()
			return nil, fmt.Errorf("%s: %w", method, err)
		}
	}
	msg, err := json.Marshal(message{ID: id, Method: method, Params: p, SessionID: sessionID})
	if err != nil {
		forget()
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	if err := ctx.Err(); err != nil {
		forget()
		return nil, fmt.Errorf("%s: %w", method, err)
	}
	b.wmu.Lock()
	_, err = b.w.Write(append(msg, 0))
	b.wmu.Unlock()
	if err != nil {
		forget()
		if cerr := ctx.Err(); cerr != nil {
			return nil, fmt.Errorf("%s: %w", method, cerr)
		}
		return nil, fmt.Errorf("%s: %w", method, b.deadErr(ctx, err))
	}
	select {
	case r := <-ch:
		if r.Error != nil {
			return nil, fmt.Errorf("%s: %w", method, r.Error)
		}
		return r.Result, nil
	case <-ctx.Done():
		forget()
		return nil, fmt.Errorf("%s: %w", method, ctx.Err())
	case <-b.readerDone:
		forget()
		return nil, fmt.Errorf("%s: %w", method, b.deadErr(ctx, b.readErr))
	}
}

// deadErr is the error for a pipe that broke (cause): Chromium's exit
// status and the tail of its output, once it has exited (waiting for that
// as long as ctx and closeTimeout allow).
func (b *browser) deadErr(ctx context.Context, cause error) error {
	t := time.NewTimer(closeTimeout)
	defer t.Stop()
	select {
	case <-b.exited:
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return fmt.Errorf("chromium closed the pipe (%v) but has not exited", cause)
	}
	status := "exit status 0"
	if b.waitErr != nil {
		status = b.waitErr.Error()
	}
	tail := b.out.Tail(stderrInErrs)
	if tail == "" {
		tail = "(no output)"
	}
	return fmt.Errorf("chromium exited early (%s); its output ends:\n%s", status, tail)
}

// decode calls method and decodes its result into v.
func (b *browser) decode(ctx context.Context, sessionID, method string, params, v any) error {
	raw, err := b.call(ctx, sessionID, method, params)
	if err != nil {
		return err
	}
	if v == nil {
		return nil
	}
	if err := json.Unmarshal(raw, v); err != nil {
		return fmt.Errorf("%s: decode result: %w", method, err)
	}
	return nil
}

// render does the CDP steps of Render on a started browser.
func (b *browser) render(ctx context.Context, path, pageURL string, o Options) (*Result, error) {
	res := &Result{}
	var ver struct {
		Product string `json:"product"`
	}
	if err := b.decode(ctx, "", "Browser.getVersion", nil, &ver); err != nil {
		return nil, fmt.Errorf("browser: start: %w", err)
	}
	res.Version = ver.Product

	session, err := b.attach(ctx)
	if err != nil {
		return nil, fmt.Errorf("browser: attach: %w", err)
	}
	page := newPageState(session)
	b.mu.Lock()
	b.page = page
	b.mu.Unlock()
	for _, m := range []string{"Page.enable", "Runtime.enable", "Log.enable", "Network.enable"} {
		if _, err := b.call(ctx, session, m, nil); err != nil {
			return nil, fmt.Errorf("browser: setup: %w", err)
		}
	}
	metrics := map[string]any{"width": o.Width, "height": o.Height, "deviceScaleFactor": 1, "mobile": false}
	if _, err := b.call(ctx, session, "Emulation.setDeviceMetricsOverride", metrics); err != nil {
		return nil, fmt.Errorf("browser: setup: %w", err)
	}

	var nav struct {
		FrameID   string `json:"frameId"`
		LoaderID  string `json:"loaderId"`
		ErrorText string `json:"errorText"`
	}
	page.mu.Lock()
	commitsBefore := len(page.commits)
	page.mu.Unlock()
	start := time.Now()
	if err := b.decode(ctx, session, "Page.navigate", map[string]any{"url": pageURL}, &nav); err != nil {
		return nil, fmt.Errorf("browser: navigate %s: %w", path, err)
	}
	if nav.ErrorText != "" {
		return nil, fmt.Errorf("browser: navigate %s: %s", path, nav.ErrorText)
	}
	loaded, err := b.waitLoad(ctx, page, nav.LoaderID, commitsBefore)
	if err != nil {
		return nil, fmt.Errorf("browser: navigate %s: %w", path, err)
	}
	res.Load = loaded.Sub(start)

	res.Eval = json.RawMessage("null")
	if o.Eval != "" {
		if res.Eval, err = b.eval(ctx, session, o.Eval); err != nil {
			return nil, fmt.Errorf("browser: eval in %s: %w", path, err)
		}
	}
	if res.Width, res.Height, err = b.size(ctx, session); err != nil {
		return nil, fmt.Errorf("browser: measure %s: %w", path, err)
	}
	if o.Screenshot {
		var shot struct {
			Data []byte `json:"data"` // base64 in JSON
		}
		params := map[string]any{
			"format":                "png",
			"captureBeyondViewport": true,
			"clip":                  map[string]any{"x": 0, "y": 0, "width": res.Width, "height": res.Height, "scale": 1},
		}
		if err := b.decode(ctx, session, "Page.captureScreenshot", params, &shot); err != nil {
			return nil, fmt.Errorf("browser: screenshot %s: %w", path, err)
		}
		if len(shot.Data) == 0 {
			return nil, fmt.Errorf("browser: screenshot %s: empty image", path)
		}
		res.PNG = shot.Data
	}
	page.results(res)
	return res, nil
}

// attach finds the page target Chromium opened (about:blank), or creates
// one, and attaches to it in flat mode: the session id of its commands.
func (b *browser) attach(ctx context.Context) (string, error) {
	var targets struct {
		TargetInfos []struct {
			TargetID string `json:"targetId"`
			Type     string `json:"type"`
			URL      string `json:"url"`
		} `json:"targetInfos"`
	}
	if err := b.decode(ctx, "", "Target.getTargets", nil, &targets); err != nil {
		return "", err
	}
	// Besides the page, headless Chromium lists "browser_ui" targets of
	// its own (the omnibox popup): take the page, about:blank first.
	targetID := ""
	for _, t := range targets.TargetInfos {
		if t.Type == "page" && (targetID == "" || t.URL == "about:blank") {
			targetID = t.TargetID
		}
	}
	if targetID == "" {
		var created struct {
			TargetID string `json:"targetId"`
		}
		if err := b.decode(ctx, "", "Target.createTarget", map[string]any{"url": "about:blank"}, &created); err != nil {
			return "", err
		}
		targetID = created.TargetID
	}
	var att struct {
		SessionID string `json:"sessionId"`
	}
	if err := b.decode(ctx, "", "Target.attachToTarget", map[string]any{"targetId": targetID, "flatten": true}, &att); err != nil {
		return "", err
	}
	if att.SessionID == "" {
		return "", errors.New("Target.attachToTarget: no sessionId")
	}
	return att.SessionID, nil
}

// waitLoad waits for the load event of the document Page.navigate started
// (loaderID; "" means the first main-frame commit after commitsBefore) and
// returns when it came.
func (b *browser) waitLoad(ctx context.Context, page *pageState, loaderID string, commitsBefore int) (time.Time, error) {
	for {
		if t, ok := page.loadedAt(loaderID, commitsBefore); ok {
			return t, nil
		}
		select {
		case <-page.changed:
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("waiting for the load event: %w", ctx.Err())
		case <-b.readerDone:
			return time.Time{}, fmt.Errorf("waiting for the load event: %w", b.deadErr(ctx, b.readErr))
		}
	}
}

// remoteObject is a Runtime.RemoteObject.
type remoteObject struct {
	Type                string          `json:"type"`
	Subtype             string          `json:"subtype,omitempty"`
	Value               json.RawMessage `json:"value,omitempty"`
	UnserializableValue string          `json:"unserializableValue,omitempty"`
	Description         string          `json:"description,omitempty"`
	Preview             *objectPreview  `json:"preview,omitempty"`
}

// objectPreview is a Runtime.ObjectPreview: the first properties of an
// object a console message was given.
type objectPreview struct {
	Subtype    string `json:"subtype,omitempty"`
	Overflow   bool   `json:"overflow"`
	Properties []struct {
		Name  string `json:"name"`
		Type  string `json:"type"`
		Value string `json:"value"`
	} `json:"properties"`
}

// String is the preview as the console shows it: {a: 1, b: 'x'} or [1, 2].
func (p *objectPreview) String() string {
	var parts []string
	for _, pr := range p.Properties {
		v := pr.Value
		if pr.Type == "string" {
			v = strconv.Quote(v)
		}
		if p.Subtype == "array" {
			parts = append(parts, v)
		} else {
			parts = append(parts, pr.Name+": "+v)
		}
	}
	if p.Overflow {
		parts = append(parts, "…")
	}
	if p.Subtype == "array" {
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// exceptionDetails is a Runtime.ExceptionDetails.
type exceptionDetails struct {
	Text         string        `json:"text"`
	LineNumber   int           `json:"lineNumber"`
	ColumnNumber int           `json:"columnNumber"`
	URL          string        `json:"url"`
	Exception    *remoteObject `json:"exception,omitempty"`
}

// String is the exception as Result.Exceptions holds it: "Uncaught
// Error: text (url:line:column)", line and column counted from 1.
func (e *exceptionDetails) String() string {
	s := e.Text
	if e.Exception != nil {
		d := e.Exception.Description
		if d == "" {
			d = e.Exception.text()
		}
		d, _, _ = strings.Cut(d, "\n") // the stack follows
		if d != "" && !strings.Contains(s, d) {
			s += " " + d
		}
	}
	if e.URL == "" {
		return fmt.Sprintf("%s (line %d, column %d)", s, e.LineNumber+1, e.ColumnNumber+1)
	}
	return fmt.Sprintf("%s (%s:%d:%d)", s, e.URL, e.LineNumber+1, e.ColumnNumber+1)
}

// text is the object as console.log prints it, about.
func (r *remoteObject) text() string {
	switch {
	case r.Type == "string":
		var s string
		if json.Unmarshal(r.Value, &s) == nil {
			return s
		}
	case r.UnserializableValue != "":
		return r.UnserializableValue
	case r.Type == "undefined":
		return "undefined"
	case len(r.Value) > 0 && r.Type != "object" && r.Type != "function":
		return string(r.Value)
	case r.Type == "object" && r.Preview != nil && (r.Subtype == "" || r.Subtype == "array"):
		return r.Preview.String()
	case r.Description != "":
		return r.Description
	case len(r.Value) > 0:
		return string(r.Value)
	}
	return r.Type
}

// eval evaluates expr in the page and returns its value as JSON.
func (b *browser) eval(ctx context.Context, session, expr string) (json.RawMessage, error) {
	var ev struct {
		Result           remoteObject      `json:"result"`
		ExceptionDetails *exceptionDetails `json:"exceptionDetails"`
	}
	params := map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}
	if err := b.decode(ctx, session, "Runtime.evaluate", params, &ev); err != nil {
		return nil, err
	}
	if ev.ExceptionDetails != nil {
		return nil, errors.New(ev.ExceptionDetails.String())
	}
	switch {
	case ev.Result.UnserializableValue != "":
		return json.Marshal(ev.Result.UnserializableValue)
	case len(ev.Result.Value) > 0:
		return ev.Result.Value, nil
	}
	return json.RawMessage("null"), nil // undefined
}

// size is the page's full content size in CSS pixels.
func (b *browser) size(ctx context.Context, session string) (width, height int, err error) {
	type rect struct {
		Width  float64 `json:"width"`
		Height float64 `json:"height"`
	}
	var lm struct {
		CSSContentSize *rect `json:"cssContentSize"`
	}
	if err := b.decode(ctx, session, "Page.getLayoutMetrics", nil, &lm); err != nil {
		return 0, 0, err
	}
	if c := lm.CSSContentSize; c != nil && c.Width > 0 && c.Height > 0 {
		return int(math.Ceil(c.Width)), int(math.Ceil(c.Height)), nil
	}
	// Older Chromium: ask the document.
	raw, err := b.eval(ctx, session, "[document.documentElement.scrollWidth, document.documentElement.scrollHeight]")
	if err != nil {
		return 0, 0, err
	}
	var wh [2]int
	if err := json.Unmarshal(raw, &wh); err != nil || wh[0] <= 0 || wh[1] <= 0 {
		return 0, 0, fmt.Errorf("no content size (%s)", raw)
	}
	return wh[0], wh[1], nil
}

// pageState is what the reader goroutine records of the page session's
// events.
type pageState struct {
	session string
	changed chan struct{} // capacity 1: a main-frame commit or a load event came

	mu         sync.Mutex
	commits    []string // loader ids of the main frame's commits, in order
	loads      []load
	console    list
	exceptions list
	failed     list
	requests   map[string]string // request id → URL
	failedReqs map[string]bool   // request ids in failed
}

// load is one Page.loadEventFired: when it came and how many main-frame
// commits had come before it.
type load struct {
	at      time.Time
	commits int
}

// list is a bounded list of messages.
type list struct {
	items   []string
	dropped int
}

func (l *list) add(s string) {
	if len(l.items) >= maxMessages {
		l.dropped++
		return
	}
	if len(s) > maxText {
		s = s[:maxText] + "…"
	}
	l.items = append(l.items, s)
}

func (l *list) get() []string {
	out := append(make([]string, 0, len(l.items)+1), l.items...)
	if l.dropped > 0 {
		out = append(out, fmt.Sprintf("… and %d more", l.dropped))
	}
	return out
}

func newPageState(session string) *pageState {
	return &pageState{
		session:    session,
		changed:    make(chan struct{}, 1),
		requests:   map[string]string{},
		failedReqs: map[string]bool{},
	}
}

func (p *pageState) poke() {
	select {
	case p.changed <- struct{}{}:
	default:
	}
}

// loadedAt reports when the load event of the document of loaderID (or,
// for "", of the first main-frame commit after commitsBefore) came.
func (p *pageState) loadedAt(loaderID string, commitsBefore int) (time.Time, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	commit := -1
	for i := commitsBefore; i < len(p.commits); i++ {
		if loaderID == "" || p.commits[i] == loaderID {
			commit = i
			break
		}
	}
	if commit < 0 {
		return time.Time{}, false
	}
	for _, l := range p.loads {
		if l.commits > commit {
			return l.at, true
		}
	}
	return time.Time{}, false
}

// results copies the messages into res.
func (p *pageState) results(res *Result) {
	p.mu.Lock()
	defer p.mu.Unlock()
	res.Console = p.console.get()
	res.Exceptions = p.exceptions.get()
	res.FailedLoads = p.failed.get()
}

// event records one event of the page session (in the reader goroutine).
func (p *pageState) event(method string, params json.RawMessage) {
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	switch method {
	case "Page.frameNavigated":
		var ev struct {
			Frame struct {
				ParentID string `json:"parentId"`
				LoaderID string `json:"loaderId"`
			} `json:"frame"`
		}
		if json.Unmarshal(params, &ev) == nil && ev.Frame.ParentID == "" {
			p.commits = append(p.commits, ev.Frame.LoaderID)
			p.poke()
		}
	case "Page.loadEventFired":
		p.loads = append(p.loads, load{at: now, commits: len(p.commits)})
		p.poke()
	case "Runtime.consoleAPICalled":
		var ev struct {
			Type string         `json:"type"`
			Args []remoteObject `json:"args"`
		}
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		level := ev.Type
		switch ev.Type {
		case "error", "warning":
		case "assert":
			level = "error"
		default:
			return
		}
		texts := make([]string, len(ev.Args))
		for i := range ev.Args {
			texts[i] = ev.Args[i].text()
		}
		if ev.Type == "assert" {
			texts = append([]string{"Assertion failed:"}, texts...)
		}
		p.console.add(level + ": " + strings.Join(texts, " "))
	case "Runtime.exceptionThrown":
		var ev struct {
			ExceptionDetails exceptionDetails `json:"exceptionDetails"`
		}
		if json.Unmarshal(params, &ev) == nil {
			p.exceptions.add(ev.ExceptionDetails.String())
		}
	case "Log.entryAdded":
		var ev struct {
			Entry struct {
				Source           string `json:"source"`
				Level            string `json:"level"`
				Text             string `json:"text"`
				URL              string `json:"url"`
				LineNumber       *int   `json:"lineNumber"`
				NetworkRequestID string `json:"networkRequestId"`
			} `json:"entry"`
		}
		if json.Unmarshal(params, &ev) != nil {
			return
		}
		e := ev.Entry
		if e.Level != "error" && e.Level != "warning" {
			return
		}
		if e.Source == "network" {
			// The log's line for a failed request: Network.loadingFailed
			// says it too, with the reason; keep one of the two.
			if e.NetworkRequestID != "" && p.failedReqs[e.NetworkRequestID] {
				return
			}
			if e.NetworkRequestID != "" {
				p.failedReqs[e.NetworkRequestID] = true
			}
			p.failed.add(e.URL + ": " + e.Text)
			return
		}
		s := e.Level + ": " + e.Text
		if e.URL != "" {
			s += " (" + e.URL
			if e.LineNumber != nil {
				s += fmt.Sprintf(":%d", *e.LineNumber+1)
			}
			s += ")"
		}
		p.console.add(s)
	case "Network.requestWillBeSent":
		var ev struct {
			RequestID string `json:"requestId"`
			Request   struct {
				URL string `json:"url"`
			} `json:"request"`
		}
		if json.Unmarshal(params, &ev) == nil {
			p.requests[ev.RequestID] = ev.Request.URL
		}
	case "Network.loadingFailed":
		var ev struct {
			RequestID string `json:"requestId"`
			ErrorText string `json:"errorText"`
			Canceled  bool   `json:"canceled"`
		}
		if json.Unmarshal(params, &ev) != nil || ev.Canceled {
			return
		}
		u := p.requests[ev.RequestID]
		if u == "" {
			u = "request " + ev.RequestID
		}
		if p.failedReqs[ev.RequestID] {
			// The log's line came first: replace it with this one.
			p.failed.replace(u+": ", u+": "+ev.ErrorText)
			return
		}
		p.failedReqs[ev.RequestID] = true
		p.failed.add(u + ": " + ev.ErrorText)
	}
}

// replace replaces the first item that starts with prefix by s.
func (l *list) replace(prefix, s string) {
	for i, it := range l.items {
		if strings.HasPrefix(it, prefix) {
			l.items[i] = s
			return
		}
	}
}
