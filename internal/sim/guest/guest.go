// Package guest is part of codapipe's SIMULATOR (see package sim): the
// guest server of a simulated machine, speaking the OSWorld/ScienceBoard
// guest HTTP protocol (docs/guest-protocol.md) over a desktop.Machine, with
// fault and latency injection, boot and revert times, and the
// simulator-only control endpoints under /sim/. It answers GET /platform
// with "Linux (codapipe simulator)".
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
	"path"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
)

// Platform is what the simulated guest answers on GET /platform. The
// real guest answers Python's platform.system() ("Linux") as plain text;
// the simulator says what it is.
const Platform = "Linux (codapipe simulator)"

// DefaultExecLimit is the real guest's limit on one /execute command.
const DefaultExecLimit = 120 * time.Second

// Death modes of a simulated guest (Config.DeathMode).
const (
	DeathHang  = "hang"  // every call hangs until the client gives up
	DeathReset = "reset" // every connection is reset without an answer
)

// Config configures a simulated guest server: fault injection and
// simulated time. The zero value is a healthy guest that boots at once.
type Config struct {
	// Faults apply to every protocol call (not to /sim/ control calls).
	Faults fault.Faults `json:"faults"`
	// Endpoints replace Faults for one path ("/screenshot", "/execute",
	// "/accessibility", "/dump", ...).
	Endpoints map[string]fault.Faults `json:"endpoints,omitempty"`
	// BootTime is how long the guest takes to come up after it is created;
	// until then protocol calls answer 503 (a real guest refuses the
	// connection) and /sim/health says "booting".
	BootTime fault.Dist `json:"boot_time"`
	// RevertTime is how long POST /sim/reset takes (a snapshot revert); the
	// call blocks that long and protocol calls answer 503 meanwhile.
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

// handler is the simulated guest: the OSWorld/ScienceBoard guest
// protocol over one Machine, plus the /sim/ control endpoints.
type handler struct {
	m         desktop.Machine
	clock     fault.Clock
	execLimit time.Duration
	cfgErr    error

	resetMu sync.Mutex // one revert at a time

	mu         sync.Mutex
	rng        *rand.Rand
	fc         faultConfig
	revertTime fault.Dist
	readyAt    time.Time // booting until then
	reverting  bool
	dead       bool
	stats      callStats
}

// callStats is what GET /sim/stats reports.
type callStats struct {
	Calls    map[string]int `json:"calls"`   // protocol calls by path, faulted ones included
	Latency  time.Duration  `json:"latency"` // injected latency, simulated
	Hangs    int            `json:"hangs"`
	Errors   int            `json:"errors"`    // injected HTTP 500s
	Deaths   int            `json:"deaths"`    // times the VM died
	DeadHits int            `json:"dead_hits"` // calls that met a dead VM
	Busy     int            `json:"busy"`      // calls answered 503 while booting or reverting
	Resets   int            `json:"resets"`
}

// NewHandler returns the simulated guest server of m: the
// OSWorld/ScienceBoard guest protocol (port 5000 in a real VM), the
// ScienceBoard app-state endpoints (port 8000 in a real VM; here on the
// same server, delegated to m.AppState), and the simulator-only control
// endpoints under /sim/. The guest starts booting now (cfg.BootTime). An
// invalid cfg makes every call answer 500 with the reason; Start
// reports it instead. docs/guest-protocol.md lists the endpoints.
func NewHandler(m desktop.Machine, cfg Config) http.Handler {
	s := &handler{
		m:          m,
		clock:      cfg.Clock,
		execLimit:  cfg.ExecLimit,
		cfgErr:     cfg.Validate(),
		rng:        rand.New(rand.NewPCG(cfg.Seed, 0x67756573745f7376)), // "guest_sv"
		fc:         cfg.faults(),
		revertTime: cfg.RevertTime,
		stats:      callStats{Calls: map[string]int{}},
	}
	if s.execLimit == 0 {
		s.execLimit = DefaultExecLimit
	}
	if s.cfgErr == nil {
		s.readyAt = time.Now().Add(s.clock.Real(cfg.BootTime.Sample(s.rng)))
	}
	return s
}

// ShutdownGrace is how long a server started by Start waits for calls in
// flight after its context ends before it closes their connections.
const ShutdownGrace = 2 * time.Second

// Server is a guest server started by Start.
type Server struct {
	// URL is the server's base URL, "http://127.0.0.1:PORT".
	URL string

	done chan struct{}
}

// Done is closed when the server has stopped, after Start's context
// ended: the listener and every connection are closed, every goroutine
// Start created has returned, and no call of the handler is running (the
// machine is no longer touched by this server).
func (s *Server) Done() <-chan struct{} { return s.done }

// Wait blocks until the server has stopped (Done is closed).
func (s *Server) Wait() { <-s.done }

// Start serves NewHandler(m, cfg) on a loopback port until ctx ends. The
// returned Server has the base URL ("http://127.0.0.1:PORT") and lets the
// caller wait until the server has stopped; calls in flight when ctx ends
// (hung ones included) end with it.
func Start(ctx context.Context, m desktop.Machine, cfg Config) (*Server, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("guest: %w", err)
	}
	h := &inFlight{h: NewHandler(m, cfg)}
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       2 * time.Minute,
		WriteTimeout:      10 * time.Minute,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          log.New(io.Discard, "", 0),
	}
	s := &Server{URL: "http://" + ln.Addr().String(), done: make(chan struct{})}
	served := make(chan struct{})
	go func() {
		defer close(served)
		_ = srv.Serve(ln) // returns once Shutdown or Close has closed ln
	}()
	go func() {
		defer close(s.done)
		<-ctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), ShutdownGrace)
		defer cancel()
		if srv.Shutdown(sctx) != nil {
			_ = srv.Close()
		}
		<-served
		h.stop()
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

