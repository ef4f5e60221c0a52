package model

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"
)

// ErrUnavailable is wrapped by the error of a call that failed on every
// attempt in a way a working endpoint does not fail: no connection,
// timeouts, HTTP 429 or 5xx. Whether that is the endpoint being down for
// everyone (an outage) or this request alone, Ping tells.
var ErrUnavailable = errors.New("the endpoint did not answer")

// UnavailableError is the error of such a call: the endpoint (its base
// URL as recorded, without credentials) and the last attempt's error.
type UnavailableError struct {
	Endpoint string
	Err      error
}

// Error is the last attempt's error (the caller names the endpoint).
func (e *UnavailableError) Error() string { return e.Err.Error() }

// Unwrap returns the last attempt's error and ErrUnavailable.
func (e *UnavailableError) Unwrap() []error { return []error{e.Err, ErrUnavailable} }

// Endpoint is the endpoint as errors, logs and trajectories name it: the
// base URL without credentials.
func (m *Client) Endpoint() string { return m.cfg.BaseURL }

// PingTimeout bounds one Ping.
const PingTimeout = 10 * time.Second

// Ping asks the endpoint for its model list (GET <base URL>/models), once,
// within PingTimeout, and returns nil when it answers: any HTTP answer but
// 429 and 5xx (a server that does not serve the list, 404, is up). It is
// the probe that tells an endpoint that is down from a request that failed.
func (m *Client) Ping(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, PingTimeout)
	defer cancel()
	url := m.at("/models")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("model: ping %s: %w", m.cfg.BaseURL, err)
	}
	req.Header.Set("Accept", "application/json")
	m.authorize(req)
	resp, err := m.hc.Do(req)
	if err != nil {
		return m.secrets.Error(fmt.Errorf("model: ping %s: %w", m.cfg.BaseURL, err))
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, maxModelsBytes))
	resp.Body.Close()
	if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode >= 500 {
		return fmt.Errorf("model: ping %s: %s", m.cfg.BaseURL, resp.Status)
	}
	return nil
}
