// Package docker is the "docker" backend of package vmpool: OSWorld-style
// containers, each a QEMU/KVM VM whose guest ports are published on free
// host ports; a reset removes the container and boots a new one.
package docker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/backendkit"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/lockfile"
)

// Name is the backend's name, as a pool file's "backend:" spells it.
const Name = "docker"

// Config configures the "docker" backend: OSWorld-style containers, each a
// QEMU/KVM VM whose guest ports (5000 guest server, 8006 VNC, 9222
// Chromium, 8080 VLC) are published on free host ports.
type Config struct {
	// Docker is the docker CLI. Default "docker" (on PATH).
	Docker string `yaml:"docker"`
	// Image is the container image. Default DefaultImage.
	Image string `yaml:"image"`
	// Count is the number of containers (VMs docker-0 ... docker-N-1).
	Count int `yaml:"count"`
	// DiskImage is the VM disk (qcow2) on the host, mounted read-only at
	// /System.qcow2 as OSWorld's image expects. Empty: none is mounted.
	DiskImage string `yaml:"disk_image"`
	// Env is the containers' environment, on top of DefaultEnv.
	Env map[string]string `yaml:"env"`
	// NoKVM leaves out --device /dev/kvm (the VM then runs emulated, very
	// slowly).
	NoKVM bool `yaml:"no_kvm"`
	// CapAdd are capabilities to add. Default [NET_ADMIN].
	CapAdd []string `yaml:"cap_add"`
	// RunArgs are more "docker run" arguments, put before the image.
	RunArgs []string `yaml:"run_args"`
	// HostIP is the host address the ports are published on. Default
	// 127.0.0.1: the guest server has no authentication, so publishing it
	// on every interface lets anyone on the network drive the VM.
	HostIP string `yaml:"host_ip"`
	// Ports are the guest ports to publish. Default [5000, 8006, 9222, 8080].
	Ports []int `yaml:"ports"`
	// ServerPort is the guest server's port among Ports. Default 5000.
	ServerPort int `yaml:"server_port"`
	// PortBase and PortRange bound the host ports used: PortBase ...
	// PortBase+PortRange-1. Defaults 20000 and 10000.
	PortBase  int `yaml:"port_base"`  // the first host port used
	PortRange int `yaml:"port_range"` // how many host ports may be used
	// CommandEnv adds environment variables (DOCKER_HOST=...) to the
	// docker CLI's.
	CommandEnv []string `yaml:"command_env"`
	// CommandTimeout bounds one docker CLI call. Default 5m (a run may
	// have to pull the image: pull it beforehand).
	CommandTimeout time.Duration `yaml:"command_timeout"`
	// ReadyTimeout bounds the wait for GET /screenshot to answer after the
	// container starts. Default 300s, as OSWorld.
	ReadyTimeout time.Duration `yaml:"ready_timeout"`
	// PollInterval is the pause between readiness probes. Default 1s.
	PollInterval time.Duration `yaml:"poll_interval"`
}

// DefaultImage is OSWorld's VM image.
const DefaultImage = "happysixd/osworld-docker"

// DefaultEnv is the containers' default environment (OSWorld's).
var DefaultEnv = map[string]string{"DISK_SIZE": "32G", "RAM_SIZE": "4G", "CPU_CORES": "4"}

// Labels of the docker backend's containers.
const (
	PoolLabel = "codapipe.pool"
	VMLabel   = "codapipe.vm"
)

func (c Config) withDefaults() Config {
	c.Docker = cmp.Or(c.Docker, "docker")
	c.Image = cmp.Or(c.Image, DefaultImage)
	env := map[string]string{}
	for k, v := range DefaultEnv {
		env[k] = v
	}
	for k, v := range c.Env {
		env[k] = v
	}
	c.Env = env
	if c.CapAdd == nil {
		c.CapAdd = []string{"NET_ADMIN"}
	}
	c.HostIP = cmp.Or(c.HostIP, "127.0.0.1")
	if len(c.Ports) == 0 {
		c.Ports = []int{5000, 8006, 9222, 8080}
	}
	c.ServerPort = cmp.Or(c.ServerPort, 5000)
	c.PortBase = cmp.Or(c.PortBase, 20000)
	c.PortRange = cmp.Or(c.PortRange, 10000)
	c.CommandTimeout = cmp.Or(c.CommandTimeout, 5*time.Minute)
	c.ReadyTimeout = cmp.Or(c.ReadyTimeout, 300*time.Second)
	c.PollInterval = cmp.Or(c.PollInterval, time.Second)
	return c
}

