package vmpool

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"mime/multipart"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Defaults of GuestOptions. The retry and screenshot values are those of
// the OSWorld/ScienceBoard Python clients (3 retries 5 s apart, 10 s for a
// screenshot); ExecuteTimeout sits above the guest's own 120 s limit so the
// guest's timeout answer arrives before ours fires.
const (
	DefaultGuestPort            = 5000
	DefaultStatePort            = 8000
	DefaultScreenshotTimeout    = 10 * time.Second
	DefaultExecuteTimeout       = 130 * time.Second
	DefaultAccessibilityTimeout = 30 * time.Second
	DefaultStateTimeout         = 30 * time.Second
	DefaultFileTimeout          = 60 * time.Second
	DefaultCallTimeout          = 10 * time.Second
	DefaultRetries              = 3
	DefaultRetryWait            = 5 * time.Second
	DefaultMaxRetryWait         = 30 * time.Second
	DefaultMaxBodyBytes         = 256 << 20
	DefaultPython               = "python3"
)

// PyAutoGUIPrefix is what ExecPyAutoGUI puts before the code, as the
// OSWorld Python controller does.
const PyAutoGUIPrefix = "import pyautogui; import time; pyautogui.FAILSAFE = False; "

// GuestOptions configure a Guest. The zero value is the defaults.
type GuestOptions struct {
	// StateURL is the base URL of the app-state server (Celestia /dump,
	// KAlgebra /vars, GRASS /dump, ChimeraX /chimerax/run, /lean/check,
	// /tex/check). Default: the guest's host on port 8000, where
	// ScienceBoard puts it. The simulator serves these paths on the guest
	// port itself: pass the guest URL.
	StateURL string
	// HTTPClient sends the requests. Default: a client of its own with a
	// 5 s dial timeout. Its Timeout, if any, applies on top of ours.
	HTTPClient *http.Client

	// Per-call timeouts; zero or negative means the default. A call never
	// waits without a bound. Each attempt of a call gets the full timeout;
	// the caller's context bounds the whole call.
	ScreenshotTimeout    time.Duration // GET /screenshot; default 10 s
	ExecuteTimeout       time.Duration // /execute, /setup/execute; default 130 s
	AccessibilityTimeout time.Duration // GET /accessibility; default 30 s
	StateTimeout         time.Duration // app-state server calls; default 30 s
	FileTimeout          time.Duration // /file, /setup/upload; default 60 s
	DefaultTimeout       time.Duration // everything else; default 10 s

	// Retries is the number of retries after the first attempt of an
	// idempotent call that failed with a transport error, a 5xx answer or
	// a malformed payload (0: DefaultRetries; negative: no retries). A call
	// that timed out is not retried: a guest that does not answer is
	// wedged far more often than slow, and the pool, not the client,
	// decides what to do with it.
	Retries int
	// RetryWait is the wait before the first retry (0: DefaultRetryWait;
	// negative: no wait). It doubles with each retry up to MaxRetryWait
	// (0: DefaultMaxRetryWait), and each wait is drawn uniformly from its
	// upper half (jitter), so many clients do not retry in step.
	RetryWait    time.Duration
	MaxRetryWait time.Duration

	// Python is the interpreter ExecPyAutoGUI runs (default "python3").
	Python string
	// MaxBodyBytes caps the size of an answer (default 256 MiB).
	MaxBodyBytes int64
}

// Guest is a client of one guest server. It is safe for concurrent use.
type Guest struct {
	base    *url.URL // guest server, no trailing slash
	state   *url.URL // app-state server
	client  *http.Client
	opts    GuestOptions // defaults filled in
	retries int
}

