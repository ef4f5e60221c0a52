// Package guest is part of codapipe's SIMULATOR (see package sim): the two
// HTTP servers of a simulated ScienceBoard VM over a desktop.Machine, with
// fault and latency injection, boot and revert times, and the
// simulator-only control endpoints under /sim/.
//
// A real ScienceBoard VM runs two servers, and so does a simulated one
// (docs/guest-protocol.md, docs/simulator.md):
//
//   - the guest server (port 5000, ScienceBoard's vm_config/server.py, a
//     Flask app run with debug=True): /setup/execute (alias /execute),
//     /setup/launch, /setup/upload, /screenshot, /platform, /screen_size,
//     /cursor_position, /accessibility, /file, /opt, /read, /write,
//     /append, /chimerax/run, /lean/check, /tex/check — with that server's
//     bodies, replies and status codes, Flask's HTML error pages for
//     unknown paths and unhandled exceptions included (routes.go);
//   - the app server (port 8000): the running application's own server
//     (ScienceBoard's modified KAlgebra, Celestia or GRASS GIS GUI, or
//     ChimeraX's REST server), which Machine.AppServe answers; with no app
//     running nothing listens there and connections are refused (app.go).
//
// Start serves both on loopback ports; Local and Server.Caller serve a
// scienceboard.Request through the same handlers without a network
// (local.go). The guest answers GET /platform with "Linux (codapipe
// simulator)".
package guest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
)

// Platform is what the simulated guest answers on GET /platform. The
// real guest answers Python's platform.system() ("Linux") as plain text;
// the simulator says what it is.
const Platform = "Linux (codapipe simulator)"

// DefaultExecLimit is the real guest's limit on one /execute command.
const DefaultExecLimit = 120 * time.Second

// DefaultMaxDepth is the accessibility tree's depth limit of a freshly
// started guest server (server.py's MAX_DEPTH); POST /opt changes it.
const DefaultMaxDepth = 50

// Death modes of a simulated guest (Config.DeathMode).
const (
	DeathHang  = "hang"  // every call hangs until the client gives up
	DeathReset = "reset" // every connection is reset without an answer
)

// Config configures a simulated VM's servers: fault injection and
// simulated time. The zero value is a healthy VM that boots at once.
type Config struct {
	// Faults apply to every protocol call of either server (not to /sim/
	// control calls).
	Faults fault.Faults `json:"faults"`
	// Endpoints replace Faults for one path of either server
	// ("/screenshot", "/execute", "/accessibility", "/dump", "/run", ...;
	// the two servers share no path).
	Endpoints map[string]fault.Faults `json:"endpoints,omitempty"`
	// BootTime is how long the VM takes to come up after it is created;
	// until then guest server calls answer 503, the app server refuses
	// connections, and /sim/health says "booting".
	BootTime fault.Dist `json:"boot_time"`
	// RevertTime is how long POST /sim/reset takes (a snapshot revert); the
	// call blocks that long and protocol calls are refused meanwhile.
	RevertTime fault.Dist `json:"revert_time"`
	// DieProb is the probability that a protocol call kills the VM: that
	// call and every later one fails (DeathMode) until POST /sim/reset.
	DieProb float64 `json:"die_prob,omitempty"`
	// DeathMode is how a dead VM fails: DeathHang (default) or DeathReset.
	DeathMode string `json:"death_mode,omitempty"`
	// ExecLimit is the guest's limit on one command, in simulated time
	// (default 120 s, as the real guest); a command whose time.sleep calls
	// exceed it answers 500 as subprocess.TimeoutExpired does.
	ExecLimit time.Duration `json:"exec_limit,omitempty"`
	// Clock scales every simulated duration (latency, boot, revert, hangs
	// with HangFor, time.sleep in pyautogui code) to wall time.
	Clock fault.Clock `json:"clock"`
	// Seed seeds the fault draws. Draws happen per protocol call in arrival
	// order (die, then Faults.Draw), so a sequential run is reproducible.
	Seed uint64 `json:"seed"`
	// Record, when set, is called with every protocol request either
	// server receives (not the /sim/ control calls), once its body is read
	// and before faults apply; calls may be concurrent. The guest server's
	// own request to the app server (/chimerax/run) is recorded too. For
	// tests.
	Record func(Recorded) `json:"-"`
}

