// Package vmware is the "vmware" backend of package vmpool: VMware
// Workstation, Player or Fusion VMs driven by vmrun and reverted to a
// snapshot before every episode, as ScienceBoard and CODA run them.
package vmware

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/backendkit"
)

// Name is the backend's name, as a pool file's "backend:" spells it.
const Name = "vmware"

// Config configures the "vmware" backend.
type Config struct {
	// Vmrun is the vmrun executable. Default "vmrun" (on PATH).
	Vmrun string `yaml:"vmrun"`
	// Type is vmrun's -T host type: ws (default), fusion, player, ...
	Type string `yaml:"type"`
	// Snapshot is the snapshot of VMs that name none.
	Snapshot string `yaml:"snapshot"`
	// GuestPort is the guest server's port in the VMs. Default 5000.
	GuestPort int `yaml:"guest_port"`
	// StatePort is ScienceBoard's app-state server port. Default 8000.
	StatePort int `yaml:"state_port"`
	// CommandEnv adds environment variables (NAME=value) to vmrun's.
	CommandEnv []string `yaml:"command_env"`
	// CommandTimeout bounds one vmrun call (revertToSnapshot, start, list,
	// stop). Default 3m.
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// IPTimeout bounds "getGuestIPAddress -wait": a VM that vmrun lists as
	// running but that gets no IP in this time is stuck. Default 5m.
	IPTimeout time.Duration `yaml:"ip_timeout"`
	// ReadyTimeout bounds the wait for the guest server to answer a
	// screenshot once the VM has an IP. Default 5m.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// PollInterval is the pause between readiness probes. Default 2s.
	PollInterval time.Duration `yaml:"poll_interval"`
	// NoNetworkBounce skips the network bounce after a revert.
	NoNetworkBounce bool `yaml:"no_network_bounce"`
	// BounceCommand is run in the guest (POST /setup/execute, through the
	// shell) after a revert, as ScienceBoard does, so a reverted guest
	// renews its address. Default DefaultBounceCommand. A failed bounce is
	// logged and tolerated.
	BounceCommand string `yaml:"bounce_command"`
	// BounceTimeout bounds the bounce command. Default 60s.
	BounceTimeout time.Duration `yaml:"bounce_timeout"`
	// StopOnClose stops the VMs when the pool closes. Default false: the
	// VMs keep running for the next run.
	StopOnClose bool `yaml:"stop_on_close"`
	// StopMode is vmrun stop's mode: soft (default) or hard.
	StopMode string `yaml:"stop_mode"`
	// VMs are the VMs.
	VMs []VM `yaml:"vms"`
}

// VM is one VMware VM.
type VM struct {
	// ID names the VM; default the vmx file's name without ".vmx".
	ID string `yaml:"id"`
	// VMX is the VM's .vmx file.
	VMX string `yaml:"vmx"`
	// Snapshot overrides Config.Snapshot.
	Snapshot string `yaml:"snapshot"`
	// GuestPort overrides Config.GuestPort.
	GuestPort int `yaml:"guest_port"`
	// IP is the guest's fixed address; set, the backend does not ask vmrun
	// (getGuestIPAddress needs VMware Tools in the guest).
	IP string `yaml:"ip"`
}

// DefaultBounceCommand restarts the guest's first active network
// connection (not loopback), as ScienceBoard does with nmcli after a
// revert.
const DefaultBounceCommand = `c=$(nmcli -t -f NAME connection show --active | grep -v '^lo$' | head -n 1); ` +
	`[ -n "$c" ] && nmcli connection down "$c" && nmcli connection up "$c"`

var vmrunTypes = []string{"ws", "fusion", "player", "server", "server1", "esx", "vc"}