// route is one endpoint.
type route struct {
	methods string // "GET", "POST", "GET POST"
	sim     bool   // control endpoint: no faults, works on a dead VM
	h       func(s *handler, w http.ResponseWriter, r *http.Request)
}

var routes = map[string]route{
	"/screenshot":      {methods: "GET", h: (*handler).screenshot},
	"/execute":         {methods: "POST", h: (*handler).execute},
	"/setup/execute":   {methods: "POST", h: (*handler).execute},
	"/setup/launch":    {methods: "POST", h: (*handler).launch},
	"/platform":        {methods: "GET", h: (*handler).platform},
	"/screen_size":     {methods: "GET POST", h: (*handler).screenSize},
	"/cursor_position": {methods: "GET", h: (*handler).cursor},
	"/accessibility":   {methods: "GET", h: (*handler).accessibility},
	"/file":            {methods: "POST", h: (*handler).download},
	"/setup/upload":    {methods: "POST", h: (*handler).upload},

	"/sim/health": {methods: "GET", sim: true, h: (*handler).health},
	"/sim/state":  {methods: "GET", sim: true, h: (*handler).state},
	"/sim/reset":  {methods: "POST", sim: true, h: (*handler).reset},
	"/sim/stats":  {methods: "GET", sim: true, h: (*handler).statsHandler},
	"/sim/faults": {methods: "GET PUT", sim: true, h: (*handler).faultsHandler},
}

// appStateRoute serves every path the protocol does not name: the
// app-state endpoints, delegated to Machine.AppState (which answers 404
// for paths it does not know).
var appStateRoute = route{methods: "GET POST", h: (*handler).appState}

func (s *handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if s.cfgErr != nil {
		writeError(w, http.StatusInternalServerError, "simulator: invalid guest configuration: "+s.cfgErr.Error())
		return
	}
	rt, ok := routes[r.URL.Path]
	if !ok {
		if strings.HasPrefix(r.URL.Path, "/sim/") {
			writeError(w, http.StatusNotFound, "simulator: no control endpoint "+r.URL.Path)
			return
		}
		rt = appStateRoute
	}
	if !strings.Contains(" "+rt.methods+" ", " "+r.Method+" ") {
		w.Header().Set("Allow", strings.ReplaceAll(rt.methods, " ", ", "))
		writeError(w, http.StatusMethodNotAllowed, fmt.Sprintf("method %s not allowed on %s", r.Method, r.URL.Path))
		return
	}
	// Read the body first: net/http notices a client that gave up only
	// once the body is consumed, and a hung or dead guest waits for that.
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxRequestBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad request: reading the body: "+err.Error())
		return
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	if !rt.sim && !s.admit(w, r) {
		return
	}
	rt.h(s, w, r)
}

