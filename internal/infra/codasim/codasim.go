// Package codasim is the SIMULATOR seen from the commands that use it:
// what is asked of it (Request), where it answers (World: the model
// endpoints, the guest servers, the task files) and how it is started —
// as its own process, the codasim command, whose addresses are read from
// the first line it prints. rollout, judge and nightly link this package,
// not the simulator: with --sim they start codasim and then talk to it by
// URL and pool file, as to real VMs and models. Tests start the simulator
// in their own process instead (SetInProcess), with the same Request.
package codasim

import (
	"context"
	"errors"
	"io"
	"time"

	"github.com/codapipe/codapipe/internal/infra/clock"
	"github.com/codapipe/codapipe/internal/infra/service"
)

// DefaultTimeScale is the simulator's default wall time per simulated
// second, for every command's --time-scale: 100× faster than real time.
const DefaultTimeScale = 0.01

// DefaultVMs is the default number of simulated VMs (--vms).
const DefaultVMs = 4

// Request is what a command asks of the simulator.
type Request struct {
	// VMs is the number of simulated machines; 0 starts the model
	// endpoints only (what judge needs).
	VMs int
	// Seed seeds the simulator. The one rule: Seed when set, else the
	// sim config's "seed" when it is not 0, else 1.
	Seed *int64
	// TimeScale is the wall time per simulated second (0:
	// DefaultTimeScale).
	TimeScale float64
	// Config is a JSON file with the simulator's configuration
	// (docs/simulator.md); "" the defaults.
	Config string
	// PlannerCoords and ExecutorCoords are the coordinate spaces the
	// simulated models write points in when the config sets none
	// (uitars.ParseCoords syntax; "" the models' defaults).
	PlannerCoords, ExecutorCoords string
	// Tasks asks for the simulator's task files, written to a folder
	// (World.Tasks) that lives as long as the simulator.
	Tasks bool

	// OnRequest, when set, sees the body of every request to the
	// simulated models. Only a simulator in this process can call it
	// (tests); starting codasim with it set is an error.
	OnRequest func(kind string, body []byte)
	// Stderr receives the simulator process's log (nil: discarded).
	Stderr io.Writer
	// Binary is the codasim binary to start (Launch; "": Binary()).
	Binary string
}

// TimeScaleOrDefault is r.TimeScale, or DefaultTimeScale when unset.
func (r Request) TimeScaleOrDefault() float64 {
	if r.TimeScale > 0 {
		return r.TimeScale
	}
	return DefaultTimeScale
}

// Endpoint is one simulated OpenAI-compatible model: its base URL (with
// /v1) and the model name to request.
type Endpoint struct {
	URL   string `json:"url"`
	Model string `json:"model"`
	// Coords is the coordinate space its points are in (planner and
	// executor; uitars.CoordsString syntax).
	Coords string `json:"coords,omitempty"`
}

// World is a running simulator: what codasim prints as JSON on its
// first line of output.
type World struct {
	// Seed and TimeScale are the ones in effect (after the seed rule).
	Seed      int64    `json:"seed"`
	TimeScale float64  `json:"time_scale"`
	Planner   Endpoint `json:"planner"`
	Executor  Endpoint `json:"executor"`
	// Judges are the judge models the judge endpoint serves: one, or
	// two for a configured ensemble (one URL, two model names).
	Judges []Endpoint `json:"judges"`
	// Guests are the guest servers' base URLs (port 5000 of a real VM),
	// one per VM; a guest's GET /sim/health names its app server.
	Guests []string `json:"guests"`
	// Tasks is the folder of the simulator's task files (with
	// Request.Tasks), in ScienceBoard's layout.
	Tasks string `json:"tasks,omitempty"`
	// Process is the simulator's process id (0: in this process).
	Process int `json:"process,omitempty"`
	// ConfigError, on codasim's line instead of the addresses, is why
	// its configuration cannot be used (a ConfigError of Launch).
	ConfigError string `json:"config_error,omitempty"`

	stop func() error
}

// Sleep waits for the simulated duration d on the world's time scale, or
// until ctx ends: the waits of a task's setup on the simulator.
func (w *World) Sleep(ctx context.Context, d time.Duration) error {
	if w.TimeScale <= 0 || d <= 0 {
		return ctx.Err()
	}
	return clock.Sleep(ctx, time.Duration(float64(d)*w.TimeScale))
}

// Close stops the simulator and waits until it has stopped (its servers
// closed, its task folder removed).
func (w *World) Close() error {
	if w == nil || w.stop == nil {
		return nil
	}
	stop := w.stop
	w.stop = nil
	return stop()
}

// NewWorld is a World whose Close calls stop: for a Starter.
func NewWorld(w World, stop func() error) *World {
	w.stop = stop
	return &w
}

// Starter starts a simulator for a request; ctx bounds the start. Its
// servers run until the World is closed, not until ctx ends: a command's
// in-flight work outlives its context by a grace (a judge's last calls),
// and the simulator must answer them.
type Starter func(ctx context.Context, r Request) (*World, error)

var inProcess Starter

// SetInProcess makes Start start the simulator in this process with s
// (tests, whose fixtures link the simulator), instead of codasim.
// Call it before any Start, from an init function or TestMain.
func SetInProcess(s Starter) { inProcess = s }

// ConfigError is the error of a simulator configuration that cannot be
// used (a bad --sim-config, coordinates or seed): the caller's flags are
// wrong, not the simulator.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// Start starts the simulator: in this process when SetInProcess has been
// called, else the codasim process (Launch). A configuration error is a
// usage error (service.Usage: exit status 2).
func Start(ctx context.Context, r Request) (*World, error) {
	var w *World
	var err error
	switch {
	case inProcess != nil:
		w, err = inProcess(ctx, r)
	case r.OnRequest != nil:
		return nil, errors.New("codasim: OnRequest needs the simulator in this process (tests)")
	default:
		w, err = Launch(ctx, r)
	}
	if ce := (*ConfigError)(nil); errors.As(err, &ce) {
		return nil, service.Usage(err)
	}
	return w, err
}

// Flags registers the simulator's flags a command shares with codasim,
// with one name, variable, default and meaning each: --sim-config into
// config, --time-scale into scale, and --vms into vms unless it is nil.
// prefix starts their help ("with --sim: " for a command with --sim).
func Flags(f *service.Flags, config *string, scale *float64, vms *int, prefix string) {
	if vms != nil {
		f.Int(vms, "vms", "CODAPIPE_VMS", DefaultVMs, prefix+"number of simulated VMs (guest servers)")
	}
	f.String(config, "sim-config", "CODAPIPE_SIM_CONFIG", "", prefix+"JSON file with the simulator's configuration: skills, judge error model, faults, latencies (docs/simulator.md)")
	f.Float64(scale, "time-scale", "CODAPIPE_TIME_SCALE", DefaultTimeScale, prefix+"wall time per simulated second (0.01: 100x faster than real time)")
}