// NewGuest returns a client of the guest server at baseURL
// ("http://10.0.0.5:5000"; a bare "host" or "host:port" means http, port
// 5000 by default).
func NewGuest(baseURL string, opts GuestOptions) (*Guest, error) {
	base, err := parseBase(baseURL, DefaultGuestPort)
	if err != nil {
		return nil, fmt.Errorf("vmpool: guest URL: %w", err)
	}
	var state *url.URL
	if opts.StateURL != "" {
		if state, err = parseBase(opts.StateURL, DefaultStatePort); err != nil {
			return nil, fmt.Errorf("vmpool: state URL: %w", err)
		}
	} else {
		s := *base
		s.Host = net.JoinHostPort(base.Hostname(), strconv.Itoa(DefaultStatePort))
		state = &s
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.ScreenshotTimeout, DefaultScreenshotTimeout)
	def(&opts.ExecuteTimeout, DefaultExecuteTimeout)
	def(&opts.AccessibilityTimeout, DefaultAccessibilityTimeout)
	def(&opts.StateTimeout, DefaultStateTimeout)
	def(&opts.FileTimeout, DefaultFileTimeout)
	def(&opts.DefaultTimeout, DefaultCallTimeout)
	def(&opts.MaxRetryWait, DefaultMaxRetryWait)
	switch {
	case opts.RetryWait == 0:
		opts.RetryWait = DefaultRetryWait
	case opts.RetryWait < 0:
		opts.RetryWait = 0
	}
	retries := opts.Retries
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	if opts.Python == "" {
		opts.Python = DefaultPython
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	client := opts.HTTPClient
	if client == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		tr.MaxIdleConnsPerHost = 4
		client = &http.Client{Transport: tr}
	}
	opts.StateURL = state.String()
	return &Guest{base: base, state: state, client: client, opts: opts, retries: retries}, nil
}

func parseBase(raw string, defPort int) (*url.URL, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, errors.New("empty")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: scheme %q, want http or https", raw, u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%q: no host", raw)
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(defPort))
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("%q: want scheme://host:port[/path] only", raw)
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Host is the guest server's host:port, as errors name it.
func (g *Guest) Host() string { return g.base.Host }

// BaseURL is the guest server's base URL.
func (g *Guest) BaseURL() string { return g.base.String() }

// StateURL is the app-state server's base URL.
func (g *Guest) StateURL() string { return g.state.String() }

// Command is a command for /execute, /setup/execute and /setup/launch:
// either a command line (Line) or an argument vector (Argv), never both.
// It encodes as the request body {"command": Line or Argv, "shell": Shell}.
// With Shell the guest runs Line through /bin/sh; without it, the guest
// splits a Line with Python's shlex and runs the program directly.
type Command struct {
	Line  string
	Argv  []string
	Shell bool
}

// ShellCommand is a command line run through the guest's shell.
func ShellCommand(line string) Command { return Command{Line: line, Shell: true} }

// ArgvCommand is a program and its arguments, run without a shell.
func ArgvCommand(argv ...string) Command { return Command{Argv: argv} }

// Validate reports an empty command or one with both Line and Argv.
func (c Command) Validate() error {
	switch {
	case c.Line != "" && len(c.Argv) > 0:
		return errors.New("command has both a line and an argv")
	case c.Line == "" && len(c.Argv) == 0:
		return errors.New("empty command")
	case len(c.Argv) > 0 && c.Argv[0] == "":
		return errors.New("command argv[0] is empty")
	}
	return nil
}

// MarshalJSON encodes the request body {"command": ..., "shell": ...}.
func (c Command) MarshalJSON() ([]byte, error) {
	var cmd any = c.Line
	if len(c.Argv) > 0 {
		cmd = c.Argv
	}
	return json.Marshal(struct {
		Command any  `json:"command"`
		Shell   bool `json:"shell"`
	}{cmd, c.Shell})
}

