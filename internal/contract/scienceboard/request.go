package scienceboard

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"
)

// The two HTTP servers of a ScienceBoard VM (Request.Server).
const (
	// GuestServer is the guest server on port 5000 (ScienceBoard's
	// vm_config/server.py): /setup/*, /opt, /read, /write, /append,
	// /chimerax/run, /lean/check, /tex/check.
	GuestServer = "guest"
	// AppServer is the modified application on port 8000 (KAlgebra,
	// Celestia, the GRASS GIS GUI) or ChimeraX's own REST server.
	AppServer = "app"
)

// Ports the real VMs serve the two servers on.
const (
	GuestPort = 5000
	AppPort   = 8000
)

// Request is one HTTP request to a ScienceBoard VM, as the benchmark's
// harness sends it. Setup steps and evaluation checks are expressed as
// requests; a Caller sends them.
type Request struct {
	// Server is GuestServer or AppServer.
	Server string `json:"server"`
	// Method is "GET" or "POST".
	Method string `json:"method"`
	// Path is the URL path, e.g. "/chimerax/run".
	Path string `json:"path"`
	// Query is the URL query (GET /read?path=...); nil when none.
	Query url.Values `json:"query,omitempty"`
	// Body is the request body; nil for a GET.
	Body []byte `json:"body,omitempty"`
	// ContentType is the Content-Type header; "" sends none (the harness
	// posts some bodies without one).
	ContentType string `json:"content_type,omitempty"`
	// Timeout bounds the call; 0 leaves it to the caller's default.
	Timeout time.Duration `json:"timeout,omitempty"`
}

// String is "POST app /tab" plus the query, for messages.
func (r Request) String() string {
	s := r.Method + " " + r.Server + " " + r.Path
	if len(r.Query) > 0 {
		s += "?" + r.Query.Encode()
	}
	return s
}

// Caller sends requests to one VM's servers and returns the body of a 2xx
// answer. An answer with another status is an error that has a method
// HTTPStatus() int (and a message naming the status); a VM that cannot be
// reached, or does not answer in time, gives any other error.
type Caller interface {
	Call(ctx context.Context, r Request) ([]byte, error)
}

// StatusOf returns the HTTP status an error from a Caller carries, or 0
// when the call got no answer.
func StatusOf(err error) int {
	var s interface{ HTTPStatus() int }
	if errors.As(err, &s) {
		return s.HTTPStatus()
	}
	return 0
}

// TaskError is a deterministic refusal by the application or the guest
// server of a task's own setup step or check: the VM is healthy, the same
// request would be refused again. An episode that meets one ends as an
// environment error with the reason; the VM is neither reset for it nor
// quarantined, and the episode is not retried.
type TaskError struct {
	Op     string // "initialize[2] tab"
	Req    string // the request, Request.String
	Reason string // what the server said
}

// Error names the step, the request and the reason.
func (e *TaskError) Error() string {
	return fmt.Sprintf("%s: %s: refused: %s", e.Op, e.Req, e.Reason)
}