// Recorded is one request a simulated server received (Config.Record).
type Recorded struct {
	// Server is scienceboard.GuestServer or scienceboard.AppServer.
	Server      string
	Method      string
	Path        string
	Query       url.Values
	ContentType string
	Body        []byte
}

// faultConfig is the part of Config that PUT /sim/faults replaces.
type faultConfig struct {
	Faults    fault.Faults            `json:"faults"`
	Endpoints map[string]fault.Faults `json:"endpoints,omitempty"`
	DieProb   float64                 `json:"die_prob,omitempty"`
	DeathMode string                  `json:"death_mode,omitempty"`
}

func (f faultConfig) validate() error {
	if err := f.Faults.Validate(); err != nil {
		return err
	}
	for p, ef := range f.Endpoints {
		if !strings.HasPrefix(p, "/") {
			return fmt.Errorf("guest: endpoint %q: want a path starting with /", p)
		}
		if err := ef.Validate(); err != nil {
			return fmt.Errorf("guest: endpoint %s: %w", p, err)
		}
	}
	if !(f.DieProb >= 0 && f.DieProb <= 1) {
		return fmt.Errorf("guest: die_prob = %v, want a probability in [0,1]", f.DieProb)
	}
	switch f.DeathMode {
	case "", DeathHang, DeathReset:
	default:
		return fmt.Errorf("guest: death_mode %q, want %q or %q", f.DeathMode, DeathHang, DeathReset)
	}
	return nil
}

// Validate reports a configuration that cannot run.
func (c Config) Validate() error {
	if err := c.faults().validate(); err != nil {
		return err
	}
	if err := c.BootTime.Validate(); err != nil {
		return fmt.Errorf("guest: boot_time: %w", err)
	}
	if err := c.RevertTime.Validate(); err != nil {
		return fmt.Errorf("guest: revert_time: %w", err)
	}
	if c.ExecLimit < 0 {
		return fmt.Errorf("guest: exec_limit %v is negative", c.ExecLimit)
	}
	return nil
}

func (c Config) faults() faultConfig {
	return faultConfig{Faults: c.Faults, Endpoints: c.Endpoints, DieProb: c.DieProb, DeathMode: c.DeathMode}
}

// vm is the state one simulated VM's two servers share: the machine, its
// condition (booting, reverting, dead), the fault draws, the statistics
// and the guest server's process state (MAX_DEPTH).
type vm struct {
	m         desktop.Machine
	clock     fault.Clock
	execLimit time.Duration
	cfgErr    error
	record    func(Recorded)

	resetMu sync.Mutex // one revert at a time

	mu         sync.Mutex
	rng        *rand.Rand
	fc         faultConfig
	revertTime fault.Dist
	readyAt    time.Time // booting until then
	reverting  bool
	dead       bool
	stats      callStats
	maxDepth   int    // the accessibility tree's depth limit; < 0: none (POST /opt)
	appURL     string // the app server's base URL once Start serves it
}

// callStats is what GET /sim/stats reports.
type callStats struct {
	Calls    map[string]int `json:"calls"`   // protocol calls by path (either server), faulted ones included
	Latency  time.Duration  `json:"latency"` // injected latency, simulated
	Hangs    int            `json:"hangs"`
	Errors   int            `json:"errors"`    // injected HTTP 500s
	Deaths   int            `json:"deaths"`    // times the VM died
	DeadHits int            `json:"dead_hits"` // calls that met a dead VM
	Busy     int            `json:"busy"`      // calls refused while booting or reverting
	Resets   int            `json:"resets"`
}

// Handlers are the two HTTP servers of one simulated VM over one machine.
// They share the VM's condition (booting, reverting, dead), its fault
// draws and statistics, and the guest server's state.
type Handlers struct {
	// Guest is the guest server (port 5000 in a real VM), with the
	// simulator-only control endpoints under /sim/.
	Guest http.Handler
	// App is the app server (port 8000 in a real VM).
	App http.Handler

	v   *vm
	app *appHandler
}

