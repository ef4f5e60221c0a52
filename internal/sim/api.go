package sim

// The SIMULATOR's API as one package: aliases of the sub-packages' types
// and thin forwarders to their functions, so that callers can use
// sim.NewMachine, sim.StartGuest, sim.NewModels, sim.Tasks, ... without
// knowing where each part lives. New code may import the sub-packages
// directly.

import (
	"context"
	"io/fs"
	"net/http"
	"time"

	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// Simulated time, latency and faults (package fault).
type (
	Clock  = fault.Clock
	Dist   = fault.Dist
	Faults = fault.Faults
	Fault  = fault.Outcome
)

// Outcomes of Faults.Draw.
const (
	FaultNone      = fault.None
	FaultHang      = fault.Hang
	FaultError     = fault.Error
	FaultRateLimit = fault.RateLimit
)

// Fixed returns a constant distribution (fault.Fixed).
func Fixed(d time.Duration) Dist { return fault.Fixed(d) }

// LogNormal returns a lognormal distribution (fault.LogNormal).
func LogNormal(median time.Duration, sigma float64, max time.Duration) Dist {
	return fault.LogNormal(median, sigma, max)
}

// The simulated machine (package desktop).
type (
	Machine        = desktop.Machine
	MachineConfig  = desktop.MachineConfig
	State          = desktop.State
	Element        = desktop.Element
	Event          = desktop.Event
	EventKind      = desktop.EventKind
	PyAutoGUIError = desktop.PyAutoGUIError
)

// Screen size of every simulated machine, the state chunk's keyword and
// the simulated apps (package desktop).
const (
	ScreenW           = desktop.ScreenW
	ScreenH           = desktop.ScreenH
	StateChunkKeyword = desktop.StateChunkKeyword

	AppChimeraX = desktop.AppChimeraX
	AppCelestia = desktop.AppCelestia
	AppKAlgebra = desktop.AppKAlgebra
	AppGRASS    = desktop.AppGRASS
)

// Input events (package desktop).
const (
	EvMoveTo    = desktop.EvMoveTo
	EvClick     = desktop.EvClick
	EvMouseDown = desktop.EvMouseDown
	EvMouseUp   = desktop.EvMouseUp
	EvDragTo    = desktop.EvDragTo
	EvWrite     = desktop.EvWrite
	EvPress     = desktop.EvPress
	EvHotkey    = desktop.EvHotkey
	EvKeyDown   = desktop.EvKeyDown
	EvKeyUp     = desktop.EvKeyUp
	EvScroll    = desktop.EvScroll
	EvHScroll   = desktop.EvHScroll
	EvSleep     = desktop.EvSleep
)

// NewMachine returns a simulated machine (desktop.NewMachine).
func NewMachine(cfg MachineConfig) Machine { return desktop.NewMachine(cfg) }

// Apps returns the simulated apps' names (desktop.Apps).
func Apps() []string { return desktop.Apps() }

// Elements lists an app's elements (desktop.Elements).
func Elements(app string) []Element { return desktop.Elements(app) }

// FindElement finds an element by its label, ignoring case
// (desktop.FindElement).
func FindElement(label string) (Element, bool) { return desktop.FindElement(label) }

// ParsePyAutoGUI parses pyautogui code into input events
// (desktop.ParsePyAutoGUI).
func ParsePyAutoGUI(code string) ([]Event, error) { return desktop.ParsePyAutoGUI(code) }

// ReadStateChunk reads the simulated state from a screenshot
// (desktop.ReadStateChunk).
func ReadStateChunk(data []byte) (State, error) { return desktop.ReadStateChunk(data) }

// Tasks (package tasks).
type (
	Task       = tasks.Task
	OracleStep = tasks.OracleStep
)

// DefaultPlaceholders is tasks.DefaultPlaceholders (the same map).
var DefaultPlaceholders = tasks.DefaultPlaceholders

// Tasks returns the simulator's tasks sorted by ID (tasks.All).
func Tasks() ([]Task, error) { return tasks.All() }

// TasksFS returns the embedded task files (tasks.FS).
func TasksFS() fs.FS { return tasks.FS() }

// WriteTasks writes the embedded task files under dir, or only the ones
// named "<App folder>/<file stem>" (tasks.Write).
func WriteTasks(dir string, only ...string) error { return tasks.Write(dir, only...) }

// TaskByInstruction returns the task with the given instruction
// (tasks.ByInstruction).
func TaskByInstruction(instr string) (*Task, bool) { return tasks.ByInstruction(instr) }

// TaskByID returns the task with the given ID (tasks.ByID).
func TaskByID(id string) (*Task, bool) { return tasks.ByID(id) }

// RunInit runs a task's initialize items on a machine (tasks.RunInit).
func RunInit(m Machine, t *scienceboard.Task, values map[string]string) error {
	return tasks.RunInit(m, t, values)
}

// AppStateSource adapts a Machine to scienceboard.StateSource
// (tasks.AppStateSource).
func AppStateSource(m Machine) scienceboard.StateSource { return tasks.AppStateSource(m) }

// The guest server (package guest).
type GuestConfig = guest.Config

// Guest constants (package guest).
const (
	GuestPlatform    = guest.Platform
	DefaultExecLimit = guest.DefaultExecLimit
	DeathHang        = guest.DeathHang
	DeathReset       = guest.DeathReset
)

// NewGuestServer returns the simulated guest server of m as an
// http.Handler (guest.NewHandler).
func NewGuestServer(m Machine, cfg GuestConfig) http.Handler { return guest.NewHandler(m, cfg) }

// StartGuest serves the guest server of m on a loopback port until ctx
// ends and returns its base URL ("http://127.0.0.1:PORT"). It is
// guest.Start without the handle: use guest.Start to wait until the
// server has stopped.
func StartGuest(ctx context.Context, m Machine, cfg GuestConfig) (string, error) {
	s, err := guest.Start(ctx, m, cfg)
	if err != nil {
		return "", err
	}
	return s.URL, nil
}

// The model endpoints (package models).
type (
	Models         = models.Endpoints
	ModelsConfig   = models.Config
	ModelServers   = models.Servers
	EndpointConfig = models.EndpointConfig
	PlannerConfig  = models.PlannerConfig
	ExecutorConfig = models.ExecutorConfig
	JudgeConfig    = models.JudgeConfig
	JudgeRates     = models.JudgeRates
	JudgeResult    = models.JudgeResult
	TruthFunc      = models.TruthFunc
)

// Model endpoint constants (package models).
const (
	DefaultPlannerModel    = models.DefaultPlannerModel
	DefaultExecutorModel   = models.DefaultExecutorModel
	DefaultJudgeModel      = models.DefaultJudgeModel
	DefaultModelsCreated   = models.DefaultCreated
	DefaultMaxRequestBytes = models.DefaultMaxRequestBytes
	GreedyTemperature      = models.GreedyTemperature
	MaxChoices             = models.MaxChoices
	ShutdownGrace          = models.ShutdownGrace
)

// DefaultModelsConfig returns the model endpoints' default configuration
// (models.DefaultConfig).
func DefaultModelsConfig() ModelsConfig { return models.DefaultConfig() }

// NewModels builds the simulated planner, executor and judge endpoints
// (models.New).
func NewModels(cfg ModelsConfig) (*Models, error) { return models.New(cfg) }

// PlanText formats an oracle step as a planner answer (models.PlanText).
func PlanText(s OracleStep) string { return models.PlanText(s) }

// DefaultTruth is the judge's answer-only truth (models.DefaultTruth).
func DefaultTruth(task *Task, states []State, answer string) (bool, int, []int, error) {
	return models.DefaultTruth(task, states, answer)
}

// StateTruth is the judge's default truth (models.StateTruth).
func StateTruth(task *Task, states []State, answer string) (bool, int, []int, error) {
	return models.StateTruth(task, states, answer)
}