// admit applies the guest's condition and the injected faults to one
// protocol call; false means the call was answered (or abandoned).
func (s *handler) admit(w http.ResponseWriter, r *http.Request) bool {
	p := r.URL.Path
	s.mu.Lock()
	if busy := s.busyLocked(); busy != "" {
		s.stats.Busy++
		s.mu.Unlock()
		writeError(w, http.StatusServiceUnavailable, "simulator: guest is "+busy)
		return false
	}
	if s.dead {
		s.stats.DeadHits++
		mode := s.fc.DeathMode
		s.mu.Unlock()
		s.die(w, r, mode)
		return false
	}
	s.stats.Calls[p]++
	f, ok := s.fc.Endpoints[p]
	if !ok {
		f = s.fc.Faults
	}
	dies := s.rng.Float64() < s.fc.DieProb
	outcome, lat := f.Draw(s.rng)
	if dies {
		s.dead = true
		s.stats.Deaths++
		mode := s.fc.DeathMode
		s.mu.Unlock()
		s.die(w, r, mode)
		return false
	}
	s.stats.Latency += lat
	switch outcome {
	case fault.Hang:
		s.stats.Hangs++
	case fault.Error, fault.RateLimit:
		s.stats.Errors++
	}
	s.mu.Unlock()

	ctx := r.Context()
	if s.clock.Sleep(ctx, lat) != nil {
		abandon()
	}
	switch outcome {
	case fault.Hang:
		f.Hang(ctx, s.clock)
		if ctx.Err() != nil {
			abandon()
		}
	case fault.Error, fault.RateLimit:
		writeError(w, http.StatusInternalServerError, "simulator: injected fault on "+p)
		return false
	}
	return true
}

// busyLocked says why protocol calls cannot be served now ("reverting",
// "booting"), or "".
func (s *handler) busyLocked() string {
	switch {
	case s.reverting:
		return "reverting"
	case time.Now().Before(s.readyAt):
		return "booting"
	}
	return ""
}

// die fails a call on a dead VM.
func (s *handler) die(w http.ResponseWriter, r *http.Request, mode string) {
	if mode == DeathReset {
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			if tc, ok := conn.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // RST, not FIN
			}
			_ = conn.Close()
			return
		}
	}
	<-r.Context().Done()
	abandon()
}

// abandon ends a call whose client left or whose server is stopping
// without an answer: the connection is dropped (an unwritten handler
// would answer an empty 200).
func abandon() { panic(http.ErrAbortHandler) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"status":"error","message":"simulator: encoding the answer failed"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// writeError answers {"status":"error","message":msg}, the guest's error
// shape.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"status": "error", "message": msg})
}

func (s *handler) screenshot(w http.ResponseWriter, r *http.Request) {
	png, err := s.m.Screenshot()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "screenshot failed: "+err.Error())
		return
	}
	w.Header().Set("Content-Type", "image/png")
	_, _ = w.Write(png)
}

func (s *handler) platform(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, Platform)
}

func (s *handler) screenSize(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]int{"width": desktop.ScreenW, "height": desktop.ScreenH})
}

func (s *handler) cursor(w http.ResponseWriter, r *http.Request) {
	p := s.m.Cursor()
	writeJSON(w, http.StatusOK, []int{p.X, p.Y})
}

func (s *handler) accessibility(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"AT": s.m.Accessibility()})
}

// download serves POST /file (form field file_path) from the simulated
// file system, through Machine.Shell.
func (s *handler) download(w http.ResponseWriter, r *http.Request) {
	p := r.PostFormValue("file_path")
	if p == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "file_path is required"})
		return
	}
	out, rc := s.m.Shell("cat " + desktop.ShellQuote(p))
	if rc != 0 {
		writeJSON(w, http.StatusNotFound, map[string]string{"error": "File not found"})
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.WriteString(w, out)
}