// NewHandlers returns the two servers of a simulated VM running m. The VM
// starts booting now (cfg.BootTime). An invalid cfg makes every call
// answer 500 with the reason; Start reports it instead.
// docs/guest-protocol.md lists the endpoints.
func NewHandlers(m desktop.Machine, cfg Config) *Handlers {
	v := &vm{
		m:          m,
		clock:      cfg.Clock,
		execLimit:  cfg.ExecLimit,
		cfgErr:     cfg.Validate(),
		record:     cfg.Record,
		rng:        rand.New(rand.NewPCG(cfg.Seed, 0x67756573745f7376)), // "guest_sv"
		fc:         cfg.faults(),
		revertTime: cfg.RevertTime,
		stats:      callStats{Calls: map[string]int{}},
		maxDepth:   DefaultMaxDepth,
	}
	if v.execLimit == 0 {
		v.execLimit = DefaultExecLimit
	}
	if v.cfgErr == nil {
		v.readyAt = time.Now().Add(v.clock.Real(cfg.BootTime.Sample(v.rng)))
	}
	app := &appHandler{v: v}
	return &Handlers{Guest: &guestHandler{v: v, app: app}, App: app, v: v, app: app}
}

// NewHandler returns the guest server of a simulated VM running m:
// NewHandlers(m, cfg).Guest. Its /chimerax/run reaches the VM's app
// server in-process.
func NewHandler(m desktop.Machine, cfg Config) http.Handler { return NewHandlers(m, cfg).Guest }

// ShutdownGrace is how long a server started by Start waits for calls in
// flight after its context ends before it closes their connections.
const ShutdownGrace = 2 * time.Second

// Server is a simulated VM's pair of servers started by Start.
type Server struct {
	// URL is the guest server's base URL, "http://127.0.0.1:PORT" (port
	// 5000 in a real VM).
	URL string
	// AppURL is the app server's base URL, "http://127.0.0.1:PORT" (port
	// 8000 in a real VM): pass it as the guest client's StateURL.
	AppURL string

	h    *Handlers
	done chan struct{}
}

// Done is closed when both servers have stopped, after Start's context
// ended: the listeners and every connection are closed, every goroutine
// Start created has returned, and no call of a handler is running (the
// machine is no longer touched by these servers).
func (s *Server) Done() <-chan struct{} { return s.done }

// Wait blocks until the servers have stopped (Done is closed).
func (s *Server) Wait() { <-s.done }

// Caller returns an in-process caller of the same two handlers (shared
// state and faults), which needs no network: see Local.
func (s *Server) Caller() scienceboard.Caller { return s.h.Caller() }

// Start serves NewHandlers(m, cfg) on two loopback ports until ctx ends:
// the guest server at Server.URL and the app server at Server.AppURL.
// The returned Server lets the caller wait until both have stopped;
// calls in flight when ctx ends (hung ones included) end with it.
func Start(ctx context.Context, m desktop.Machine, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	gln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("guest: guest server: %w", err)
	}
	aln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		_ = gln.Close()
		return nil, fmt.Errorf("guest: app server: %w", err)
	}
	h := NewHandlers(m, cfg)
	s := &Server{URL: "http://" + gln.Addr().String(), AppURL: "http://" + aln.Addr().String(), h: h, done: make(chan struct{})}
	h.v.mu.Lock()
	h.v.appURL = s.AppURL
	h.v.mu.Unlock()

	type served struct {
		srv  *http.Server
		h    *inFlight
		done chan struct{}
	}
	var all []served
	for _, p := range []struct {
		ln net.Listener
		h  http.Handler
	}{{gln, h.Guest}, {aln, h.App}} {
		f := &inFlight{h: p.h}
		srv := &http.Server{
			Handler:           f,
			ReadHeaderTimeout: 10 * time.Second,
			ReadTimeout:       2 * time.Minute,
			WriteTimeout:      10 * time.Minute,
			IdleTimeout:       2 * time.Minute,
			BaseContext:       func(net.Listener) context.Context { return ctx },
			ErrorLog:          log.New(io.Discard, "", 0),
		}
		sv := served{srv: srv, h: f, done: make(chan struct{})}
		go func(ln net.Listener) {
			defer close(sv.done)
			_ = srv.Serve(ln) // returns once Shutdown or Close has closed ln
		}(p.ln)
		all = append(all, sv)
	}
	go func() {
		defer close(s.done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
		defer cancel()
		var wg sync.WaitGroup
		for _, sv := range all {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if sv.srv.Shutdown(sctx) != nil {
					_ = sv.srv.Close()
				}
				<-sv.done
			}()
		}
		wg.Wait()
		for _, sv := range all {
			sv.h.stop()
		}
	}()
	return s, nil
}

