package guest

import (
	"context"
	"fmt"
	"net/url"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
)

// TimeoutError is a call that got no answer within Timeout. It matches
// ErrTimeout and context.DeadlineExceeded.
type TimeoutError struct {
	Op      string        // "screenshot", "execute", ...
	Host    string        // host:port of the server called
	Timeout time.Duration // the time the call had
}

// Error names the host, the operation and the time it had.
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
	Op      string // "screenshot", "execute", ...
	URL     string // the URL called
	Status  int    // the HTTP status
	Message string // what the guest said
	// JSONStatus is the "status" field of a JSON body ("error" when the
	// guest server reports a command it could not run), else "".
	JSONStatus string
}

// Error names the host, the operation, the status and the guest's message.
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
	Op      string     // "execute" or "setup execute"
	Host    string     // host:port of the guest server
	Command Command    // the command sent
	Result  ExecResult // the guest's answer
	Err     error      // the *HTTPError of a command that could not run, else nil
}

// Error names the host and the command (cut to 80 bytes) and says how it
// failed: its exit status and the last line of its stderr, or the guest's
// message.
func (e *ExecError) Error() string {
	cmd := e.Command.String()
	if len(cmd) > 80 {
		cmd = cmd[:77] + "..."
	}
	var detail string
	if e.Result.Status == "error" {
		detail = "could not run"
		if e.Result.Message != "" {
			detail += ": " + errtext.FirstLine(e.Result.Message)
		}
	} else {
		detail = fmt.Sprintf("exit status %d", e.Result.ReturnCode)
		if t := errtext.LastLine(e.Result.Error); t != "" {
			detail += ": " + t
		} else if t := errtext.LastLine(e.Result.Output); t != "" {
			detail += ": " + t
		}
	}
	return fmt.Sprintf("vmpool: guest %s: %s %q: %s", e.Host, e.Op, cmd, detail)
}

// Unwrap is Err.
func (e *ExecError) Unwrap() error { return e.Err }