func (c Config) withDefaults() Config {
	c.Vmrun = cmp.Or(c.Vmrun, "vmrun")
	c.Type = cmp.Or(c.Type, "ws")
	c.GuestPort = cmp.Or(c.GuestPort, guest.DefaultPort)
	c.StatePort = cmp.Or(c.StatePort, guest.DefaultStatePort)
	c.CommandTimeout = cmp.Or(c.CommandTimeout, 3*time.Minute)
	c.IPTimeout = cmp.Or(c.IPTimeout, 5*time.Minute)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, 5*time.Minute)
	c.PollInterval = cmp.Or(c.PollInterval, 2*time.Second)
	c.BounceCommand = cmp.Or(c.BounceCommand, DefaultBounceCommand)
	c.BounceTimeout = cmp.Or(c.BounceTimeout, time.Minute)
	c.StopMode = cmp.Or(c.StopMode, "soft")
	vms := make([]VM, len(c.VMs))
	for i, v := range c.VMs {
		if v.ID == "" && v.VMX != "" {
			v.ID = defaultID(v.VMX)
		}
		v.Snapshot = cmp.Or(v.Snapshot, c.Snapshot)
		v.GuestPort = cmp.Or(v.GuestPort, c.GuestPort)
		vms[i] = v
	}
	c.VMs = vms
	return c
}

// defaultID is the id of a VM that gives none: its .vmx file's name
// without the extension.
func defaultID(vmx string) string { return strings.TrimSuffix(filepath.Base(vmx), filepath.Ext(vmx)) }

// Validate reports every value of c that cannot work, as
// *vmpool.ConfigError values joined; their fields start with "vmware.".
func (c Config) Validate() error {
	var v backendkit.Validator
	v.NonEmpty("vmware.vms", len(c.VMs), "VM ({vmx: /path/to/vm.vmx, snapshot: NAME})")
	if c.Type != "" && !slices.Contains(vmrunTypes, c.Type) {
		v.Add("vmware.type", "%q: want one of %s (vmrun -T)", c.Type, strings.Join(vmrunTypes, ", "))
	}
	v.Port("vmware.guest_port", c.GuestPort)
	v.Port("vmware.state_port", c.StatePort)
	v.Env("vmware.command_env", c.CommandEnv)
	for _, d := range []struct {
		f string
		d time.Duration
	}{{"command_timeout", c.CommandTimeout}, {"ip_timeout", c.IPTimeout}, {"ready_timeout", c.ReadyTimeout},
		{"poll_interval", c.PollInterval}, {"bounce_timeout", c.BounceTimeout}} {
		v.Positive("vmware."+d.f, d.d)
	}
	switch c.StopMode {
	case "", "soft", "hard":
	default:
		v.Add("vmware.stop_mode", "%q: want soft or hard", c.StopMode)
	}
	for i, vm := range c.VMs {
		f := fmt.Sprintf("vmware.vms[%d]", i)
		v.VMID(f+".id", vm.ID)
		if id := defaultID(vm.VMX); vm.ID == "" && vm.VMX != "" && !vmpool.ValidID(id) {
			v.Add(f+".id", "missing, and the .vmx file's name %q is no VM id (letters, digits, '.', '_' and '-', starting with a letter or digit): give one", id)
		}
		switch {
		case vm.VMX == "":
			v.Add(f+".vmx", "missing; want the path of the VM's .vmx file")
		case !strings.EqualFold(filepath.Ext(vm.VMX), ".vmx"):
			v.Add(f+".vmx", "%q: want the path of a .vmx file", vm.VMX)
		}
		if vm.Snapshot == "" && c.Snapshot == "" {
			v.Add(f+".snapshot", "missing; want the name of the snapshot to revert to (here or as vmware.snapshot)")
		}
		v.Port(f+".guest_port", vm.GuestPort)
		if vm.IP != "" && net.ParseIP(vm.IP) == nil {
			v.Add(f+".ip", "%q: want an IP address", vm.IP)
		}
	}
	return v.Err()
}

// Backend is the "vmware" backend. Start and Reset both do what
// ScienceBoard does before a task: revertToSnapshot, start the VM if the
// snapshot left it off, wait for its IP (getGuestIPAddress -wait, under
// ip_timeout), wait for the guest server to answer a screenshot, bounce the
// guest's network, and wait again. Every vmrun call has a deadline; a VM
// that gets no IP or whose guest never answers is reported stuck
// (vmpool.ErrStuck), which quarantines it.
type Backend struct {
	cfg    Config
	log    *slog.Logger
	specs  []vmpool.VMSpec
	vms    map[string]VM
	client *http.Client
}