// inFlight wraps a handler so that the server's owner can wait for the
// calls in flight: after stop no call runs, and later ones (a request read
// just before the connection was closed) are dropped.
type inFlight struct {
	h       http.Handler
	mu      sync.RWMutex
	stopped bool
	calls   sync.WaitGroup
}

func (f *inFlight) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.mu.RLock()
	if f.stopped {
		f.mu.RUnlock()
		abandon()
	}
	f.calls.Add(1)
	f.mu.RUnlock()
	defer f.calls.Done()
	f.h.ServeHTTP(w, r)
}

// stop refuses new calls and waits for the calls in flight.
func (f *inFlight) stop() {
	f.mu.Lock()
	f.stopped = true
	f.mu.Unlock()
	f.calls.Wait()
}

const maxRequestBody = 8 << 20

// readBody reads the request body into memory (net/http notices a client
// that gave up only once the body is consumed, and a hung or dead VM
// waits for that) and puts it back for the handler.
func readBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	if r.Body == nil { // a client request made in-process
		r.Body = http.NoBody
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		return nil, err
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// recordCall hands a received protocol request to Config.Record.
func (v *vm) recordCall(server string, r *http.Request, body []byte) {
	if v.record == nil {
		return
	}
	v.record(Recorded{Server: server, Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		ContentType: r.Header.Get("Content-Type"), Body: bytes.Clone(body)})
}

// admission is what admit decided about a protocol call.
type admission int

const (
	admitted admission = iota
	busy               // booting or reverting
	injected           // an injected error: answer 500
)

// admit applies the VM's condition and the injected faults to one
// protocol call: latency and hangs happen here, a dead VM fails the call
// here (never returns), and the caller answers busy and injected its
// server's way.
func (v *vm) admit(w http.ResponseWriter, r *http.Request) (admission, string) {
	p := r.URL.Path
	v.mu.Lock()
	if b := v.busyLocked(); b != "" {
		v.stats.Busy++
		v.mu.Unlock()
		return busy, b
	}
	if v.dead {
		v.stats.DeadHits++
		mode := v.fc.DeathMode
		v.mu.Unlock()
		v.die(w, r, mode)
	}
	v.stats.Calls[p]++
	f, ok := v.fc.Endpoints[p]
	if !ok {
		f = v.fc.Faults
	}
	dies := v.rng.Float64() < v.fc.DieProb
	outcome, lat := f.Draw(v.rng)
	if dies {
		v.dead = true
		v.stats.Deaths++
		mode := v.fc.DeathMode
		v.mu.Unlock()
		v.die(w, r, mode)
	}
	v.stats.Latency += lat
	switch outcome {
	case fault.Hang:
		v.stats.Hangs++
	case fault.Error, fault.RateLimit:
		v.stats.Errors++
	}
	v.mu.Unlock()

	ctx := r.Context()
	if v.clock.Sleep(ctx, lat) != nil {
		abandon()
	}
	switch outcome {
	case fault.Hang:
		f.Hang(ctx, v.clock)
		if ctx.Err() != nil {
			abandon()
		}
	case fault.Error, fault.RateLimit:
		return injected, "simulator: injected fault on " + p
	}
	return admitted, ""
}

// busyLocked says why protocol calls cannot be served now ("reverting",
// "booting"), or "".
func (v *vm) busyLocked() string {
	switch {
	case v.reverting:
		return "reverting"
	case time.Now().Before(v.readyAt):
		return "booting"
	}
	return ""
}

// die fails a call on a dead VM and never returns: DeathReset resets the
// connection (RST where the connection can be taken over, else it is
// dropped at once), DeathHang waits until the client gives up.
func (v *vm) die(w http.ResponseWriter, r *http.Request, mode string) {
	if mode == DeathReset {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			_ = conn.Close()
		}
		abandon()
	}
	<-r.Context().Done()
	abandon()
}

// abandon ends a call whose client left or whose server is stopping
// without an answer: the connection is dropped (an unwritten handler
// would answer an empty 200).
func abandon() { panic(http.ErrAbortHandler) }

