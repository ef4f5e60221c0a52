package guest

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// appHandler is the app server (port 8000) of one simulated VM: every
// request goes to the running app (Machine.AppServe) with its method,
// path, query and body. HEAD requests reach the app as HEAD (the real
// KAlgebra and Celestia servers answer them; net/http drops the body).
// With no app running, or while the VM boots or reverts, nothing listens
// on the real port: the connection is refused (here: closed without an
// answer).
type appHandler struct{ v *vm }

// errRefused is a connection nothing accepts.
var errRefused = errors.New("connection refused: nothing listens on the app port (no application is running)")

func (a *appHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := a.serve(w, r); err != nil {
		abandon()
	}
}

// serve answers r, or returns errRefused when nothing would accept the
// connection; it panics with http.ErrAbortHandler where the connection is
// dropped after it was accepted (a dead VM, a client that left).
func (a *appHandler) serve(w http.ResponseWriter, r *http.Request) error {
	v := a.v
	if v.cfgErr != nil {
		http.Error(w, "simulator: invalid guest configuration: "+v.cfgErr.Error(), http.StatusInternalServerError)
		return nil
	}
	body, err := readBody(w, r)
	if err != nil {
		http.Error(w, "bad request: reading the body: "+err.Error(), http.StatusBadRequest)
		return nil
	}
	v.mu.Lock()
	b := v.busyLocked()
	if b != "" {
		v.stats.Busy++
	}
	v.mu.Unlock()
	if b != "" || v.m.State().App == "" {
		return errRefused
	}
	v.recordCall(scienceboard.AppServer, r, body)
	switch ad, msg := v.admit(w, r); ad {
	case busy:
		return errRefused
	case injected:
		http.Error(w, msg, http.StatusInternalServerError)
		return nil
	}
	resp, status, err := v.m.AppServe(r.Method, r.URL.Path, r.URL.Query(), body)
	if errors.Is(err, desktop.ErrNoApp) {
		return errRefused
	}
	if err != nil {
		http.Error(w, "simulator: "+err.Error(), http.StatusInternalServerError)
		return nil
	}
	if status == 0 {
		status = http.StatusOK
	}
	ct := "text/plain; charset=utf-8"
	if len(resp) > 0 && json.Valid(resp) {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(resp)
	return nil
}
