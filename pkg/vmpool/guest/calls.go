package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/contract/guestproto"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
)

// Screenshot returns the guest's screen as PNG bytes (GET /screenshot,
// ScreenshotTimeout, retried). An answer that is not a PNG is an error
// matching ErrNotPNG (retried first, as the Python clients do).
func (g *Client) Screenshot(ctx context.Context) ([]byte, error) {
	return g.simple(ctx, g.get("screenshot", "/screenshot", g.opts.ScreenshotTimeout, func(b []byte) error {
		if !bytes.HasPrefix(b, pngSig) {
			return fmt.Errorf("%w (%d bytes starting %q)", ErrNotPNG, len(b), errtext.Truncate(string(b[:min(len(b), 16)]), 16))
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
func (g *Client) Execute(ctx context.Context, cmd Command) (ExecResult, error) {
	return g.exec(ctx, "execute", "/execute", cmd)
}

// SetupExecute is Execute on /setup/execute, the endpoint task
// initialization uses (same semantics on the guest).
func (g *Client) SetupExecute(ctx context.Context, cmd Command) (ExecResult, error) {
	return g.exec(ctx, "setup execute", "/setup/execute", cmd)
}

func (g *Client) exec(ctx context.Context, op, path string, cmd Command) (ExecResult, error) {
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
			g.base.Host, op, err, errtext.Truncate(string(a.body), 100))
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
func (g *Client) ExecPyAutoGUI(ctx context.Context, code string) (ExecResult, error) {
	c := strings.TrimSpace(code)
	switch {
	case c == "":
		return ExecResult{}, fmt.Errorf("vmpool: guest %s: execute: empty pyautogui code", g.base.Host)
	case c == "WAIT" || c == "DONE" || c == "FAIL" || strings.HasPrefix(c, "ANS "):
		return ExecResult{}, fmt.Errorf("vmpool: guest %s: execute: %q is an agent control token, not pyautogui code", g.base.Host, errtext.Truncate(c, 40))
	}
	return g.Execute(ctx, ArgvCommand(g.opts.Python, "-c", PyAutoGUIPrefix+code))
}

// Launch starts cmd in the guest without waiting for it (POST
// /setup/launch, DefaultTimeout). Like Execute, it is not retried once the
// request may have arrived: a retry could start the program twice.
func (g *Client) Launch(ctx context.Context, cmd Command) error {
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
func (g *Client) Platform(ctx context.Context) (string, error) {
	b, err := g.simple(ctx, g.get("platform", "/platform", g.opts.DefaultTimeout, nil))
	return strings.TrimSpace(string(b)), err
}

// ScreenSize returns the guest's screen size. The OSWorld server serves
// /screen_size on POST only; a server that answers 404 or 405 to the POST
// is asked with GET. Retried (the call changes nothing).
func (g *Client) ScreenSize(ctx context.Context) (w, h int, err error) {
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
		return 0, 0, fmt.Errorf("vmpool: guest %s: screen size: want {\"width\":W,\"height\":H}, got %s", g.base.Host, errtext.Truncate(string(b), 100))
	}
	return *s.Width, *s.Height, nil
}

// CursorPosition returns the mouse position (GET /cursor_position: [x, y],
// or {"x":…, "y":…} on some forks). Retried.
func (g *Client) CursorPosition(ctx context.Context) (x, y int, err error) {
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
	return 0, 0, fmt.Errorf("vmpool: guest %s: cursor position: want [x, y], got %s", g.base.Host, errtext.Truncate(string(b), 100))
}

// Accessibility returns the guest's accessibility tree as XML (GET
// /accessibility → {"AT": xml}, AccessibilityTimeout, retried). The Python
// clients call this without a timeout and have hung for hours; here it has
// its own bound (AccessibilityTimeout), longer than the other calls' as a
// busy desktop's tree is slow to build.
func (g *Client) Accessibility(ctx context.Context) (string, error) {
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

// Download returns the contents of a file in the guest (POST /file with
// form field file_path, FileTimeout, retried: it only reads).
func (g *Client) Download(ctx context.Context, path string) ([]byte, error) {
	form := url.Values{"file_path": {path}}.Encode()
	return g.simple(ctx, call{op: "download " + path, method: http.MethodPost, server: g.base, path: "/file",
		body: []byte(form), contentType: "application/x-www-form-urlencoded", timeout: g.opts.FileTimeout, idempotent: true})
}

// Upload writes data to a file in the guest (POST /setup/upload,
// multipart fields file_path and file_data, FileTimeout). The guest
// server saves the data at file_path (~ expanded) and creates no folder:
// a missing folder is an unhandled FileNotFoundError there, an
// *HTTPError with status 500. Retried: writing the same bytes again is
// harmless.
func (g *Client) Upload(ctx context.Context, path string, data []byte) error {
	body, contentType := guestproto.UploadForm(path, data)
	_, err := g.simple(ctx, call{op: "upload " + path, method: http.MethodPost, server: g.base, path: "/setup/upload",
		body: body, contentType: contentType, timeout: g.opts.FileTimeout, idempotent: true})
	return err
}

// The two servers of a ScienceBoard VM (Request.Server).
const (
	ServerGuest = "guest" // the guest server (the client's base URL, port 5000)
	ServerApp   = "app"   // the application's server (Options.StateURL, port 8000)
)

// Request is one request to either server of a VM, for protocols built on
// top of the guest server such as ScienceBoard's (its setup routes,
// /read, /write, /append, /chimerax/run, /lean/check, /tex/check, and the
// application's own routes on port 8000).
type Request struct {
	Server      string     // ServerGuest or ServerApp
	Method      string     // "GET" or "POST"
	Path        string     // URL path, starting with "/"
	Query       url.Values // URL query; nil: none
	Body        []byte     // request body; nil: none
	ContentType string     // "": no Content-Type header
	// Timeout bounds each attempt; 0: StateTimeout for the app server,
	// ExecuteTimeout for the guest server.
	Timeout time.Duration
}

// Call sends r and returns the body of a 2xx answer; any other status is
// an *HTTPError. GETs are retried like the other idempotent calls; a POST
// only when it provably never left (it may change the app's state).
func (g *Client) Call(ctx context.Context, r Request) ([]byte, error) {
	server, timeout := g.base, g.opts.ExecuteTimeout
	switch r.Server {
	case ServerGuest:
	case ServerApp:
		server, timeout = g.state, g.opts.StateTimeout
	default:
		return nil, fmt.Errorf("vmpool: guest %s: call %s: unknown server %q (want %q or %q)", g.base.Host, r.Path, r.Server, ServerGuest, ServerApp)
	}
	if !strings.HasPrefix(r.Path, "/") {
		return nil, fmt.Errorf("vmpool: guest %s: call %q: path must start with /", server.Host, r.Path)
	}
	if r.Method != http.MethodGet && r.Method != http.MethodPost {
		return nil, fmt.Errorf("vmpool: guest %s: call %s: method %q (want GET or POST)", server.Host, r.Path, r.Method)
	}
	if r.Timeout > 0 {
		timeout = r.Timeout
	}
	path := r.Path
	if len(r.Query) > 0 {
		path += "?" + r.Query.Encode()
	}
	return g.simple(ctx, call{op: r.Method + " " + r.Path, method: r.Method, server: server, path: path,
		body: r.Body, contentType: r.ContentType, timeout: timeout, idempotent: r.Method == http.MethodGet})
}

// HTTPStatus returns the answer's status (for callers that classify
// errors by interface rather than by type).
func (e *HTTPError) HTTPStatus() int { return e.Status }