// MaxCount bounds docker.count: one host runs a few QEMU/KVM guests
// at most, and a typo such as 20000000 must be an error, not a process that
// builds specs until it runs out of memory.
const MaxCount = 256

// Validate reports every value of c that cannot work, as
// *vmpool.ConfigError values joined; their fields start with "docker.".
func (c Config) Validate() error {
	var v backendkit.Validator
	if c.Count <= 0 || c.Count > MaxCount {
		v.Add("docker.count", "%d: want the number of containers to run, 1 to %d", c.Count, MaxCount)
	}
	if c.HostIP != "" && net.ParseIP(c.HostIP) == nil {
		v.Add("docker.host_ip", "%q: want an IP address such as 127.0.0.1", c.HostIP)
	}
	seen := map[int]bool{}
	for i, p := range c.Ports {
		if p <= 0 || p > 65535 {
			v.Add(fmt.Sprintf("docker.ports[%d]", i), "%d: want a port number, 1-65535", p)
		}
		if seen[p] {
			v.Add(fmt.Sprintf("docker.ports[%d]", i), "%d appears twice", p)
		}
		seen[p] = true
	}
	v.Port("docker.server_port", c.ServerPort)
	if len(c.Ports) > 0 && !seen[cmp.Or(c.ServerPort, 5000)] {
		v.Add("docker.server_port", "%d is not among ports %v; want the guest server's port", cmp.Or(c.ServerPort, 5000), c.Ports)
	}
	if c.PortBase < 0 || c.PortBase > 65535 {
		v.Add("docker.port_base", "%d: want a port number, 1024-65535", c.PortBase)
	} else if c.PortBase > 0 && c.PortBase < 1024 {
		v.Add("docker.port_base", "%d: want a port number of 1024 or more (lower ones need root)", c.PortBase)
	}
	if c.PortRange < 0 || cmp.Or(c.PortBase, 20000)+cmp.Or(c.PortRange, 10000) > 65536 {
		v.Add("docker.port_range", "%d: port_base + port_range must stay within 65536", c.PortRange)
	}
	v.Env("docker.command_env", c.CommandEnv)
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			v.Add("docker.env", "%q: want variable names without '=' or spaces", k)
		}
	}
	v.Positive("docker.command_timeout", c.CommandTimeout)
	v.Positive("docker.ready_timeout", c.ReadyTimeout)
	v.Positive("docker.poll_interval", c.PollInterval)
	return v.Err()
}

// Backend is the "docker" backend. Its containers carry the labels
// codapipe.pool=<pool id> and codapipe.vm=<vm id> and are named
// codapipe-<pool id>-<vm id>. Containers an interrupted run left behind
// (with the pool's label) are removed when the pool starts (VMs) and when
// it closes. The pool id is locked host-wide for the backend's life, so a
// second process with the same pool id fails at once instead of removing
// the first one's containers.
type Backend struct {
	cfg     Config
	poolID  string
	lockDir string
	log     *slog.Logger
	specs   []vmpool.VMSpec
	client  *http.Client

	mu       sync.Mutex
	poolLock *lockfile.Lock
	ports    map[string][]int // vm id → host ports of its live container
}

// New returns the "docker" backend of cfg for pool poolID, with its lock
// files in lockDir (vmpool.DefaultLockDir() if empty). log may be nil.
func New(poolID, lockDir string, cfg Config, log *slog.Logger) (*Backend, error) {
	cfg, err := backendkit.Prepare(cfg, Config.withDefaults)
	poolID = cmp.Or(poolID, vmpool.DefaultPoolID)
	if !vmpool.ValidID(poolID) {
		err = errors.Join(err, &vmpool.ConfigError{Field: "id", Msg: fmt.Sprintf("%q: want letters, digits, '.', '_' and '-' (it labels and names the containers)", poolID)})
	}
	if err != nil {
		return nil, err
	}
	b := &Backend{cfg: cfg, poolID: poolID, lockDir: cmp.Or(lockDir, vmpool.DefaultLockDir()), log: cmp.Or(log, slog.Default()),
		ports: map[string][]int{}, client: guest.NewHTTPClient()}
	for i := 0; i < cfg.Count; i++ {
		id := fmt.Sprintf("docker-%d", i)
		name := b.containerName(id)
		b.specs = append(b.specs, vmpool.VMSpec{ID: id, Key: "docker:" + name, Label: "container " + name + " (" + cfg.Image + ")"})
	}
	return b, nil
}

