package vmpool

import (
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// GuestHostsConfig configures the "guest" backend: any machines that run
// the OSWorld/ScienceBoard guest server (a cloud VM, a lab workstation, a
// VM another tool manages). The pool cannot revert such a machine by
// itself; a reset_command can (a script that reverts a cloud VM's disk,
// restarts a container on another host, ...).
//
// Commands run locally through Shell ("sh -c COMMAND codapipe-vm HOST ID"),
// so the script sees the machine as $1 (host) and $2 (VM id), and in the
// environment as CODAPIPE_VM_ID, CODAPIPE_VM_URL and CODAPIPE_VM_HOST. A
// command that exits non-zero fails the operation; its output's last line
// is in the error.
type GuestHostsConfig struct {
	// VMs are the machines.
	VMs []GuestHost `yaml:"vms"`
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

// GuestHost is one machine running the guest server.
type GuestHost struct {
	// ID names the VM; default "guest-<index>".
	ID string `yaml:"id"`
	// URL is the guest server, "http://10.0.0.5:5000" (a bare host means
	// port 5000).
	URL string `yaml:"url"`
	// StateURL is ScienceBoard's app-state server; default the same host
	// on port 8000.
	StateURL string `yaml:"state_url"`
}

func (c GuestHostsConfig) withDefaults() GuestHostsConfig {
	c.Shell = cmp.Or(c.Shell, "/bin/sh")
	c.StartCommand = cmp.Or(c.StartCommand, c.ResetCommand)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, 5*time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	vms := make([]GuestHost, len(c.VMs))
	for i, v := range c.VMs {
		v.ID = cmp.Or(v.ID, fmt.Sprintf("guest-%d", i))
		vms[i] = v
	}
	c.VMs = vms
	return c
}

// Validate reports every value of c that cannot work, as *ConfigError
// values joined; their fields start with "guest.".
func (c GuestHostsConfig) Validate() error {
	var v validator
	c.validate(&v, "guest")
	return v.err()
}

func (c GuestHostsConfig) validate(v *validator, at string) {
	if len(c.VMs) == 0 {
		v.add(at+".vms", "empty; want at least one machine ({url: http://HOST:5000})")
	}
	for i, vm := range c.VMs {
		f := fmt.Sprintf("%s.vms[%d]", at, i)
		validateVMID(v, f+".id", vm.ID)
		validateURL(v, f+".url", vm.URL)
		if vm.StateURL != "" {
			if _, err := guest.ParseURL(vm.StateURL, guest.DefaultStatePort); err != nil {
				v.add(f+".state_url", "%v (want a URL such as http://10.0.0.5:8000)", err)
			}
		}
	}
	validatePositive(v, at+".ready_timeout", c.ReadyTimeout)
	validatePositive(v, at+".poll_interval", c.PollInterval)
}

// GuestHostsBackend is the "guest" backend.
type GuestHostsBackend struct {
	cfg    GuestHostsConfig
	log    *slog.Logger
	specs  []VMSpec
	hosts  map[string]GuestHost // id → host, URLs normalized
	client *http.Client
	warn   sync.Once
}

// NewGuestHostsBackend returns the "guest" backend of cfg. log may be nil.
func NewGuestHostsBackend(cfg GuestHostsConfig, log *slog.Logger) (*GuestHostsBackend, error) {
	cfg = cfg.withDefaults()
	var v validator
	cfg.validate(&v, "guest")
	if err := v.err(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	b := &GuestHostsBackend{cfg: cfg, log: log, hosts: map[string]GuestHost{}}
	b.client = guest.NewHTTPClient()
	for _, h := range cfg.VMs {
		u, _ := guest.ParseURL(h.URL, guest.DefaultPort)
		h.URL = u.String()
		if h.StateURL != "" {
			s, _ := guest.ParseURL(h.StateURL, guest.DefaultStatePort)
			h.StateURL = s.String()
		}
		b.hosts[h.ID] = h
		b.specs = append(b.specs, VMSpec{ID: h.ID, Key: "guest:" + u.Host, Label: "guest server " + h.URL})
	}
	return b, nil
}

// Name is "guest".
func (b *GuestHostsBackend) Name() string { return BackendGuest }

// VMs lists the machines.
func (b *GuestHostsBackend) VMs(context.Context) ([]VMSpec, error) { return b.specs, nil }

// Start runs the start command, if any, and waits for the guest server.
func (b *GuestHostsBackend) Start(ctx context.Context, vm VMSpec) (Endpoint, error) {
	return b.bringUp(ctx, vm, "start", b.cfg.StartCommand)
}

// Reset runs the reset command, if any, and waits for the guest server.
func (b *GuestHostsBackend) Reset(ctx context.Context, vm VMSpec) (Endpoint, error) {
	if b.cfg.ResetCommand == "" {
		b.warn.Do(func() {
			b.log.Warn("vmpool: guest backend has no reset_command: machines are not reverted between episodes")
		})
	}
	return b.bringUp(ctx, vm, "reset", b.cfg.ResetCommand)
}

func (b *GuestHostsBackend) bringUp(ctx context.Context, vm VMSpec, op, command string) (Endpoint, error) {
	h, ok := b.hosts[vm.ID]
	if !ok {
		return Endpoint{}, fmt.Errorf("guest: no VM %q", vm.ID)
	}
	if command != "" {
		if err := b.run(ctx, op, command, h); err != nil {
			return Endpoint{}, err
		}
	}
	ep := Endpoint{GuestURL: h.URL, StateURL: h.StateURL}
	probe, err := screenshotProbe(b.client, ep)
	if err != nil {
		return Endpoint{}, err
	}
	if err := waitReady(ctx, "guest: "+h.URL+" after "+op, b.cfg.ReadyTimeout, b.cfg.PollInterval, probe); err != nil {
		return Endpoint{}, err
	}
	return ep, nil
}

// run runs one of the user's commands for machine h.
func (b *GuestHostsBackend) run(ctx context.Context, op, command string, h GuestHost) error {
	hostname := h.URL
	if u, err := guest.ParseURL(h.URL, guest.DefaultPort); err == nil {
		hostname = u.Hostname()
	}
	env := []string{"CODAPIPE_VM_ID=" + h.ID, "CODAPIPE_VM_URL=" + h.URL, "CODAPIPE_VM_HOST=" + hostname}
	_, err := runCommand(ctx, 0, env, b.cfg.Shell, "-c", command, "codapipe-vm", hostname, h.ID)
	if err != nil {
		return fmt.Errorf("guest: %s command for %s: %w", op, h.URL, err)
	}
	return nil
}

// Health takes a screenshot.
func (b *GuestHostsBackend) Health(ctx context.Context, vm VMSpec, g *guest.Client) error {
	_, err := g.Screenshot(ctx)
	return err
}

// Stop runs the stop command, if any.
func (b *GuestHostsBackend) Stop(ctx context.Context, vm VMSpec) error {
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
func (b *GuestHostsBackend) Close(context.Context) error {
	b.client.CloseIdleConnections()
	return nil
}
