package guest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"

	"github.com/codapipe/codapipe/internal/contract/guestproto"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// Local returns a caller that serves each scienceboard.Request through a
// fresh pair of handlers of m (NewHandlers(m, cfg)) in the calling
// goroutine, without a network: the same routes, replies, faults and
// recording as the servers Start serves. A non-2xx answer is an
// *HTTPError (it has HTTPStatus); a request the server drops without an
// answer — the app server with no app running (a refused connection), a
// dead VM, an injected hang that outlasts ctx — is an error without a
// status, as a network caller sees it.
func Local(m desktop.Machine, cfg Config) scienceboard.Caller { return NewHandlers(m, cfg).Caller() }

// Caller returns an in-process caller of h (see Local).
func (h *Handlers) Caller() scienceboard.Caller { return localCaller{h: h} }

type localCaller struct{ h *Handlers }

// HTTPError is a non-2xx answer to an in-process call (Local).
type HTTPError struct {
	Request string // the request, scienceboard.Request.String
	Status  int
	Body    []byte
}

// Error names the request, the status and what the server said, as the
// real guest client quotes it (guestproto.ErrorMessage): a JSON reply's
// "message" or "error", an HTML page's title, or the start of the body.
func (e *HTTPError) Error() string {
	msg := fmt.Sprintf("sim: %s: HTTP %d", e.Request, e.Status)
	if m := guestproto.ErrorMessage(e.Body); m != "" {
		msg += ": " + m
	}
	return msg
}

// HTTPStatus returns the answer's status.
func (e *HTTPError) HTTPStatus() int { return e.Status }

// Call serves r in-process.
func (c localCaller) Call(ctx context.Context, r scienceboard.Request) ([]byte, error) {
	var serve func(http.ResponseWriter, *http.Request) error
	switch r.Server {
	case scienceboard.GuestServer:
		serve = func(w http.ResponseWriter, req *http.Request) error { c.h.Guest.ServeHTTP(w, req); return nil }
	case scienceboard.AppServer:
		serve = c.h.app.serve
	default:
		return nil, fmt.Errorf("sim: %s: unknown server %q (want %q or %q)", r, r.Server, scienceboard.GuestServer, scienceboard.AppServer)
	}
	if !strings.HasPrefix(r.Path, "/") {
		return nil, fmt.Errorf("sim: %s: the path must start with /", r)
	}
	if r.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.Timeout)
		defer cancel()
	}
	u := &url.URL{Scheme: "http", Host: "vm", Path: r.Path}
	if len(r.Query) > 0 {
		u.RawQuery = r.Query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.Method, u.String(), bytes.NewReader(r.Body))
	if err != nil {
		return nil, fmt.Errorf("sim: %s: %w", r, err)
	}
	if r.ContentType != "" {
		req.Header.Set("Content-Type", r.ContentType)
	}
	rec, err, aborted := serveLocal(serve, req)
	switch {
	case aborted && ctx.Err() != nil:
		return nil, fmt.Errorf("sim: %s: %w", r, ctx.Err())
	case aborted:
		return nil, fmt.Errorf("sim: %s: %w", r, errNoAnswer)
	case err != nil:
		return nil, fmt.Errorf("sim: %s: %w", r, err)
	}
	if rec.Code/100 != 2 {
		return nil, &HTTPError{Request: r.String(), Status: rec.Code, Body: rec.Body.Bytes()}
	}
	return rec.Body.Bytes(), nil
}

// serveLocal runs serve on req in this goroutine and records the answer.
// err is serve's (errRefused); aborted reports a handler that dropped the
// connection (it panicked with http.ErrAbortHandler); any other panic
// goes on.
func serveLocal(serve func(http.ResponseWriter, *http.Request) error, req *http.Request) (rec *httptest.ResponseRecorder, err error, aborted bool) {
	rec = httptest.NewRecorder()
	defer func() {
		if p := recover(); p != nil {
			if p != http.ErrAbortHandler {
				panic(p)
			}
			aborted = true
		}
	}()
	err = serve(rec, req)
	return rec, err, false
}

// UploadRequest is the request that writes data to a file in the guest
// (POST /setup/upload, multipart fields file_path and file_data), as
// pkg/vmpool/guest's Client.Upload sends it: how a task's download item
// reaches the simulated guest.
func UploadRequest(path string, data []byte) scienceboard.Request {
	body, contentType := guestproto.UploadForm(path, data)
	return scienceboard.Request{Server: scienceboard.GuestServer, Method: http.MethodPost, Path: "/setup/upload",
		Body: body, ContentType: contentType}
}