// String is the command for messages: Line, or Argv joined by spaces with
// arguments that need it quoted.
func (c Command) String() string {
	if len(c.Argv) == 0 {
		return c.Line
	}
	parts := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// ExecResult is the guest's answer to /execute and /setup/execute.
// ReturnCode is -1 when the command could not be run at all (the guest
// answered 500 with status "error").
type ExecResult struct {
	Status     string `json:"status"` // "success": the command ran (see ReturnCode); "error": it could not run
	Output     string `json:"output"` // stdout
	Error      string `json:"error"`  // stderr
	ReturnCode int    `json:"returncode"`
	Message    string `json:"message,omitempty"` // the guest's message when Status is "error"
}

// ErrTimeout is matched (errors.Is) by every error of a call that got no
// answer in time, whether its own timeout or the caller's deadline ended it.
// The error is a *TimeoutError naming the operation, host and time.
var ErrTimeout = errors.New("vmpool: guest did not answer in time")

// ErrNotPNG is matched by the error of a screenshot whose bytes are not a PNG.
var ErrNotPNG = errors.New("answer is not a PNG image")

// TimeoutError is a call that got no answer within Timeout. It matches
// ErrTimeout and context.DeadlineExceeded.
type TimeoutError struct {
	Op      string        // "screenshot", "execute", ...
	Host    string        // host:port of the server called
	Timeout time.Duration // the time the call had
}

func (e *TimeoutError) Error() string {
	return fmt.Sprintf("vmpool: guest %s: %s: no answer within %v", e.Host, e.Op, e.Timeout)
}

// Is reports ErrTimeout and context.DeadlineExceeded.
func (e *TimeoutError) Is(target error) bool {
	return target == ErrTimeout || target == context.DeadlineExceeded
}

// HTTPError is a non-2xx answer. Message is the guest's "message" (or
// "error") field, or the start of the body when it has none.
type HTTPError struct {
	Op      string
	URL     string
	Status  int
	Message string
}

func (e *HTTPError) Error() string {
	host := e.URL
	if u, err := url.Parse(e.URL); err == nil && u.Host != "" {
		host = u.Host
	}
	msg := fmt.Sprintf("vmpool: guest %s: %s: HTTP %d", host, e.Op, e.Status)
	if e.Message != "" {
		msg += ": " + e.Message
	}
	return msg
}

// ExecError is a command that ran and failed (Result.ReturnCode ≠ 0) or
// that the guest could not run (Result.Status "error", HTTP 500; then Err
// is the *HTTPError and Result.Message the guest's message).
type ExecError struct {
	Op      string // "execute" or "setup execute"
	Host    string
	Command Command
	Result  ExecResult
	Err     error
}

func (e *ExecError) Error() string {
	cmd := e.Command.String()
	if len(cmd) > 80 {
		cmd = cmd[:77] + "..."
	}
	var detail string
	if e.Result.Status == "error" {
		detail = "could not run"
		if e.Result.Message != "" {
			detail += ": " + firstLine(e.Result.Message)
		}
	} else {
		detail = fmt.Sprintf("exit status %d", e.Result.ReturnCode)
		if t := lastLine(e.Result.Error); t != "" {
			detail += ": " + t
		} else if t := lastLine(e.Result.Output); t != "" {
			detail += ": " + t
		}
	}
	return fmt.Sprintf("vmpool: guest %s: %s %q: %s", e.Host, e.Op, cmd, detail)
}

func (e *ExecError) Unwrap() error { return e.Err }

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	return truncate(s, 200)
}

// lastLine: a Python traceback ends with the exception.
func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return truncate(s, 200)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// call describes one protocol call.
type call struct {
	op          string
	method      string
	server      *url.URL // g.base or g.state
	path        string   // with query, if any
	body        []byte
	contentType string
	timeout     time.Duration
	// idempotent calls are retried on transport errors, 5xx and bad
	// payloads; the others only when the request provably never left.
	idempotent bool
	// check validates a 2xx payload; its error is retried like a 5xx.
	check func([]byte) error
}

// answer is a completed HTTP exchange.
type answer struct {
	status int
	header http.Header
	body   []byte
}

// attemptError is one failed attempt and whether another may follow.
type attemptError struct {
	err    error
	retry  bool // for idempotent calls
	unsent bool // the request never reached the server: always retryable
}

