package service

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/prometheus/client_golang/prometheus"
)

// ErrUsage is matched (errors.Is) by the errors of a command that mean it
// was called wrongly or is not configured (bad flags, nothing to run on):
// Main exits with status 2 for them, 1 for any other error. Mark an error
// with Usage.
var ErrUsage = errors.New("usage error")

// Usage marks err as a usage error (it matches ErrUsage) without changing
// its message.
func Usage(err error) error { return usageError{err} }

type usageError struct{ error }

func (e usageError) Unwrap() error      { return e.error }
func (usageError) Is(target error) bool { return target == ErrUsage }

// Command is one codapipe command (or subcommand) run by Main: its flags,
// the plumbing it shares with the others, and what it does.
type Command struct {
	Name    string // as in usage lines: "rollout", "rollout tasks"
	Summary string // one line: what it does
	// Usage is the help text printed before the flags.
	Usage string
	// Common registers the flags every service has (data directory, NATS,
	// blob store, topology, log level and format, metrics); Consumer adds
	// --drain, which only commands that consume a stream honour.
	Common, Consumer bool
	// Flags registers the command's own flags (nil: none).
	Flags func(f *Flags)
	// Args is the number of positional arguments the command takes (the
	// usage line says which); more is a usage error.
	Args int
	// Run runs the command. ctx ends on SIGINT or SIGTERM.
	Run func(ctx context.Context, env *Env) error
	// Sub are subcommands, chosen by the first argument.
	Sub []Command
}

// Env is what a command's Run gets: its arguments, logger and metrics
// registry, and the shared components, opened on first use and closed
// when Run returns.
type Env struct {
	Common  *Common // nil for a command without the common flags
	Args    []string
	Log     *slog.Logger
	Metrics *prometheus.Registry
	Stdout  io.Writer
	Stderr  io.Writer

	name     string
	mu       sync.Mutex
	store    *blob.Store
	bus      *bus.Bus
	busStats *bus.Metrics

	health   Health
	readyMu  sync.RWMutex
	readyBus *bus.Bus // the bus while open, for busReady
	consumer bool     // ready only while the bus runs a consumer
	parent   *Env     // a stage's job (Stage): its bus and store are the job's
}

// Store opens the blob store of --store (default <data>/blobs) once.
func (e *Env) Store(ctx context.Context) (*blob.Store, error) {
	if e.parent != nil {
		return e.parent.Store(ctx)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.storeLocked(ctx)
}

func (e *Env) storeLocked(ctx context.Context) (*blob.Store, error) {
	if e.store != nil {
		return e.store, nil
	}
	if e.Common == nil {
		return nil, errors.New("service: no blob store: the command has no common flags")
	}
	s, err := blob.Open(ctx, e.Common.StoreURL(), blob.Config{Logger: e.Log})
	if err != nil {
		return nil, err
	}
	e.store = s
	return s, nil
}

// Bus connects to NATS (--nats, or the embedded server in the data
// directory) once, with the blob store as its claim store and its metrics
// on the command's registry, and ensures the stream topology (--replicas,
// --update-topology).
func (e *Env) Bus(ctx context.Context) (*bus.Bus, error) {
	if e.parent != nil {
		return e.parent.Bus(ctx)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bus != nil {
		return e.bus, nil
	}
	e.health.Ready("nats", e.busReady)
	store, err := e.storeLocked(ctx)
	if err != nil {
		return nil, err
	}
	cfg := e.Common.BusConfig()
	cfg.Claims, cfg.Logger = store, e.Log
	if e.busStats == nil {
		e.busStats = bus.NewMetrics(e.Metrics)
	}
	cfg.Metrics = e.busStats
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = firstWord(e.name) + "@" + host
	}
	b, err := bus.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if err := b.EnsureTopology(ctx, e.Common.Topology()); err != nil {
		b.Close()
		return nil, err
	}
	e.bus = b
	e.readyMu.Lock()
	e.readyBus = b
	e.readyMu.Unlock()
	return b, nil
}

// NewEnv returns the Env a command's Run gets, for a caller that runs a
// command's work without Main (tests): common flags, a logger (nil:
// slog.Default()) and a fresh metrics registry. Close it when done.
func NewEnv(name string, common *Common, log *slog.Logger, stdout, stderr io.Writer) *Env {
	if log == nil {
		log = slog.Default()
	}
	if stdout == nil {
		stdout = io.Discard
	}
	if stderr == nil {
		stderr = io.Discard
	}
	return &Env{Common: common, Log: log, Metrics: NewRegistry(), Stdout: stdout, Stderr: stderr, name: name}
}

// Close closes what the Env opened (the bus; the embedded NATS server
// with it).
func (e *Env) Close() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.bus != nil {
		e.readyMu.Lock()
		e.readyBus = nil // waits for a readiness check using it
		e.readyMu.Unlock()
		e.bus.Close()
		e.bus = nil
	}
	e.store = nil
}

// Main runs cmd with its arguments (without the program name) and returns
// the exit status: 0 done (or --help, --version), 1 failed, 2 a usage error. It
// parses the flags (with their environment fallbacks), sets up logging,
// serves Prometheus metrics when --metrics-addr is given, cancels Run's
// context on SIGINT or SIGTERM, and waits for everything it started before
// it returns.
func Main(cmd Command, args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return MainContext(ctx, cmd, args, stdout, stderr)
}