// writeJSON answers v as compact JSON (the /sim/ control endpoints).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"status":"error","message":"simulator: encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers {"status":"error","message":msg}: the shape of the
// /sim/ control endpoints' errors.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"status": "error", "message": msg})
}

// simRoutes are the simulator-only control endpoints of the guest server.
var simRoutes = map[string]struct {
	methods string
	h       func(v *vm, w http.ResponseWriter, r *http.Request)
}{
	"/sim/health": {"GET", (*vm).health},
	"/sim/state":  {"GET", (*vm).state},
	"/sim/reset":  {"POST", (*vm).reset},
	"/sim/stats":  {"GET", (*vm).statsHandler},
	"/sim/faults": {"GET PUT", (*vm).faultsHandler},
}

// serveSim serves a /sim/ control call: no faults, no recording, and it
// works on a dead VM.
func (v *vm) serveSim(w http.ResponseWriter, r *http.Request) {
	rt, ok := simRoutes[r.URL.Path]
	if !ok {
		writeError(w, http.StatusNotFound, "simulator: no control endpoint "+r.URL.Path)
		return
	}
	if !strings.Contains(" "+rt.methods+" ", " "+r.Method+" ") {
		w.Header().Set("Allow", strings.ReplaceAll(rt.methods, " ", ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	if _, err := readBody(w, r); err != nil {
		writeError(w, http.StatusBadRequest, "bad request: reading the body: "+err.Error())
		return
	}
	rt.h(v, w, r)
}

// health serves GET /sim/health: {"status": "ok" | "booting" |
// "reverting" | "dead", "simulator": true, "platform", "app_url"}, 200
// when ok, 503 otherwise. app_url is the app server's base URL ("" when
// the handlers are not served by Start).
func (v *vm) health(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	status := v.busyLocked()
	switch {
	case status != "":
	case v.dead:
		status = "dead"
	default:
		status = "ok"
	}
	appURL := v.appURL
	v.mu.Unlock()
	code := http.StatusOK
	if status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "simulator": true, "platform": Platform, "app_url": appURL})
}

func (v *vm) state(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, v.m.State())
}

// reset serves POST /sim/reset: a snapshot revert that takes RevertTime
// (simulated), then Machine.Reset; the VM is alive again and its guest
// server restarted (MAX_DEPTH back to 50). A client that gives up during
// the revert abandons it: nothing changes.
func (v *vm) reset(w http.ResponseWriter, r *http.Request) {
	v.resetMu.Lock()
	defer v.resetMu.Unlock()
	v.mu.Lock()
	d := v.revertTime.Sample(v.rng)
	v.reverting = true
	v.mu.Unlock()
	err := v.clock.Sleep(r.Context(), d)
	v.mu.Lock()
	v.reverting = false
	if err == nil {
		v.m.Reset()
		v.dead = false
		v.maxDepth = DefaultMaxDepth
		v.stats.Resets++
	}
	v.mu.Unlock()
	if err != nil {
		abandon()
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "revert_time": d.String()})
}

func (v *vm) statsHandler(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	st := v.stats
	st.Calls = make(map[string]int, len(v.stats.Calls))
	for k, n := range v.stats.Calls {
		st.Calls[k] = n
	}
	v.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

// faultsHandler serves GET /sim/faults (the fault settings now) and PUT
// /sim/faults: the fields given (faults, endpoints, die_prob, death_mode)
// replace the current ones; endpoints merge by path. A dead VM stays dead
// until POST /sim/reset.
func (v *vm) faultsHandler(w http.ResponseWriter, r *http.Request) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if r.Method == http.MethodPut {
		fc := v.fc
		fc.Endpoints = make(map[string]fault.Faults, len(v.fc.Endpoints))
		for k, f := range v.fc.Endpoints {
			fc.Endpoints[k] = f
		}
		dec := json.NewDecoder(r.Body)
		dec.DisallowUnknownFields()
		if err := dec.Decode(&fc); err != nil {
			writeError(w, http.StatusBadRequest, "bad request: "+err.Error())
			return
		}
		if err := fc.validate(); err != nil {
			writeError(w, http.StatusBadRequest, err.Error())
			return
		}
		v.fc = fc
	}
	writeJSON(w, http.StatusOK, v.fc)
}

// errNoAnswer is a call the server dropped without an answer.
var errNoAnswer = errors.New("the server closed the connection without an answer")