// do runs c with retries. A failed last attempt is returned as its error,
// with the answer (if any) beside it for the caller to read. When the wait
// before a retry would pass the caller's deadline, do gives up with the
// last attempt's error: no deadline has expired, so the error must not
// read as a timeout (the pool quarantines timed-out VMs at once).
func (g *Guest) do(ctx context.Context, c call) (answer, error) {
	for attempt := 0; ; attempt++ {
		a, ae := g.attempt(ctx, c)
		if ae == nil {
			return a, nil
		}
		if attempt >= g.retries || !(ae.unsent || (c.idempotent && ae.retry)) {
			return a, ae.err
		}
		wait := g.backoff(attempt)
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			return a, fmt.Errorf("vmpool: guest %s: %s: no time left to retry before the caller's deadline; last attempt: %w",
				c.server.Host, c.op, ae.err)
		}
		if wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return a, fmt.Errorf("vmpool: guest %s: %s: %w while waiting to retry; last attempt: %w",
					c.server.Host, c.op, ctx.Err(), ae.err)
			case <-t.C:
			}
		}
	}
}

// backoff is the wait before retry n (0-based): RetryWait·2ⁿ capped at
// MaxRetryWait, drawn from its upper half.
func (g *Guest) backoff(n int) time.Duration {
	d := g.opts.RetryWait
	if d <= 0 {
		return 0
	}
	for i := 0; i < n && d < g.opts.MaxRetryWait; i++ {
		d *= 2
	}
	d = min(d, g.opts.MaxRetryWait)
	half := d / 2
	return half + time.Duration(rand.Int64N(int64(d-half)+1))
}

func (g *Guest) attempt(ctx context.Context, c call) (answer, *attemptError) {
	host := c.server.Host
	budget := c.timeout
	if dl, ok := ctx.Deadline(); ok && time.Until(dl) < budget {
		budget = time.Until(dl)
	}
	actx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	// ctxErr maps an error that happened while actx ended.
	ctxErr := func() *attemptError {
		if ctx.Err() == context.Canceled {
			return &attemptError{err: fmt.Errorf("vmpool: guest %s: %s: %w", host, c.op, context.Canceled)}
		}
		return &attemptError{err: &TimeoutError{Op: c.op, Host: host, Timeout: roundDur(budget)}}
	}
	if budget <= 0 {
		return answer{}, ctxErr()
	}

	var gotConn atomic.Bool
	actx = httptrace.WithClientTrace(actx, &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { gotConn.Store(true) },
	})
	var body io.Reader
	if c.body != nil {
		body = bytes.NewReader(c.body)
	}
	req, err := http.NewRequestWithContext(actx, c.method, c.server.String()+c.path, body)
	if err != nil {
		return answer{}, &attemptError{err: fmt.Errorf("vmpool: guest %s: %s: %w", host, c.op, err)}
	}
	if c.contentType != "" {
		req.Header.Set("Content-Type", c.contentType)
	}
	resp, err := g.client.Do(req)
	if err != nil {
		if actx.Err() != nil {
			return answer{}, ctxErr()
		}
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		var oe *net.OpError
		unsent := !gotConn.Load() || (errors.As(err, &oe) && oe.Op == "dial")
		return answer{}, &attemptError{err: fmt.Errorf("vmpool: guest %s: %s: %w", host, c.op, err), retry: true, unsent: unsent}
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, g.opts.MaxBodyBytes+1))
	if err != nil {
		if actx.Err() != nil {
			return answer{}, ctxErr()
		}
		return answer{}, &attemptError{err: fmt.Errorf("vmpool: guest %s: %s: reading the answer: %w", host, c.op, err), retry: true}
	}
	if int64(len(data)) > g.opts.MaxBodyBytes {
		return answer{}, &attemptError{err: fmt.Errorf("vmpool: guest %s: %s: answer larger than %d bytes", host, c.op, g.opts.MaxBodyBytes)}
	}
	a := answer{status: resp.StatusCode, header: resp.Header, body: data}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return a, &attemptError{err: httpError(c, a), retry: resp.StatusCode >= 500}
	}
	if c.check != nil {
		if err := c.check(data); err != nil {
			return a, &attemptError{err: fmt.Errorf("vmpool: guest %s: %s: %w", host, c.op, err), retry: true}
		}
	}
	return a, nil
}

func roundDur(d time.Duration) time.Duration {
	switch {
	case d >= time.Second:
		return d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		return d.Round(time.Millisecond)
	}
	return d
}

