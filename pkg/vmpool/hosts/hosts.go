// Package hosts is the "guest" backend of package vmpool: any machines that
// run the OSWorld/ScienceBoard guest server (a cloud VM, a lab workstation,
// a VM another tool manages), reverted, if at all, by a command of the
// user's.
package hosts

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/backendkit"
)

// Name is the backend's name, as a pool file's "backend:" spells it.
const Name = "guest"

// Config configures the "guest" backend. The pool cannot revert a machine
// by itself; a reset_command can (a script that reverts a cloud VM's disk,
// restarts a container on another host, ...).
//
// Commands run locally through Shell ("sh -c COMMAND codapipe-vm HOST ID"),
// so the script sees the machine as $1 (host) and $2 (VM id), and in the
// environment as CODAPIPE_VM_ID, CODAPIPE_VM_URL and CODAPIPE_VM_HOST. A
// command that exits non-zero fails the operation; its output's last line
// is in the error.
type Config struct {
	// VMs are the machines.
	VMs []Host `yaml:"vms"`
	// ResetCommand returns a machine to its clean state; the pool then
	// waits for its guest server. Without one, a "reset" only waits for the
	// guest server: episodes then start from whatever the last one left.
	ResetCommand string `yaml:"reset_command"`
	// StartCommand brings a machine up when the pool starts. Default: the
	// reset command.
	StartCommand string `yaml:"start_command"`
	// StopCommand runs for every started machine at Close; default none.
	StopCommand string `yaml:"stop_command"`
	// Shell runs the commands. Default "/bin/sh".
	Shell string `yaml:"shell"`
	// ReadyTimeout bounds the wait for the guest server after a start or
	// reset. Default 5m.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// PollInterval is the pause between readiness probes. Default 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// Host is one machine running the guest server.
type Host struct {
	// ID names the VM; default "guest-<index>".
	ID string `yaml:"id"`
	// URL is the guest server, "http://10.0.0.5:5000" (a bare host means
	// port 5000).
	URL string `yaml:"url"`
	// StateURL is ScienceBoard's app-state server; default the same host
	// on port 8000.
	StateURL string `yaml:"state_url"`
}

func (c Config) withDefaults() Config {
	c.Shell = cmp.Or(c.Shell, "/bin/sh")
	c.StartCommand = cmp.Or(c.StartCommand, c.ResetCommand)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, 5*time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	c.VMs = backendkit.NameVMs(c.VMs, "guest", func(h *Host) *string { return &h.ID })
	return c
}

// Validate reports every value of c that cannot work, as
// *vmpool.ConfigError values joined; their fields start with "guest.".
func (c Config) Validate() error {
	var v backendkit.Validator
	v.NonEmpty("guest.vms", len(c.VMs), "machine ({url: http://HOST:5000})")
	for i, vm := range c.VMs {
		v.GuestVM(fmt.Sprintf("guest.vms[%d]", i), vm.ID, vm.URL, vm.StateURL)
	}
	v.Positive("guest.ready_timeout", c.ReadyTimeout)
	v.Positive("guest.poll_interval", c.PollInterval)
	return v.Err()
}

// Backend is the "guest" backend.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	specs  []vmpool.VMSpec
	hosts  map[string]Host // id → host, URLs normalized
	client *http.Client
	warn   sync.Once
}

// New returns the "guest" backend of cfg. log may be nil.
func New(cfg Config, log *slog.Logger) (*Backend, error) {
	cfg, err := backendkit.Prepare(cfg, Config.withDefaults)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, log: cmp.Or(log, slog.Default()), hosts: map[string]Host{}, client: guest.NewHTTPClient()}
	for _, h := range cfg.VMs {
		ep, key := backendkit.GuestAddrs(h.URL, h.StateURL)
		h.URL, h.StateURL = ep.GuestURL, ep.StateURL
		b.hosts[h.ID] = h
		b.specs = append(b.specs, vmpool.VMSpec{ID: h.ID, Key: key, Label: "guest server " + h.URL})
	}
	return b, nil
}

// Name is "guest".
func (b *Backend) Name() string { return Name }

// VMs lists the machines.
func (b *Backend) VMs(context.Context) ([]vmpool.VMSpec, error) { return b.specs, nil }

// Start runs the start command, if any, and waits for the guest server.
func (b *Backend) Start(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	return b.bringUp(ctx, vm, "start", b.cfg.StartCommand)
}

// Reset runs the reset command, if any, and waits for the guest server.
func (b *Backend) Reset(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	if b.cfg.ResetCommand == "" {
		b.warn.Do(func() {
			b.log.Warn("vmpool: guest backend has no reset_command: machines are not reverted between episodes")
		})
	}
	return b.bringUp(ctx, vm, "reset", b.cfg.ResetCommand)
}

func (b *Backend) bringUp(ctx context.Context, vm vmpool.VMSpec, op, command string) (vmpool.Endpoint, error) {
	h, ok := b.hosts[vm.ID]
	if !ok {
		return vmpool.Endpoint{}, fmt.Errorf("guest: no VM %q", vm.ID)
	}
	if command != "" {
		if err := b.run(ctx, op, command, h); err != nil {
			return vmpool.Endpoint{}, err
		}
	}
	ep := vmpool.Endpoint{GuestURL: h.URL, StateURL: h.StateURL}
	if err := backendkit.WaitGuest(ctx, b.client, ep, "guest: "+h.URL+" after "+op, b.cfg.ReadyTimeout, b.cfg.PollInterval); err != nil {
		return vmpool.Endpoint{}, err
	}
	return ep, nil
}

// run runs one of the user's commands for machine h.
func (b *Backend) run(ctx context.Context, op, command string, h Host) error {
	hostname := h.URL
	if u, err := guest.ParseURL(h.URL, guest.DefaultPort); err == nil {
		hostname = u.Hostname()
	}
	env := []string{"CODAPIPE_VM_ID=" + h.ID, "CODAPIPE_VM_URL=" + h.URL, "CODAPIPE_VM_HOST=" + hostname}
	_, err := backendkit.Run(ctx, 0, env, b.cfg.Shell, "-c", command, "codapipe-vm", hostname, h.ID)
	if err != nil {
		return fmt.Errorf("guest: %s command for %s: %w", op, h.URL, err)
	}
	return nil
}

// Health takes a screenshot.
func (b *Backend) Health(ctx context.Context, vm vmpool.VMSpec, g *guest.Client) error {
	return backendkit.ScreenshotHealth(ctx, g)
}

// Stop runs the stop command, if any.
func (b *Backend) Stop(ctx context.Context, vm vmpool.VMSpec) error {
	if b.cfg.StopCommand == "" {
		return nil
	}
	h, ok := b.hosts[vm.ID]
	if !ok {
		return fmt.Errorf("guest: no VM %q", vm.ID)
	}
	return b.run(ctx, "stop", b.cfg.StopCommand, h)
}

// Close closes idle connections.
func (b *Backend) Close(context.Context) error {
	b.client.CloseIdleConnections()
	return nil
}
