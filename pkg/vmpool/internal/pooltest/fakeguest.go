package pooltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// FakeGuest is a guest server for tests: the OSWorld calls the pool and
// its backends use (/screenshot, /execute, /setup/execute, /screen_size)
// and the simulator's /sim/ control endpoints. Change its behaviour with
// Set; read what it was asked with Calls.
type FakeGuest struct {
	srv *httptest.Server

	mu sync.Mutex
	// ResetDelay is how long POST /sim/reset takes.
	ResetDelay time.Duration
	// Status is what /sim/health says; "" is "ok" (HTTP 200), anything
	// else answers 503.
	Status string
	// ExecFail makes /execute and /setup/execute answer 500, as a guest
	// that cannot run the command does.
	ExecFail bool
	// ShotFail makes /screenshot answer 500.
	ShotFail bool
	// NoSim makes /sim/* answer 404, as a real guest does.
	NoSim bool
	calls GuestCalls
}

// GuestCalls counts what a FakeGuest was asked.
type GuestCalls struct {
	Resets      int      // POST /sim/reset
	Screenshots int      // GET /screenshot
	Sizes       int      // /screen_size
	Execs       []string // the commands run, as fmt prints them
}

// NewFakeGuest starts a FakeGuest, stopped when the test ends.
func NewFakeGuest(t testing.TB) *FakeGuest {
	t.Helper()
	g := &FakeGuest{}
	g.srv = httptest.NewServer(g)
	t.Cleanup(g.srv.Close)
	return g
}

// URL is the server's base URL.
func (g *FakeGuest) URL() string { return g.srv.URL }

// Set changes the server's behaviour: f runs with the server locked.
func (g *FakeGuest) Set(f func(g *FakeGuest)) {
	g.mu.Lock()
	defer g.mu.Unlock()
	f(g)
}

// Calls is what the server was asked so far.
func (g *FakeGuest) Calls() GuestCalls {
	g.mu.Lock()
	defer g.mu.Unlock()
	c := g.calls
	c.Execs = append([]string(nil), c.Execs...)
	return c
}

// ServeHTTP answers one request.
func (g *FakeGuest) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	noSim, shotFail, execFail, delay, status := g.NoSim, g.ShotFail, g.ExecFail, g.ResetDelay, g.Status
	g.mu.Unlock()
	count := func(f func(c *GuestCalls)) {
		g.mu.Lock()
		f(&g.calls)
		g.mu.Unlock()
	}
	writeJSON := func(code int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		_ = json.NewEncoder(w).Encode(v)
	}
	if noSim && strings.HasPrefix(r.URL.Path, "/sim/") {
		http.NotFound(w, r)
		return
	}
	switch r.URL.Path {
	case "/screenshot":
		count(func(c *GuestCalls) { c.Screenshots++ })
		if shotFail {
			writeJSON(500, map[string]string{"status": "error", "message": "screenshot failed"})
			return
		}
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(PNG)
	case "/screen_size":
		count(func(c *GuestCalls) { c.Sizes++ })
		writeJSON(200, map[string]int{"width": 1280, "height": 800})
	case "/setup/execute", "/execute":
		var body struct {
			Command any  `json:"command"`
			Shell   bool `json:"shell"`
		}
		_ = json.NewDecoder(r.Body).Decode(&body)
		count(func(c *GuestCalls) { c.Execs = append(c.Execs, fmt.Sprint(body.Command)) })
		if execFail {
			writeJSON(500, map[string]any{"status": "error", "message": "nmcli: command not found"})
			return
		}
		writeJSON(200, map[string]any{"status": "success", "output": "", "error": "", "returncode": 0})
	case "/sim/reset":
		if r.Method != http.MethodPost {
			w.WriteHeader(http.StatusMethodNotAllowed)
			return
		}
		select {
		case <-time.After(delay):
		case <-r.Context().Done():
			return
		}
		g.Set(func(g *FakeGuest) { g.calls.Resets++; g.Status = "" })
		writeJSON(200, map[string]string{"status": "success"})
	case "/sim/health":
		if status == "" {
			// The simulator reports its app server; this fake is both.
			writeJSON(200, map[string]any{"status": "ok", "simulator": true, "app_url": g.srv.URL})
			return
		}
		writeJSON(503, map[string]any{"status": status, "simulator": true})
	default:
		http.NotFound(w, r)
	}
}