// MainContext is Main with the caller's context in place of the signals
// (tests, and commands that embed others).
func MainContext(ctx context.Context, cmd Command, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		for _, sub := range cmd.Sub {
			if args[0] == lastWord(sub.Name) {
				return MainContext(ctx, sub, args[1:], stdout, stderr)
			}
		}
	}
	if wantsVersion(args) {
		fmt.Fprintf(stdout, "%s %s\n", cmd.Name, Version())
		return 0
	}
	fs, common := cmd.flagSet()
	// Nothing the command prints shows a credential it was given
	// (docs/operations.md, "Secrets"): its flags' and environment's
	// secrets and every URL's user information are stripped from stdout
	// and stderr, logs and errors included.
	var secrets redact.Secrets
	fs.Secrets(&secrets)
	stdout, stderr = secrets.Writer(stdout), secrets.Writer(stderr)
	// Nor a control character from outside (EscapeControl).
	stdout, stderr = controlWriter{stdout}, controlWriter{stderr}
	// The flag package prints nothing: Main prints the help for --help,
	// and for a flag it cannot parse the error, the nearest flag's name
	// and where the help is (flagError), not the whole help.
	fs.SetOutput(io.Discard)
	fs.FlagSet.Usage = func() {}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fmt.Fprint(stderr, cmd.help(fs))
			return 0
		}
		fmt.Fprint(stderr, cmd.flagError(fs, err))
		return 2
	}
	fs.Secrets(&secrets, fs.Args()...)
	if fs.NArg() > cmd.Args {
		fmt.Fprintf(stderr, "%s: unexpected argument %q (see %s --help)\n", cmd.Name, fs.Arg(cmd.Args), cmd.Name)
		return 2
	}
	lc := LogConfig{Service: firstWord(cmd.Name)}
	if common != nil {
		if err := common.Check(); err != nil {
			fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
			return 2
		}
		lc.Level, lc.Format = common.LogLevel, common.LogFormat
	}
	log, err := NewLogger(stderr, lc)
	if err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		return 2
	}
	env := NewEnv(cmd.Name, common, log, stdout, stderr)
	env.Args = fs.Args()
	defer env.Close()
	if cmd.Consumer {
		env.expectConsumer()
	}

	mctx, stopMetrics := context.WithCancel(ctx)
	var metricsDone <-chan struct{}
	if common != nil && common.MetricsAddr != "" {
		addr, done, err := ServeMetrics(mctx, common.MetricsAddr, env.Metrics, &env.health, log)
		if err != nil {
			stopMetrics()
			fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
			return 2
		}
		metricsDone = done
		log.Info("metrics", "addr", addr)
	}
	defer func() {
		stopMetrics()
		if metricsDone != nil {
			<-metricsDone // the server is shut down before Main returns
		}
	}()

	if err := cmd.Run(ctx, env); err != nil {
		fmt.Fprintf(stderr, "%s: %v\n", cmd.Name, err)
		if errors.Is(err, ErrUsage) {
			return 2
		}
		return 1
	}
	return 0
}

// FlagSet returns the command's flags as Main defines them (the common
// ones after the command's), for documentation and tests.
func (c Command) FlagSet() *Flags {
	fs, _ := c.flagSet()
	return fs
}

func (c Command) flagSet() (*Flags, *Common) {
	fs := NewFlags(c.Name)
	// The command's own flags first: their sections come first in
	// --help, the common ones' after (or in the command's, when they share
	// a group).
	if c.Flags != nil {
		c.Flags(fs)
	}
	var common *Common
	if c.Common {
		common = RegisterCommon(fs, c.Consumer)
	}
	return fs, common
}

// EnvOf returns the environment variable a flag's usage names ("[env
// NAME]"), or "".
func EnvOf(usage string) string {
	i := strings.LastIndex(usage, "[env ")
	if i < 0 {
		return ""
	}
	rest := usage[i+len("[env "):]
	if j := strings.IndexByte(rest, ']'); j >= 0 {
		return rest[:j]
	}
	return ""
}

// help is the text of --help: the usage, the subcommands, then the flags
// in their sections (Flags.Usage; none for a command without flags).
func (c Command) help(fs *Flags) string {
	var b strings.Builder
	if c.Usage != "" {
		b.WriteString(strings.TrimRight(c.Usage, "\n"))
		b.WriteString("\n\n")
	} else if c.Summary != "" {
		fmt.Fprintf(&b, "%s — %s\n\n", c.Name, c.Summary)
	}
	if len(c.Sub) > 0 {
		b.WriteString("Subcommands:\n")
		for _, s := range c.Sub {
			fmt.Fprintf(&b, "  %-16s %s\n", lastWord(s.Name), s.Summary)
		}
	}
	if flags := fs.Usage(); flags != "" {
		if len(c.Sub) > 0 {
			b.WriteString("\n")
		}
		b.WriteString(flags)
	}
	if len(c.Sub) > 0 || b.Len() > 0 {
		b.WriteString("\n")
	}
	fmt.Fprintf(&b, "--help prints this; --version the build (module version, VCS revision, Go version).\n")
	return b.String()
}

// firstWord is the service of a command name: "rollout" of "rollout tasks".
func firstWord(s string) string {
	if f := strings.Fields(s); len(f) > 0 {
		return f[0]
	}
	return s
}

func lastWord(s string) string {
	f := strings.Fields(s)
	if len(f) == 0 {
		return s
	}
	return f[len(f)-1]
}