func (b *Backend) containerName(id string) string { return "codapipe-" + b.poolID + "-" + id }

// Name is "docker".
func (b *Backend) Name() string { return Name }

// VMs takes the pool id's host-wide lock, removes leftover containers with
// the pool's label, and lists the containers to run.
func (b *Backend) VMs(ctx context.Context) ([]vmpool.VMSpec, error) {
	b.mu.Lock()
	if b.poolLock == nil {
		l, holder, err := lockfile.TryLock(b.lockDir, "docker-pool:"+b.poolID, "")
		if err != nil {
			b.mu.Unlock()
			return nil, err
		}
		if l == nil {
			b.mu.Unlock()
			return nil, fmt.Errorf("docker: pool id %q is in use by another process (%s); give this pool its own id (id: in the pool file)", b.poolID, holder)
		}
		b.poolLock = l
	}
	b.mu.Unlock()
	if err := b.removeLeftovers(ctx, "start"); err != nil {
		return nil, err
	}
	return b.specs, nil
}

// removeLeftovers removes every container with the pool's label.
func (b *Backend) removeLeftovers(ctx context.Context, when string) error {
	out, err := b.docker(ctx, "ps", "-a", "--filter", "label="+PoolLabel+"="+b.poolID, "-q")
	if err != nil {
		return fmt.Errorf("docker: listing the pool's containers: %w", err)
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return nil
	}
	b.log.Warn("vmpool: removing containers left by an earlier run", "when", when, "containers", len(ids), "ids", strings.Join(ids, " "))
	if err := b.remove(ctx, ids...); err != nil {
		return fmt.Errorf("docker: removing leftover containers: %w", err)
	}
	return nil
}

// remove runs "docker rm -f"; containers that do not exist are no error.
func (b *Backend) remove(ctx context.Context, names ...string) error {
	_, err := b.docker(ctx, append([]string{"rm", "-f"}, names...)...)
	var ce *backendkit.CommandError
	if errors.As(err, &ce) && ce.Timeout == 0 && strings.Contains(ce.Output(), "No such container") &&
		strings.Count(ce.Output(), "No such container") == strings.Count(ce.Output(), "Error") {
		return nil
	}
	return err
}

func (b *Backend) docker(ctx context.Context, args ...string) (string, error) {
	return backendkit.Run(ctx, b.cfg.CommandTimeout, b.cfg.CommandEnv, b.cfg.Docker, args...)
}

// Start removes any container of the VM and boots a new one.
func (b *Backend) Start(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	return b.Reset(ctx, vm)
}

// Reset removes the VM's container and boots a new one on free host
// ports, then waits until GET /screenshot answers (ready_timeout).
func (b *Backend) Reset(ctx context.Context, vm vmpool.VMSpec) (vmpool.Endpoint, error) {
	name := b.containerName(vm.ID)
	if err := b.remove(ctx, name); err != nil {
		return vmpool.Endpoint{}, fmt.Errorf("docker: removing %s: %w", name, err)
	}
	b.mu.Lock()
	delete(b.ports, vm.ID)
	b.mu.Unlock()

	var ports []int
	var err error
	avoid := map[int]bool{}
	for attempt := 0; attempt < 3; attempt++ {
		ports, err = b.run(ctx, vm, name, avoid)
		var ce *backendkit.CommandError
		if err == nil || !errors.As(err, &ce) || !portTaken(ce.Output()) {
			break
		}
		// Docker holds a port that probing did not see (or something took it
		// between probe and bind): again, on other ports.
		b.log.Warn("vmpool: host port taken while starting a container; retrying", "vm", vm.ID, "err", err)
		for _, p := range ports {
			avoid[p] = true
		}
		_ = b.remove(ctx, name)
	}
	if err != nil {
		return vmpool.Endpoint{}, err
	}
	host := b.cfg.HostIP
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	var server int
	for i, p := range b.cfg.Ports {
		if p == b.cfg.ServerPort {
			server = ports[i]
		}
	}
	ep := vmpool.Endpoint{GuestURL: "http://" + net.JoinHostPort(host, strconv.Itoa(server))}
	what := fmt.Sprintf("docker: container %s at %s", name, ep.GuestURL)
	if err := backendkit.WaitGuest(ctx, b.client, ep, what, b.cfg.ReadyTimeout, b.cfg.PollInterval); err != nil {
		return vmpool.Endpoint{}, err
	}
	return ep, nil
}