// upload serves POST /setup/upload (multipart file_path, file_data) into
// the simulated file system, which holds text: binary data is refused.
func (s *handler) upload(w http.ResponseWriter, r *http.Request) {
	p := r.FormValue("file_path")
	f, _, err := r.FormFile("file_data")
	if p == "" || err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "file_path and file_data are required"})
		return
	}
	data, err := io.ReadAll(f)
	if err != nil {
		writeJSON(w, http.StatusBadRequest, map[string]string{"error": "reading file_data: " + err.Error()})
		return
	}
	if !utf8.Valid(data) || bytes.IndexByte(data, 0) >= 0 {
		writeJSON(w, http.StatusUnsupportedMediaType, map[string]string{"error": "simulator: the simulated file system holds text only"})
		return
	}
	line := "printf '%s' " + desktop.ShellQuote(string(data)) + " > " + desktop.ShellQuote(p)
	if dir := path.Dir(p); dir != "." && dir != "/" {
		line = "mkdir -p " + desktop.ShellQuote(dir) + " && " + line
	}
	if out, rc := s.m.Shell(line); rc != 0 {
		writeJSON(w, http.StatusInternalServerError, map[string]string{"error": "Failed to upload file: " + strings.TrimSpace(out)})
		return
	}
	_, _ = fmt.Fprintf(w, "File Uploaded: %d bytes", len(data))
}

const maxRequestBody = 8 << 20