// New returns the "vmware" backend of cfg. log may be nil.
func New(cfg Config, log *slog.Logger) (*Backend, error) {
	cfg, err := backendkit.Prepare(cfg, Config.withDefaults)
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, log: cmp.Or(log, slog.Default()), vms: map[string]VM{}, client: guest.NewHTTPClient()}
	for _, vm := range cfg.VMs {
		abs, err := filepath.Abs(vm.VMX)
		if err != nil {
			abs = vm.VMX
		}
		vm.VMX = filepath.Clean(abs)
		b.vms[vm.ID] = vm
		b.specs = append(b.specs, vmpool.VMSpec{ID: vm.ID, Key: "vmware:" + vm.VMX, Label: vm.VMX + " @ " + vm.Snapshot})
	}
	return b, nil
}

// Name is "vmware".
func (b *Backend) Name() string { return Name }

// VMs lists the configured VMs. It does not call vmrun: a VM that is
// missing shows up in its start.
func (b *Backend) VMs(context.Context) ([]vmpool.VMSpec, error) { return b.specs, nil }

// vmrun runs "vmrun -T TYPE args..." under timeout.
func (b *Backend) vmrun(ctx context.Context, timeout time.Duration, args ...string) (string, error) {
	out, err := backendkit.Run(ctx, timeout, b.cfg.CommandEnv, b.cfg.Vmrun, append([]string{"-T", b.cfg.Type}, args...)...)
	if err == nil && strings.HasPrefix(strings.TrimSpace(out), "Error:") {
		err = &backendkit.CommandError{Path: b.cfg.Vmrun, Args: append([]string{"-T", b.cfg.Type}, args...), Stdout: out,
			Err: errors.New("vmrun reported an error")}
	}
	return out, err
}

// Start reverts the VM to its snapshot and waits until it is ready; it is
// Reset.
func (b *Backend) Start(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	return b.Reset(ctx, vm)
}

// Reset reverts the VM to its snapshot and waits until it is ready.
func (b *Backend) Reset(ctx context.Context, spec vmpool.VMSpec) (vmpool.Endpoint, error) {
	vm, ok := b.vms[spec.ID]
	if !ok {
		return vmpool.Endpoint{}, fmt.Errorf("vmware: no VM %q", spec.ID)
	}
	if _, err := b.vmrun(ctx, b.cfg.CommandTimeout, "revertToSnapshot", vm.VMX, vm.Snapshot); err != nil {
		return vmpool.Endpoint{}, fmt.Errorf("vmware: revert %s to snapshot %q: %w", vm.VMX, vm.Snapshot, err)
	}
	running, err := b.running(ctx, vm.VMX)
	if err != nil {
		return vmpool.Endpoint{}, err
	}
	if !running {
		if _, err := b.vmrun(ctx, b.cfg.CommandTimeout, "start", vm.VMX, "nogui"); err != nil {
			return vmpool.Endpoint{}, fmt.Errorf("vmware: start %s: %w", vm.VMX, err)
		}
	}
	ep, err := b.waitGuest(ctx, vm, "revert")
	if err != nil || b.cfg.NoNetworkBounce {
		return ep, err
	}
	b.bounce(ctx, vm, ep)
	return b.waitGuest(ctx, vm, "network bounce")
}

// running reports whether "vmrun list" lists vmx.
func (b *Backend) running(ctx context.Context, vmx string) (bool, error) {
	out, err := b.vmrun(ctx, b.cfg.CommandTimeout, "list")
	if err != nil {
		return false, fmt.Errorf("vmware: list: %w", err)
	}
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "Total running VMs") {
			continue
		}
		if samePath(line, vmx) {
			return true, nil
		}
	}
	return false, nil
}

func samePath(a, b string) bool {
	a, b = filepath.Clean(a), filepath.Clean(b)
	if runtime.GOOS == "windows" || runtime.GOOS == "darwin" {
		return strings.EqualFold(a, b)
	}
	return a == b
}

