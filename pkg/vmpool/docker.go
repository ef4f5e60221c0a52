package vmpool

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

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/lockfile"
)

// DockerConfig configures the "docker" backend: OSWorld-style containers,
// each a QEMU/KVM VM whose guest ports (5000 guest server, 8006 VNC, 9222
// Chromium, 8080 VLC) are published on free host ports. A reset removes the
// container and boots a new one.
type DockerConfig struct {
	// Docker is the docker CLI. Default "docker" (on PATH).
	Docker string `yaml:"docker"`
	// Image is the container image. Default DefaultDockerImage.
	Image string `yaml:"image"`
	// Count is the number of containers (VMs docker-0 ... docker-N-1).
	Count int `yaml:"count"`
	// DiskImage is the VM disk (qcow2) on the host, mounted read-only at
	// /System.qcow2 as OSWorld's image expects. Empty: none is mounted.
	DiskImage string `yaml:"disk_image"`
	// Env is the containers' environment, on top of DefaultDockerEnv.
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
	PortBase  int `yaml:"port_base"`
	PortRange int `yaml:"port_range"`
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

// DefaultDockerImage is OSWorld's VM image.
const DefaultDockerImage = "happysixd/osworld-docker"

// DefaultDockerEnv is the containers' default environment (OSWorld's).
var DefaultDockerEnv = map[string]string{"DISK_SIZE": "32G", "RAM_SIZE": "4G", "CPU_CORES": "4"}

// Labels of the docker backend's containers.
const (
	DockerPoolLabel = "codapipe.pool"
	DockerVMLabel   = "codapipe.vm"
)

func (c DockerConfig) withDefaults() DockerConfig {
	c.Docker = cmp.Or(c.Docker, "docker")
	c.Image = cmp.Or(c.Image, DefaultDockerImage)
	env := map[string]string{}
	for k, v := range DefaultDockerEnv {
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

// MaxDockerCount bounds docker.count: one host runs a few QEMU/KVM guests
// at most, and a typo such as 20000000 must be an error, not a process that
// builds specs until it runs out of memory.
const MaxDockerCount = 256

// Validate reports every value of c that cannot work, as *ConfigError
// values joined; their fields start with "docker.".
func (c DockerConfig) Validate() error {
	var v validator
	c.validate(&v, "docker")
	return v.err()
}

func (c DockerConfig) validate(v *validator, at string) {
	if c.Count <= 0 || c.Count > MaxDockerCount {
		v.add(at+".count", "%d: want the number of containers to run, 1 to %d", c.Count, MaxDockerCount)
	}
	if c.HostIP != "" && net.ParseIP(c.HostIP) == nil {
		v.add(at+".host_ip", "%q: want an IP address such as 127.0.0.1", c.HostIP)
	}
	seen := map[int]bool{}
	for i, p := range c.Ports {
		if p <= 0 || p > 65535 {
			v.add(fmt.Sprintf("%s.ports[%d]", at, i), "%d: want a port number, 1-65535", p)
		}
		if seen[p] {
			v.add(fmt.Sprintf("%s.ports[%d]", at, i), "%d appears twice", p)
		}
		seen[p] = true
	}
	validatePort(v, at+".server_port", c.ServerPort)
	if len(c.Ports) > 0 && !seen[cmp.Or(c.ServerPort, 5000)] {
		v.add(at+".server_port", "%d is not among ports %v; want the guest server's port", cmp.Or(c.ServerPort, 5000), c.Ports)
	}
	if c.PortBase < 0 || c.PortBase > 65535 {
		v.add(at+".port_base", "%d: want a port number, 1024-65535", c.PortBase)
	} else if c.PortBase > 0 && c.PortBase < 1024 {
		v.add(at+".port_base", "%d: want a port number of 1024 or more (lower ones need root)", c.PortBase)
	}
	if c.PortRange < 0 || cmp.Or(c.PortBase, 20000)+cmp.Or(c.PortRange, 10000) > 65536 {
		v.add(at+".port_range", "%d: port_base + port_range must stay within 65536", c.PortRange)
	}
	validateEnv(v, at+".command_env", c.CommandEnv)
	for k := range c.Env {
		if k == "" || strings.ContainsAny(k, "= \t\n") {
			v.add(at+".env", "%q: want variable names without '=' or spaces", k)
		}
	}
	validatePositive(v, at+".command_timeout", c.CommandTimeout)
	validatePositive(v, at+".ready_timeout", c.ReadyTimeout)
	validatePositive(v, at+".poll_interval", c.PollInterval)
}

// DockerBackend is the "docker" backend. Its containers carry the labels
// codapipe.pool=<pool id> and codapipe.vm=<vm id> and are named
// codapipe-<pool id>-<vm id>. Containers an interrupted run left behind
// (with the pool's label) are removed when the pool starts (VMs) and when
// it closes. The pool id is locked host-wide for the backend's life, so a
// second process with the same pool id fails at once instead of removing
// the first one's containers.
type DockerBackend struct {
	cfg     DockerConfig
	poolID  string
	lockDir string
	log     *slog.Logger
	specs   []VMSpec
	client  *http.Client

	mu       sync.Mutex
	poolLock *lockfile.Lock
	ports    map[string][]int // vm id → host ports of its live container
}

// NewDockerBackend returns the "docker" backend of cfg for pool poolID,
// with its lock files in lockDir (DefaultLockDir() if empty). log may be
// nil.
func NewDockerBackend(poolID, lockDir string, cfg DockerConfig, log *slog.Logger) (*DockerBackend, error) {
	cfg = cfg.withDefaults()
	poolID = cmp.Or(poolID, DefaultPoolID)
	var v validator
	cfg.validate(&v, "docker")
	if !ValidID(poolID) {
		v.add("id", "%q: want letters, digits, '.', '_' and '-' (it labels and names the containers)", poolID)
	}
	if err := v.err(); err != nil {
		return nil, err
	}
	if log == nil {
		log = slog.Default()
	}
	b := &DockerBackend{cfg: cfg, poolID: poolID, lockDir: cmp.Or(lockDir, DefaultLockDir()), log: log,
		ports: map[string][]int{}}
	b.client = guest.NewHTTPClient()
	for i := 0; i < cfg.Count; i++ {
		id := fmt.Sprintf("docker-%d", i)
		name := b.containerName(id)
		b.specs = append(b.specs, VMSpec{ID: id, Key: "docker:" + name, Label: "container " + name + " (" + cfg.Image + ")"})
	}
	return b, nil
}

func (b *DockerBackend) containerName(id string) string { return "codapipe-" + b.poolID + "-" + id }

// Name is "docker".
func (b *DockerBackend) Name() string { return BackendDocker }

// VMs takes the pool id's host-wide lock, removes leftover containers with
// the pool's label, and lists the containers to run.
func (b *DockerBackend) VMs(ctx context.Context) ([]VMSpec, error) {
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
func (b *DockerBackend) removeLeftovers(ctx context.Context, when string) error {
	out, err := b.docker(ctx, "ps", "-a", "--filter", "label="+DockerPoolLabel+"="+b.poolID, "-q")
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
func (b *DockerBackend) remove(ctx context.Context, names ...string) error {
	_, err := b.docker(ctx, append([]string{"rm", "-f"}, names...)...)
	var ce *CommandError
	if errors.As(err, &ce) && ce.Timeout == 0 && strings.Contains(ce.Output(), "No such container") &&
		strings.Count(ce.Output(), "No such container") == strings.Count(ce.Output(), "Error") {
		return nil
	}
	return err
}

func (b *DockerBackend) docker(ctx context.Context, args ...string) (string, error) {
	return runCommand(ctx, b.cfg.CommandTimeout, b.cfg.CommandEnv, b.cfg.Docker, args...)
}

// Start removes any container of the VM and boots a new one.
func (b *DockerBackend) Start(ctx context.Context, vm VMSpec) (Endpoint, error) {
	return b.Reset(ctx, vm)
}

// Reset removes the VM's container and boots a new one on free host
// ports, then waits until GET /screenshot answers (ready_timeout).
func (b *DockerBackend) Reset(ctx context.Context, vm VMSpec) (Endpoint, error) {
	name := b.containerName(vm.ID)
	if err := b.remove(ctx, name); err != nil {
		return Endpoint{}, fmt.Errorf("docker: removing %s: %w", name, err)
	}
	b.mu.Lock()
	delete(b.ports, vm.ID)
	b.mu.Unlock()

	var ports []int
	var err error
	avoid := map[int]bool{}
	for attempt := 0; attempt < 3; attempt++ {
		ports, err = b.run(ctx, vm, name, avoid)
		var ce *CommandError
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
		return Endpoint{}, err
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
	ep := Endpoint{GuestURL: "http://" + net.JoinHostPort(host, strconv.Itoa(server))}
	probe, err := screenshotProbe(b.client, ep)
	if err != nil {
		return Endpoint{}, err
	}
	what := fmt.Sprintf("docker: container %s at %s", name, ep.GuestURL)
	if err := waitReady(ctx, what, b.cfg.ReadyTimeout, b.cfg.PollInterval, probe); err != nil {
		return Endpoint{}, err
	}
	return ep, nil
}

func portTaken(out string) bool {
	return strings.Contains(out, "port is already allocated") || strings.Contains(out, "address already in use")
}

// run allocates host ports under the host-wide ports lock and runs the
// container while still holding it, so docker has bound the ports before
// any other process (or VM of ours) probes for free ones.
func (b *DockerBackend) run(ctx context.Context, vm VMSpec, name string, avoid map[int]bool) ([]int, error) {
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
		"--label", DockerPoolLabel + "=" + b.poolID, "--label", DockerVMLabel + "=" + vm.ID}
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
func (b *DockerBackend) freePorts(n int, avoid map[int]bool) ([]int, error) {
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
func (b *DockerBackend) Health(ctx context.Context, vm VMSpec, g *guest.Client) error {
	_, err := g.Screenshot(ctx)
	return err
}

// Stop removes the VM's container.
func (b *DockerBackend) Stop(ctx context.Context, vm VMSpec) error {
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
func (b *DockerBackend) Close(ctx context.Context) error {
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