func (s *handler) appState(w http.ResponseWriter, r *http.Request) {
	var body []byte
	if r.Method == http.MethodPost {
		body, _ = io.ReadAll(r.Body) // in memory already (ServeHTTP)
	}
	p := r.URL.Path
	if r.URL.RawQuery != "" {
		p += "?" + r.URL.RawQuery
	}
	resp, status := s.m.AppState(p, body)
	if status == http.StatusNotFound && len(resp) == 0 {
		writeError(w, http.StatusNotFound, "not found: "+r.URL.Path)
		return
	}
	if status == 0 {
		status = http.StatusOK
	}
	ct := "text/plain; charset=utf-8"
	if json.Valid(resp) {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(status)
	_, _ = w.Write(resp)
}

// command is the body of /execute, /setup/execute and /setup/launch.
type command struct {
	line  string   // the command as a string, when given so
	argv  []string // the command as a list, when given so
	isStr bool
	shell bool
}

// readCommand decodes {"command": string | [string], "shell": bool};
// a bad body is answered 400.
func readCommand(w http.ResponseWriter, r *http.Request) (command, bool) {
	var req struct {
		Command json.RawMessage `json:"command"`
		Shell   bool            `json:"shell"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "bad request: body is not valid JSON: "+err.Error())
		return command{}, false
	}
	c := command{shell: req.Shell}
	if len(req.Command) == 0 || string(req.Command) == "null" {
		writeError(w, http.StatusBadRequest, `bad request: missing "command"`)
		return c, false
	}
	if json.Unmarshal(req.Command, &c.line) == nil {
		c.isStr = true
	} else if json.Unmarshal(req.Command, &c.argv) != nil {
		writeError(w, http.StatusBadRequest, `bad request: "command" must be a string or a list of strings`)
		return c, false
	}
	if (c.isStr && strings.TrimSpace(c.line) == "") || (!c.isStr && len(c.argv) == 0) {
		writeError(w, http.StatusBadRequest, `bad request: empty "command"`)
		return c, false
	}
	return c, true
}

// text is the command as a command line.
func (c command) text() string {
	if c.isStr {
		return c.line
	}
	if c.shell { // Popen(list, shell=True) runs list[0] through the shell
		return c.argv[0]
	}
	parts := make([]string, len(c.argv))
	for i, a := range c.argv {
		parts[i] = desktop.ShellQuote(a)
	}
	return strings.Join(parts, " ")
}

// pyArgv reports python[3[.x]] -c CODE.
var pyProgram = regexp.MustCompile(`^python(\d+(\.\d+)?)?$`)

func pythonCode(argv []string) (string, bool) {
	if len(argv) >= 3 && pyProgram.MatchString(path.Base(argv[0])) && argv[1] == "-c" {
		return argv[2], true
	}
	return "", false
}

// execResult is the guest's answer to a command that ran.
type execResult struct {
	Status     string `json:"status"`
	Output     string `json:"output"`
	Error      string `json:"error"`
	ReturnCode int    `json:"returncode"`
}

// execute serves /execute and /setup/execute as the real guest does:
// 200 {"status":"success", output, error, returncode} for a command that
// ran (whatever its exit code), 500 {"status":"error","message"} for one
// that could not run (program not found, 120 s limit).
func (s *handler) execute(w http.ResponseWriter, r *http.Request) {
	c, ok := readCommand(w, r)
	if !ok {
		return
	}
	argv := c.argv
	if c.isStr {
		split, err := shlexSplit(c.line)
		switch {
		case err == nil:
			argv = split
		case !c.shell:
			writeError(w, http.StatusInternalServerError, err.Error()) // shlex's ValueError
			return
		}
	} else if c.shell {
		argv, _ = shlexSplit(c.argv[0])
	}
	code, isPy := pythonCode(argv)
	if isPy && c.shell && len(argv) != 3 {
		isPy = false // a shell line doing more than run python -c
	}
	if !isPy && c.isStr && strings.Contains(c.line, "pyautogui.") {
		// Simulator leniency: bare pyautogui code as the command.
		code, isPy = c.line, true
	}
	if isPy {
		s.runPython(w, r, c, code)
		return
	}
	line, direct := c.text(), !c.shell
	if direct && len(argv) >= 3 && (path.Base(argv[0]) == "sh" || path.Base(argv[0]) == "bash") && argv[1] == "-c" {
		line, direct = argv[2], false
	}
	out, rc := s.m.Shell(line)
	if rc == 127 && direct && len(argv) > 0 {
		// Without a shell, Python raises FileNotFoundError.
		writeError(w, http.StatusInternalServerError, fmt.Sprintf("[Errno 2] No such file or directory: '%s'", argv[0]))
		return
	}
	res := execResult{Status: "success", ReturnCode: rc}
	if rc == 0 {
		res.Output = out
	} else {
		res.Error = out
	}
	writeJSON(w, http.StatusOK, res)
}

// runPython runs pyautogui code: parsed into input events applied to the
// machine in order, time.sleep through the clock, within ExecLimit.
func (s *handler) runPython(w http.ResponseWriter, r *http.Request, c command, code string) {
	events, err := desktop.ParsePyAutoGUI(code)
	if err != nil {
		writeJSON(w, http.StatusOK, execResult{Status: "success", ReturnCode: 1,
			Error: "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n" + pyErrorLine(err)})
		return
	}
	var slept time.Duration
	for _, ev := range events {
		if ev.Kind == desktop.EvSleep {
			d := time.Duration(ev.Seconds * float64(time.Second))
			if slept+d > s.execLimit {
				if s.clock.Sleep(r.Context(), s.execLimit-slept) != nil {
					abandon()
				}
				writeError(w, http.StatusInternalServerError,
					fmt.Sprintf("Command %s timed out after %g seconds", pyRepr(c), s.execLimit.Seconds()))
				return
			}
			slept += d
			if s.clock.Sleep(r.Context(), d) != nil {
				abandon()
			}
			continue
		}
		if err := s.m.Input(ev); err != nil {
			err = fmt.Errorf("simulator: %s: %w", ev.Kind, err)
			writeJSON(w, http.StatusOK, execResult{Status: "success", ReturnCode: 1,
				Error: "Traceback (most recent call last):\n  File \"<string>\", line 1, in <module>\n" + pyErrorLine(err)})
			return
		}
	}
	writeJSON(w, http.StatusOK, execResult{Status: "success"})
}

// pyErrorLine renders err as the last line of a Python traceback.
func pyErrorLine(err error) string {
	return "Exception: " + strings.ReplaceAll(err.Error(), "\n", " ")
}

// pyRepr renders the command as Python would in a TimeoutExpired message.
func pyRepr(c command) string {
	if c.isStr {
		return fmt.Sprintf("'%s'", c.line)
	}
	parts := make([]string, len(c.argv))
	for i, a := range c.argv {
		parts[i] = fmt.Sprintf("'%s'", a)
	}
	return "[" + strings.Join(parts, ", ") + "]"
}

// launch serves /setup/launch: Machine.Launch, without waiting.
func (s *handler) launch(w http.ResponseWriter, r *http.Request) {
	c, ok := readCommand(w, r)
	if !ok {
		return
	}
	line := c.text()
	if err := s.m.Launch(line); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = io.WriteString(w, line+" launched successfully")
}

// health serves GET /sim/health: {"status": "ok" | "booting" |
// "reverting" | "dead", "simulator": true}, 200 when ok, 503 otherwise.
func (s *handler) health(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	status := s.busyLocked()
	switch {
	case status != "":
	case s.dead:
		status = "dead"
	default:
		status = "ok"
	}
	s.mu.Unlock()
	code := http.StatusOK
	if status != "ok" {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, map[string]any{"status": status, "simulator": true, "platform": Platform})
}

func (s *handler) state(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.m.State())
}

// reset serves POST /sim/reset: a snapshot revert that takes RevertTime
// (simulated), then Machine.Reset; the VM is alive again. A client that
// gives up during the revert abandons it: nothing changes.
func (s *handler) reset(w http.ResponseWriter, r *http.Request) {
	s.resetMu.Lock()
	defer s.resetMu.Unlock()
	s.mu.Lock()
	d := s.revertTime.Sample(s.rng)
	s.reverting = true
	s.mu.Unlock()
	err := s.clock.Sleep(r.Context(), d)
	s.mu.Lock()
	s.reverting = false
	if err == nil {
		s.m.Reset()
		s.dead = false
		s.stats.Resets++
	}
	s.mu.Unlock()
	if err != nil {
		abandon()
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "success", "revert_time": d.String()})
}

func (s *handler) statsHandler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	st := s.stats
	st.Calls = make(map[string]int, len(s.stats.Calls))
	for k, v := range s.stats.Calls {
		st.Calls[k] = v
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, st)
}

// faultsHandler serves GET /sim/faults (the fault settings now) and PUT
// /sim/faults: the fields given (faults, endpoints, die_prob, death_mode)
// replace the current ones; endpoints merge by path. A dead VM stays dead
// until POST /sim/reset.
func (s *handler) faultsHandler(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if r.Method == http.MethodPut {
		fc := s.fc
		fc.Endpoints = make(map[string]fault.Faults, len(s.fc.Endpoints))
		for k, v := range s.fc.Endpoints {
			fc.Endpoints[k] = v
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
		s.fc = fc
	}
	writeJSON(w, http.StatusOK, s.fc)
}

// shlexSplit splits a command line as Python's shlex.split (POSIX mode,
// no comments) does, which is how the real guest reads a string command
// without shell=True. Unlike the simulated shell (desktop.Machine.Shell)
// it knows no operators and no ~.
func shlexSplit(s string) ([]string, error) {
	var (
		out   []string
		cur   strings.Builder
		inTok bool
	)
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r':
			if inTok {
				out = append(out, cur.String())
				cur.Reset()
				inTok = false
			}
		case ch == '\\':
			if i+1 >= len(s) {
				return nil, errors.New("No escaped character")
			}
			i++
			cur.WriteByte(s[i])
			inTok = true
		case ch == '\'':
			j := strings.IndexByte(s[i+1:], '\'')
			if j < 0 {
				return nil, errors.New("No closing quotation")
			}
			cur.WriteString(s[i+1 : i+1+j])
			i += j + 1
			inTok = true
		case ch == '"':
			i++
			for ; i < len(s) && s[i] != '"'; i++ {
				if s[i] == '\\' && i+1 < len(s) && strings.IndexByte("\\\"$`\n", s[i+1]) >= 0 {
					i++
				}
				cur.WriteByte(s[i])
			}
			if i >= len(s) {
				return nil, errors.New("No closing quotation")
			}
			inTok = true
		default:
			cur.WriteByte(ch)
			inTok = true
		}
	}
	if inTok {
		out = append(out, cur.String())
	}
	return out, nil
}