// httpError maps a non-2xx answer.
func httpError(c call, a answer) *HTTPError {
	return &HTTPError{Op: c.op, URL: c.server.String() + c.path, Status: a.status, Message: messageOf(a.body)}
}

// messageOf extracts the guest's message from an error body: the JSON
// "message" or "error" field, else the start of the text.
func messageOf(body []byte) string {
	var m struct {
		Message any `json:"message"`
		Error   any `json:"error"`
	}
	if json.Unmarshal(body, &m) == nil {
		for _, v := range []any{m.Message, m.Error} {
			if s, ok := v.(string); ok && s != "" {
				return s
			}
		}
	}
	return truncate(strings.Join(strings.Fields(string(body)), " "), 300)
}

func (g *Guest) get(op, path string, timeout time.Duration, check func([]byte) error) call {
	return call{op: op, method: http.MethodGet, server: g.base, path: path, timeout: timeout, idempotent: true, check: check}
}

// simple runs an idempotent call and maps a non-2xx answer to *HTTPError.
func (g *Guest) simple(ctx context.Context, c call) ([]byte, error) {
	a, err := g.do(ctx, c)
	if err != nil {
		return nil, err
	}
	return a.body, nil
}

var pngSig = []byte("\x89PNG\r\n\x1a\n")

// Screenshot returns the guest's screen as PNG bytes (GET /screenshot,
// ScreenshotTimeout, retried). An answer that is not a PNG is an error
// matching ErrNotPNG (retried first, as the Python clients do).
func (g *Guest) Screenshot(ctx context.Context) ([]byte, error) {
	return g.simple(ctx, g.get("screenshot", "/screenshot", g.opts.ScreenshotTimeout, func(b []byte) error {
		if !bytes.HasPrefix(b, pngSig) {
			return fmt.Errorf("%w (%d bytes starting %q)", ErrNotPNG, len(b), truncate(string(b[:min(len(b), 16)]), 16))
		}
		return nil
	}))
}

// Execute runs cmd in the guest and waits for it (POST /execute,
// ExecuteTimeout; the guest kills commands after 120 s). A command that
// exits non-zero, or that the guest cannot run, returns its result and an
// *ExecError.
//
// Execute is not retried after the request may have reached the guest:
// commands are not idempotent (a retried click clicks twice, a retried
// "mkdir" fails), and an answer lost on the way back does not mean the
// command did not run. Only a request that provably never left — the
// connection could not be opened — is retried. Callers that know their
// command is idempotent may retry themselves.
func (g *Guest) Execute(ctx context.Context, cmd Command) (ExecResult, error) {
	return g.exec(ctx, "execute", "/execute", cmd)
}

// SetupExecute is Execute on /setup/execute, the endpoint task
// initialization uses (same semantics on the guest).
func (g *Guest) SetupExecute(ctx context.Context, cmd Command) (ExecResult, error) {
	return g.exec(ctx, "setup execute", "/setup/execute", cmd)
}

func (g *Guest) exec(ctx context.Context, op, path string, cmd Command) (ExecResult, error) {
	if err := cmd.Validate(); err != nil {
		return ExecResult{}, fmt.Errorf("vmpool: guest %s: %s: %w", g.base.Host, op, err)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return ExecResult{}, fmt.Errorf("vmpool: guest %s: %s: %w", g.base.Host, op, err)
	}
	c := call{op: op, method: http.MethodPost, server: g.base, path: path, body: body,
		contentType: "application/json", timeout: g.opts.ExecuteTimeout}
	a, err := g.do(ctx, c)
	if err != nil {
		var he *HTTPError
		if errors.As(err, &he) && he.Status == http.StatusInternalServerError {
			res := ExecResult{Status: "error", ReturnCode: -1, Message: he.Message}
			var body struct {
				Status string `json:"status"`
			}
			if json.Unmarshal(a.body, &body) == nil && body.Status != "" {
				res.Status = body.Status
			}
			return res, &ExecError{Op: op, Host: g.base.Host, Command: cmd, Result: res, Err: he}
		}
		return ExecResult{}, err
	}
	var res ExecResult
	if err := json.Unmarshal(a.body, &res); err != nil {
		return ExecResult{}, fmt.Errorf("vmpool: guest %s: %s: answer is not an execute result: %w (%s)",
			g.base.Host, op, err, truncate(string(a.body), 100))
	}
	if res.Status == "error" || res.ReturnCode != 0 {
		return res, &ExecError{Op: op, Host: g.base.Host, Command: cmd, Result: res}
	}
	return res, nil
}