func portTaken(out string) bool {
	return strings.Contains(out, "port is already allocated") || strings.Contains(out, "address already in use")
}

// run allocates host ports under the host-wide ports lock and runs the
// container while still holding it, so docker has bound the ports before
// any other process (or VM of ours) probes for free ones.
func (b *Backend) run(ctx context.Context, vm vmpool.VMSpec, name string, avoid map[int]bool) ([]int, error) {
	lock, err := lockfile.Wait(ctx, b.lockDir, "docker-ports", "pool="+b.poolID, 50*time.Millisecond)
	if err != nil {
		return nil, fmt.Errorf("docker: port allocation: %w", err)
	}
	defer lock.Unlock()
	ports, err := b.freePorts(len(b.cfg.Ports), avoid)
	if err != nil {
		return nil, err
	}
	args := []string{"run", "-d", "--name", name,
		"--label", PoolLabel + "=" + b.poolID, "--label", VMLabel + "=" + vm.ID}
	for i, gp := range b.cfg.Ports {
		args = append(args, "-p", fmt.Sprintf("%s:%d:%d", b.cfg.HostIP, ports[i], gp))
	}
	if !b.cfg.NoKVM {
		args = append(args, "--device", "/dev/kvm")
	}
	for _, c := range b.cfg.CapAdd {
		args = append(args, "--cap-add", c)
	}
	keys := make([]string, 0, len(b.cfg.Env))
	for k := range b.cfg.Env {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "-e", k+"="+b.cfg.Env[k])
	}
	if b.cfg.DiskImage != "" {
		if _, err := os.Stat(b.cfg.DiskImage); err != nil {
			return nil, fmt.Errorf("docker: disk_image: %w", err)
		}
		args = append(args, "-v", b.cfg.DiskImage+":/System.qcow2:ro")
	}
	args = append(args, b.cfg.RunArgs...)
	args = append(args, b.cfg.Image)
	if _, err := b.docker(ctx, args...); err != nil {
		return ports, fmt.Errorf("docker: run %s: %w", name, err)
	}
	b.mu.Lock()
	b.ports[vm.ID] = ports
	b.mu.Unlock()
	return ports, nil
}

// freePorts finds n host ports that nothing listens on, that none of our
// containers uses and that are not in avoid, scanning from port_base.
func (b *Backend) freePorts(n int, avoid map[int]bool) ([]int, error) {
	b.mu.Lock()
	ours := map[int]bool{}
	for p := range avoid {
		ours[p] = true
	}
	for _, ps := range b.ports {
		for _, p := range ps {
			ours[p] = true
		}
	}
	b.mu.Unlock()
	var out []int
	for p := b.cfg.PortBase; p < b.cfg.PortBase+b.cfg.PortRange && len(out) < n; p++ {
		if ours[p] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort(b.cfg.HostIP, strconv.Itoa(p)))
		if err != nil {
			continue
		}
		ln.Close()
		out = append(out, p)
	}
	if len(out) < n {
		return nil, fmt.Errorf("docker: fewer than %d free host ports in %d-%d; widen port_range", n, b.cfg.PortBase, b.cfg.PortBase+b.cfg.PortRange-1)
	}
	return out, nil
}

// Health takes a screenshot.
func (b *Backend) Health(ctx context.Context, vm vmpool.VMSpec, g *guest.Client) error {
	return backendkit.ScreenshotHealth(ctx, g)
}

// Stop removes the VM's container.
func (b *Backend) Stop(ctx context.Context, vm vmpool.VMSpec) error {
	name := b.containerName(vm.ID)
	if err := b.remove(ctx, name); err != nil {
		return fmt.Errorf("docker: removing %s: %w", name, err)
	}
	b.mu.Lock()
	delete(b.ports, vm.ID)
	b.mu.Unlock()
	return nil
}

// Close removes every container with the pool's label that is left and
// releases the pool id's lock.
func (b *Backend) Close(ctx context.Context) error {
	var err error
	b.mu.Lock()
	locked := b.poolLock != nil
	b.mu.Unlock()
	if locked {
		err = b.removeLeftovers(ctx, "exit")
		b.mu.Lock()
		_ = b.poolLock.Unlock()
		b.poolLock = nil
		b.mu.Unlock()
	}
	b.client.CloseIdleConnections()
	return err
}
