package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// ReadyTimeout bounds one /readyz request: all of a command's readiness
// checks together.
const ReadyTimeout = 2 * time.Second

// Health is what a command's /readyz reports: named readiness checks that
// its Run registers (Env.Ready) as it opens its connections. With no
// check registered the command is ready. The zero value is usable.
type Health struct {
	mu     sync.Mutex
	checks []readyCheck
}

type readyCheck struct {
	name  string
	check func(ctx context.Context) error
}

// Ready registers check under name, replacing a check of that name. The
// command is ready when every check returns nil; a check's error is the
// reason it is not, shown as "name: error".
func (h *Health) Ready(name string, check func(ctx context.Context) error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, c := range h.checks {
		if c.name == name {
			h.checks[i].check = check
			return
		}
	}
	h.checks = append(h.checks, readyCheck{name, check})
}

// Check runs the checks in the order they were registered and returns nil
// when all pass, or one "name: reason" error per failing check.
func (h *Health) Check(ctx context.Context) error {
	h.mu.Lock()
	checks := append([]readyCheck(nil), h.checks...)
	h.mu.Unlock()
	var errs []error
	for _, c := range checks {
		if err := c.check(ctx); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// handle adds /healthz (200 while the process serves) and /readyz (200
// when Check passes within ReadyTimeout, else 503 with the reasons, one a
// line, as plain text) to mux. h may be nil: no checks.
func (h *Health) handle(mux *http.ServeMux) {
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		var err error
		if h != nil {
			ctx, cancel := context.WithTimeout(r.Context(), ReadyTimeout)
			defer cancel()
			err = h.Check(ctx)
		}
		if err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, strings.TrimSpace(err.Error()))
			return
		}
		fmt.Fprintln(w, "ready")
	})
}

// Ready registers a readiness check of the command (Health.Ready): with
// --metrics-addr, /readyz answers 200 only while every check passes. Bus
// registers one for NATS ("nats": connected, its streams and running
// consumers exist); a command that consumes a stream is ready only while
// it runs its consumer.
func (e *Env) Ready(name string, check func(ctx context.Context) error) {
	e.health.Ready(name, check)
}

// expectConsumer makes a command that consumes a stream ready only once
// it is connected and runs its consumer.
func (e *Env) expectConsumer() {
	e.consumer = true
	e.health.Ready("nats", e.busReady)
}

// busReady is the "nats" readiness check: the bus, once open, is Ready,
// and for a consumer command it runs a consumer.
func (e *Env) busReady(ctx context.Context) error {
	e.readyMu.RLock()
	defer e.readyMu.RUnlock()
	switch {
	case e.readyBus == nil:
		return errors.New("not connected")
	case e.consumer && e.readyBus.Consuming() == 0:
		if err := e.readyBus.Ready(ctx); err != nil {
			return err
		}
		return errors.New("consumer not running")
	}
	return e.readyBus.Ready(ctx)
}