// ExecPyAutoGUI runs pyautogui code in the guest the way OSWorld does:
// argv ["python3", "-c", PyAutoGUIPrefix + code], through Execute (so it is
// not retried). code may span several lines. The special tokens of an
// agent's action (WAIT, DONE, FAIL, "ANS ...") are not code and are
// refused.
func (g *Guest) ExecPyAutoGUI(ctx context.Context, code string) (ExecResult, error) {
	c := strings.TrimSpace(code)
	switch {
	case c == "":
		return ExecResult{}, fmt.Errorf("vmpool: guest %s: execute: empty pyautogui code", g.base.Host)
	case c == "WAIT" || c == "DONE" || c == "FAIL" || strings.HasPrefix(c, "ANS "):
		return ExecResult{}, fmt.Errorf("vmpool: guest %s: execute: %q is an agent control token, not pyautogui code", g.base.Host, truncate(c, 40))
	}
	return g.Execute(ctx, ArgvCommand(g.opts.Python, "-c", PyAutoGUIPrefix+code))
}

// Launch starts cmd in the guest without waiting for it (POST
// /setup/launch, DefaultTimeout). Like Execute, it is not retried once the
// request may have arrived: a retry could start the program twice.
func (g *Guest) Launch(ctx context.Context, cmd Command) error {
	if err := cmd.Validate(); err != nil {
		return fmt.Errorf("vmpool: guest %s: launch: %w", g.base.Host, err)
	}
	body, err := json.Marshal(cmd)
	if err != nil {
		return fmt.Errorf("vmpool: guest %s: launch: %w", g.base.Host, err)
	}
	_, err = g.do(ctx, call{op: "launch", method: http.MethodPost, server: g.base, path: "/setup/launch",
		body: body, contentType: "application/json", timeout: g.opts.DefaultTimeout})
	return err
}

// Platform returns the guest's platform name (GET /platform, plain text:
// "Linux", "Windows", "Darwin"; the simulator answers "Linux (codapipe
// simulator)").
func (g *Guest) Platform(ctx context.Context) (string, error) {
	b, err := g.simple(ctx, g.get("platform", "/platform", g.opts.DefaultTimeout, nil))
	return strings.TrimSpace(string(b)), err
}