// waitGuest finds the VM's IP and waits for its guest server.
func (b *Backend) waitGuest(ctx context.Context, vm VM, after string) (vmpool.Endpoint, error) {
	ip := vm.IP
	if ip == "" {
		var err error
		if ip, err = b.guestIP(ctx, vm); err != nil {
			return vmpool.Endpoint{}, err
		}
	}
	host := ip
	if strings.Contains(ip, ":") {
		host = "[" + ip + "]"
	}
	ep := vmpool.Endpoint{
		GuestURL: "http://" + host + ":" + strconv.Itoa(vm.GuestPort),
		StateURL: "http://" + host + ":" + strconv.Itoa(b.cfg.StatePort),
	}
	what := fmt.Sprintf("vmware: %s: guest server %s after %s", vm.ID, ep.GuestURL, after)
	if err := backendkit.WaitGuest(ctx, b.client, ep, what, b.cfg.ReadyTimeout, b.cfg.PollInterval); err != nil {
		return vmpool.Endpoint{}, err
	}
	return ep, nil
}

// guestIP asks vmrun for the guest's IP, waiting at most ip_timeout.
func (b *Backend) guestIP(ctx context.Context, vm VM) (string, error) {
	out, err := b.vmrun(ctx, b.cfg.IPTimeout, "getGuestIPAddress", vm.VMX, "-wait")
	if err != nil {
		if ctx.Err() == nil && errors.Is(err, context.DeadlineExceeded) {
			state := "vmrun does not list it as running"
			if running, lerr := b.running(ctx, vm.VMX); lerr != nil {
				state = "vmrun list failed too: " + lerr.Error()
			} else if running {
				state = "vmrun lists it as running"
			}
			return "", fmt.Errorf("%w: vmware: %s got no IP within %v (%s; are VMware Tools running in the guest?): %w",
				vmpool.ErrStuck, vm.VMX, b.cfg.IPTimeout, state, err)
		}
		return "", fmt.Errorf("vmware: getGuestIPAddress %s: %w", vm.VMX, err)
	}
	lines := strings.Fields(out)
	if len(lines) == 0 {
		return "", fmt.Errorf("vmware: getGuestIPAddress %s: no output", vm.VMX)
	}
	ip := lines[len(lines)-1]
	if net.ParseIP(ip) == nil {
		return "", fmt.Errorf("vmware: getGuestIPAddress %s: %q is not an IP address", vm.VMX, strings.TrimSpace(out))
	}
	return ip, nil
}

// bounce restarts the guest's network connection; a failure is logged,
// not returned: the guest may well work without it.
func (b *Backend) bounce(ctx context.Context, vm VM, ep vmpool.Endpoint) {
	g, err := guest.New(ep.GuestURL, guest.Options{HTTPClient: b.client, Retries: -1, ExecuteTimeout: b.cfg.BounceTimeout})
	if err == nil {
		bctx, cancel := context.WithTimeout(ctx, b.cfg.BounceTimeout)
		_, err = g.SetupExecute(bctx, guest.ShellCommand(b.cfg.BounceCommand))
		cancel()
	}
	if err != nil && ctx.Err() == nil {
		b.log.Warn("vmpool: network bounce after revert failed; going on", "vm", vm.ID, "err", err)
	}
}

// Health takes a screenshot.
func (b *Backend) Health(ctx context.Context, vm vmpool.VMSpec, g *guest.Client) error {
	return backendkit.ScreenshotHealth(ctx, g)
}

// Stop stops the VM (vmrun stop VMX soft|hard) when stop_on_close is set.
// A VM that is already off is not an error.
func (b *Backend) Stop(ctx context.Context, spec vmpool.VMSpec) error {
	if !b.cfg.StopOnClose {
		return nil
	}
	vm, ok := b.vms[spec.ID]
	if !ok {
		return fmt.Errorf("vmware: no VM %q", spec.ID)
	}
	_, err := b.vmrun(ctx, b.cfg.CommandTimeout, "stop", vm.VMX, b.cfg.StopMode)
	var ce *backendkit.CommandError
	if errors.As(err, &ce) && strings.Contains(strings.ToLower(ce.Output()), "not powered on") {
		return nil
	}
	if err != nil {
		return fmt.Errorf("vmware: stop %s: %w", vm.VMX, err)
	}
	return nil
}

// Close closes idle connections.
func (b *Backend) Close(context.Context) error {
	b.client.CloseIdleConnections()
	return nil
}
