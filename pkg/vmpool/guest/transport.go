package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"sync/atomic"
	"time"

	"github.com/codapipe/codapipe/internal/contract/guestproto"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
)

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
func (g *Client) do(ctx context.Context, c call) (answer, error) {
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
func (g *Client) backoff(n int) time.Duration {
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

func (g *Client) attempt(ctx context.Context, c call) (answer, *attemptError) {
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
		return &attemptError{err: &TimeoutError{Op: c.op, Host: host, Timeout: errtext.Duration(budget)}}
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

// httpError maps a non-2xx answer.
func httpError(c call, a answer) *HTTPError {
	return &HTTPError{Op: c.op, URL: c.server.String() + c.path, Status: a.status, Message: ErrorMessage(a.body), JSONStatus: jsonStatus(a.body)}
}

// ErrorMessage extracts a server's message from the body of an error
// answer: its JSON "message" or "error" field; for an HTML page (the
// guest server is a Flask app: its error pages, and in debug mode the
// Werkzeug debugger's page for an exception its view did not catch) the
// page's title, e.g. "FileNotFoundError: [Errno 2] No such file or
// directory: '/x'"; else the start of the text. It is at most 300 bytes
// (then "..."), whatever the answer. The simulator's guest quotes its
// error answers by the same rule.
func ErrorMessage(body []byte) string { return guestproto.ErrorMessage(body) }

// maxErrorMessage bounds the message ErrorMessage takes from an answer.
const maxErrorMessage = guestproto.MaxErrorMessage

// jsonStatus is the "status" field of a JSON object body, or "".
func jsonStatus(body []byte) string {
	var m struct {
		Status string `json:"status"`
	}
	if json.Unmarshal(body, &m) != nil {
		return ""
	}
	return m.Status
}

func (g *Client) get(op, path string, timeout time.Duration, check func([]byte) error) call {
	return call{op: op, method: http.MethodGet, server: g.base, path: path, timeout: timeout, idempotent: true, check: check}
}

// simple runs an idempotent call and maps a non-2xx answer to *HTTPError.
func (g *Client) simple(ctx context.Context, c call) ([]byte, error) {
	a, err := g.do(ctx, c)
	if err != nil {
		return nil, err
	}
	return a.body, nil
}

var pngSig = []byte("\x89PNG\r\n\x1a\n")