// ScreenSize returns the guest's screen size. The OSWorld server serves
// /screen_size on POST only; a server that answers 404 or 405 to the POST
// is asked with GET. Retried (the call changes nothing).
func (g *Guest) ScreenSize(ctx context.Context) (w, h int, err error) {
	c := call{op: "screen size", method: http.MethodPost, server: g.base, path: "/screen_size",
		timeout: g.opts.DefaultTimeout, idempotent: true}
	b, err := g.simple(ctx, c)
	var he *HTTPError
	if errors.As(err, &he) && (he.Status == http.StatusMethodNotAllowed || he.Status == http.StatusNotFound) {
		b, err = g.simple(ctx, g.get("screen size", "/screen_size", g.opts.DefaultTimeout, nil))
	}
	if err != nil {
		return 0, 0, err
	}
	var s struct {
		Width  *int `json:"width"`
		Height *int `json:"height"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Width == nil || s.Height == nil {
		return 0, 0, fmt.Errorf("vmpool: guest %s: screen size: want {\"width\":W,\"height\":H}, got %s", g.base.Host, truncate(string(b), 100))
	}
	return *s.Width, *s.Height, nil
}

// CursorPosition returns the mouse position (GET /cursor_position: [x, y],
// or {"x":…, "y":…} on some forks). Retried.
func (g *Guest) CursorPosition(ctx context.Context) (x, y int, err error) {
	b, err := g.simple(ctx, g.get("cursor position", "/cursor_position", g.opts.DefaultTimeout, nil))
	if err != nil {
		return 0, 0, err
	}
	var pair []float64
	if json.Unmarshal(b, &pair) == nil && len(pair) >= 2 {
		return int(pair[0]), int(pair[1]), nil
	}
	var obj struct {
		X, Y *float64
	}
	if json.Unmarshal(b, &obj) == nil && obj.X != nil && obj.Y != nil {
		return int(*obj.X), int(*obj.Y), nil
	}
	return 0, 0, fmt.Errorf("vmpool: guest %s: cursor position: want [x, y], got %s", g.base.Host, truncate(string(b), 100))
}

// Accessibility returns the guest's accessibility tree as XML (GET
// /accessibility → {"AT": xml}, AccessibilityTimeout, retried). The Python
// clients call this without a timeout and have hung for hours; here it has
// its own bound (AccessibilityTimeout), longer than the other calls' as a
// busy desktop's tree is slow to build.
func (g *Guest) Accessibility(ctx context.Context) (string, error) {
	b, err := g.simple(ctx, g.get("accessibility", "/accessibility", g.opts.AccessibilityTimeout, nil))
	if err != nil {
		return "", err
	}
	var at struct {
		AT *string `json:"AT"`
	}
	if err := json.Unmarshal(b, &at); err != nil {
		return "", fmt.Errorf("vmpool: guest %s: accessibility: want {\"AT\": xml}: %w", g.base.Host, err)
	}
	if at.AT == nil {
		return "", fmt.Errorf("vmpool: guest %s: accessibility: the guest returned no tree", g.base.Host)
	}
	return *at.AT, nil
}

// AppState calls the app-state server at StateURL: GET path when body is
// nil (retried), POST body as JSON otherwise (not retried once sent: a
// POST may run an app command, e.g. /chimerax/run). path starts with "/"
// and may carry a query. It returns the body of a 2xx answer; anything
// else is an *HTTPError. This is the AppState the task evaluator uses.
func (g *Guest) AppState(ctx context.Context, path string, body []byte) ([]byte, error) {
	op := "app state " + path
	if !strings.HasPrefix(path, "/") {
		return nil, fmt.Errorf("vmpool: guest %s: %s: path must start with /", g.state.Host, op)
	}
	c := call{op: op, method: http.MethodGet, server: g.state, path: path, timeout: g.opts.StateTimeout, idempotent: true}
	if body != nil {
		c.method, c.body, c.contentType, c.idempotent = http.MethodPost, body, "application/json", false
	}
	return g.simple(ctx, c)
}

// Download returns the contents of a file in the guest (POST /file with
// form field file_path, FileTimeout, retried: it only reads).
func (g *Guest) Download(ctx context.Context, path string) ([]byte, error) {
	form := url.Values{"file_path": {path}}.Encode()
	return g.simple(ctx, call{op: "download " + path, method: http.MethodPost, server: g.base, path: "/file",
		body: []byte(form), contentType: "application/x-www-form-urlencoded", timeout: g.opts.FileTimeout, idempotent: true})
}

// Upload writes data to a file in the guest, creating its directory
// (POST /setup/upload, multipart fields file_path and file_data,
// FileTimeout). Retried: writing the same bytes again is harmless.
func (g *Guest) Upload(ctx context.Context, path string, data []byte) error {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	if err := mw.WriteField("file_path", path); err != nil {
		return err
	}
	fw, err := mw.CreateFormFile("file_data", fileBase(path))
	if err != nil {
		return err
	}
	if _, err := fw.Write(data); err != nil {
		return err
	}
	if err := mw.Close(); err != nil {
		return err
	}
	_, err = g.simple(ctx, call{op: "upload " + path, method: http.MethodPost, server: g.base, path: "/setup/upload",
		body: buf.Bytes(), contentType: mw.FormDataContentType(), timeout: g.opts.FileTimeout, idempotent: true})
	return err
}

func fileBase(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		p = "file"
	}
	return p
}
