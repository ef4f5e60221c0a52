package docker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/pooltest"
)

// fakeDockerd plays the docker daemon for the fake docker CLI: it binds
// the published ports of every container the CLI creates (the one mapped
// to guest port 5000 serves a fake guest, which refuses to answer until the
// container has "booted") and lets them go when the container is removed.
type fakeDockerd struct {
	dir   string
	guest *pooltest.FakeGuest

	mu   sync.Mutex
	boot time.Duration
	live map[string][]net.Listener
	stop chan struct{}
	done chan struct{}
}

func newFakeDockerd(t *testing.T) *fakeDockerd {
	t.Helper()
	d := &fakeDockerd{dir: t.TempDir(), guest: pooltest.NewFakeGuest(t), live: map[string][]net.Listener{},
		stop: make(chan struct{}), done: make(chan struct{})}
	if err := os.MkdirAll(filepath.Join(d.dir, "containers"), 0o755); err != nil {
		t.Fatal(err)
	}
	go d.loop()
	t.Cleanup(d.close)
	return d
}

func (d *fakeDockerd) setBoot(b time.Duration) {
	d.mu.Lock()
	d.boot = b
	d.mu.Unlock()
}

func (d *fakeDockerd) close() {
	select {
	case <-d.stop:
		return
	default:
	}
	close(d.stop)
	<-d.done
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, lns := range d.live {
		for _, ln := range lns {
			ln.Close()
		}
		delete(d.live, id)
	}
}

func (d *fakeDockerd) loop() {
	defer close(d.done)
	t := time.NewTicker(3 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
		}
		d.sync()
	}
}

func (d *fakeDockerd) sync() {
	entries, _ := os.ReadDir(filepath.Join(d.dir, "containers"))
	seen := map[string]bool{}
	for _, e := range entries {
		id := e.Name()
		if strings.HasSuffix(id, ".tmp") {
			continue
		}
		seen[id] = true
		d.mu.Lock()
		_, ok := d.live[id]
		d.mu.Unlock()
		if ok {
			continue
		}
		cdir := filepath.Join(d.dir, "containers", id)
		ports, err := os.ReadFile(filepath.Join(cdir, "ports"))
		if err != nil {
			continue
		}
		var lns []net.Listener
		failed := os.Remove(filepath.Join(d.dir, "bindfail-once")) == nil // a port race, once
		for _, p := range strings.Fields(string(ports)) {
			if failed {
				break
			}
			parts := strings.Split(p, ":") // HOSTIP:HOSTPORT:GUESTPORT
			if len(parts) != 3 {
				continue
			}
			ln, err := net.Listen("tcp", net.JoinHostPort(parts[0], parts[1]))
			if err != nil {
				failed = true
				break
			}
			lns = append(lns, ln)
			if parts[2] == "5000" {
				d.mu.Lock()
				bootAt := time.Now().Add(d.boot)
				d.mu.Unlock()
				go func() { _ = http.Serve(ln, d.booting(bootAt)) }()
			}
		}
		if failed {
			for _, ln := range lns {
				ln.Close()
			}
			_ = os.WriteFile(filepath.Join(cdir, "bindfail"), nil, 0o644)
			d.mu.Lock()
			d.live[id] = nil
			d.mu.Unlock()
			continue
		}
		d.mu.Lock()
		d.live[id] = lns
		d.mu.Unlock()
		_ = os.WriteFile(filepath.Join(cdir, "bound"), nil, 0o644)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for id, lns := range d.live {
		if !seen[id] {
			for _, ln := range lns {
				ln.Close()
			}
			delete(d.live, id)
		}
	}
}

// booting drops connections until bootAt, as a container whose VM has not
// booted yet does, then serves the fake guest.
func (d *fakeDockerd) booting(bootAt time.Time) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if time.Now().Before(bootAt) {
			if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
				conn.Close()
			}
			return
		}
		d.guest.ServeHTTP(w, r)
	})
}

// containers lists the containers the fake CLI knows: id → labels.
func (d *fakeDockerd) containers(t *testing.T) map[string]string {
	t.Helper()
	entries, _ := os.ReadDir(filepath.Join(d.dir, "containers"))
	out := map[string]string{}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".tmp") {
			continue
		}
		labels, _ := os.ReadFile(filepath.Join(d.dir, "containers", e.Name(), "labels"))
		out[e.Name()] = strings.TrimSpace(string(labels))
	}
	return out
}

// mark creates the fake CLI's or daemon's marker file name (runfail: every
// docker run fails; bindfail-once: the next container loses a port race).
func (d *fakeDockerd) mark(t *testing.T, name string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(d.dir, name), nil, 0o644); err != nil {
		t.Fatal(err)
	}
}

// addContainer creates a container as an earlier run would have left it.
func (d *fakeDockerd) addContainer(t *testing.T, id, name string, labels ...string) {
	t.Helper()
	dir := filepath.Join(d.dir, "containers", id)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "name"), []byte(name+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "labels"), []byte(strings.Join(labels, "\n")+"\n"), 0o644)
	_ = os.WriteFile(filepath.Join(dir, "ports"), nil, 0o644)
}

func (d *fakeDockerd) calls(t *testing.T) []string {
	t.Helper()
	data, _ := os.ReadFile(filepath.Join(d.dir, "calls.log"))
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// dockerConfig is a pool "t1" of count containers of the fake docker CLI
// and d.
func dockerConfig(t *testing.T, d *fakeDockerd, count int) (vmpool.Config, Config) {
	t.Helper()
	disk := filepath.Join(t.TempDir(), "Ubuntu.qcow2")
	_ = os.WriteFile(disk, []byte("qcow2"), 0o644)
	cfg := pooltest.Config(t)
	cfg.ID = "t1"
	dc := Config{
		Docker:       pooltest.FakeExec(t, "fake-docker"),
		CommandEnv:   []string{"FAKE_DOCKER_STATE=" + d.dir},
		Count:        count,
		DiskImage:    disk,
		PortBase:     20000 + rand.IntN(120)*100, // apart from other test processes on this host
		ReadyTimeout: 3 * time.Second,
		PollInterval: 10 * time.Millisecond,
	}
	return cfg, dc
}

// newPool makes a pool "t1" of count containers of d; edit, if not nil,
// changes the backend's configuration first.
func (d *fakeDockerd) newPool(t *testing.T, count int, edit func(dc *Config)) *pooltest.Pool {
	t.Helper()
	cfg, dc := dockerConfig(t, d, count)
	if edit != nil {
		edit(&dc)
	}
	return newDockerPool(t, cfg, dc)
}

// newDockerPool makes a pool under cfg over the docker backend of dc.
func newDockerPool(t *testing.T, cfg vmpool.Config, dc Config) *pooltest.Pool {
	t.Helper()
	return pooltest.NewLoggedPool(t, cfg, func(log *slog.Logger) (vmpool.Backend, error) {
		return New(cfg.ID, cfg.LockDir, dc, log)
	})
}

// newDockerBackend is the docker backend of dc for the pool cfg.
func newDockerBackend(t *testing.T, cfg vmpool.Config, dc Config) *Backend {
	t.Helper()
	b, err := New(cfg.ID, cfg.LockDir, dc, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDockerLeftoversRemovedAtStart(t *testing.T) {
	d := newFakeDockerd(t)
	d.addContainer(t, "0ld1", "codapipe-t1-docker-0", "codapipe.pool=t1", "codapipe.vm=docker-0")
	d.addContainer(t, "0ld2", "codapipe-t1-docker-7", "codapipe.pool=t1", "codapipe.vm=docker-7")
	d.addContainer(t, "0th3r", "codapipe-other-docker-0", "codapipe.pool=other", "codapipe.vm=docker-0")
	p := d.newPool(t, 1, nil)
	calls := d.calls(t)
	if len(calls) < 2 || calls[0] != "ps -a --filter label=codapipe.pool=t1 -q" || !strings.HasPrefix(calls[1], "rm -f ") ||
		!strings.Contains(calls[1], "0ld1") || !strings.Contains(calls[1], "0ld2") {
		t.Fatalf("calls:\n%s", strings.Join(calls, "\n"))
	}
	cs := d.containers(t)
	if _, ok := cs["0ld1"]; ok {
		t.Fatal("leftover container 0ld1 not removed")
	}
	if _, ok := cs["0th3r"]; !ok {
		t.Fatal("another pool's container was removed")
	}
	if !strings.Contains(p.Log.String(), "removing containers left by an earlier run") {
		t.Fatalf("no log line about leftovers:\n%s", p.Log)
	}
	p.MustLease(t)
}

func TestDockerRunPortsAndLabels(t *testing.T) {
	d := newFakeDockerd(t)
	p := d.newPool(t, 3, func(dc *Config) { dc.Env = map[string]string{"RAM_SIZE": "8G"} })
	var leases []*vmpool.Lease
	for i := 0; i < 3; i++ {
		leases = append(leases, p.MustLease(t))
	}
	seen := map[string]string{}
	for _, c := range d.calls(t) {
		if !strings.HasPrefix(c, "run ") {
			continue
		}
		args := strings.Fields(c)
		var vm string
		var ports []string
		for i := 0; i < len(args)-1; i++ {
			switch args[i] {
			case "--label":
				if v, ok := strings.CutPrefix(args[i+1], "codapipe.vm="); ok {
					vm = v
				}
			case "-p":
				ports = append(ports, args[i+1])
			}
		}
		for _, want := range []string{"-d", "--name codapipe-t1-" + vm, "--label codapipe.pool=t1", "--device /dev/kvm",
			"--cap-add NET_ADMIN", "-e RAM_SIZE=8G", "-e CPU_CORES=4", ":/System.qcow2:ro"} {
			if !strings.Contains(c, want) {
				t.Errorf("run of %s lacks %q: %s", vm, want, c)
			}
		}
		if args[len(args)-1] != DefaultImage {
			t.Errorf("image %q, want %q last", args[len(args)-1], DefaultImage)
		}
		if len(ports) != 4 {
			t.Fatalf("run of %s publishes %v, want 4 ports", vm, ports)
		}
		for i, gp := range []string{"5000", "8006", "9222", "8080"} {
			parts := strings.Split(ports[i], ":")
			if len(parts) != 3 || parts[0] != "127.0.0.1" || parts[2] != gp {
				t.Fatalf("port mapping %q, want 127.0.0.1:HOST:%s", ports[i], gp)
			}
			if other, dup := seen[parts[1]]; dup {
				t.Fatalf("host port %s given to %s and %s", parts[1], other, vm)
			}
			seen[parts[1]] = vm
		}
	}
	if len(seen) != 12 {
		t.Fatalf("%d host ports, want 12", len(seen))
	}
	for _, l := range leases {
		if _, err := l.Guest().Screenshot(context.Background()); err != nil {
			t.Fatalf("%s: %v", l.ID(), err)
		}
	}
}

func TestDockerResetRecreatesContainer(t *testing.T) {
	d := newFakeDockerd(t)
	p := d.newPool(t, 1, nil)
	l := p.MustLease(t)
	before := d.containers(t)
	_ = l.End(vmpool.Healthy)
	l2 := p.MustLease(t)
	after := d.containers(t)
	if len(before) != 1 || len(after) != 1 {
		t.Fatalf("containers before %v, after %v", before, after)
	}
	for id := range before {
		if _, ok := after[id]; ok {
			t.Fatal("the reset kept the container")
		}
	}
	var rms, runs int
	for _, c := range d.calls(t) {
		switch {
		case c == "rm -f codapipe-t1-docker-0":
			rms++
		case strings.HasPrefix(c, "run "):
			runs++
		}
	}
	if rms != 2 || runs != 2 {
		t.Fatalf("%d rm, %d run, want 2 each:\n%s", rms, runs, strings.Join(d.calls(t), "\n"))
	}
	if _, err := l2.Guest().Screenshot(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDockerCleanupOnClose(t *testing.T) {
	d := newFakeDockerd(t)
	check := pooltest.GoroutineBaseline(t)
	cfg, dc := dockerConfig(t, d, 2)
	p, err := vmpool.NewPool(context.Background(), cfg, newDockerBackend(t, cfg, dc), vmpool.WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	l, err := p.Lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Guest().Screenshot(context.Background()); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, "both containers", 10*time.Second, func() bool { return len(d.containers(t)) == 2 })
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if cs := d.containers(t); len(cs) != 0 {
		t.Fatalf("containers left after Close: %v", cs)
	}
	calls := d.calls(t)
	if last := calls[len(calls)-1]; last != "ps -a --filter label=codapipe.pool=t1 -q" {
		t.Fatalf("last call %q, want the pool's label sweep", last)
	}
	poll.Until(t, "the daemon to unbind", 10*time.Second, func() bool {
		d.sync()
		d.mu.Lock()
		defer d.mu.Unlock()
		return len(d.live) == 0
	})
	check()
}

func TestDockerSlowBoot(t *testing.T) {
	d := newFakeDockerd(t)
	d.setBoot(300 * time.Millisecond)
	p := d.newPool(t, 1, nil)
	p.MustLease(t)
	for _, ev := range p.Events.Events() {
		if ev.Kind == vmpool.EventReady && ev.Duration < 300*time.Millisecond {
			t.Fatalf("ready after %v, before the container booted", ev.Duration)
		}
	}
}

func TestDockerNeverBoots(t *testing.T) {
	d := newFakeDockerd(t)
	d.setBoot(time.Hour)
	p := d.newPool(t, 1, func(dc *Config) { dc.ReadyTimeout = 200 * time.Millisecond })
	if q := p.WantQuarantine(t, "docker-0", "", "not ready within"); !errors.Is(q.Err, vmpool.ErrStuck) {
		t.Fatalf("quarantine error %v does not match ErrStuck", q.Err)
	}
	if _, err := p.Lease(context.Background()); !errors.Is(err, vmpool.ErrNoVMs) {
		t.Fatalf("Lease: %v", err)
	}
}

func TestDockerRunFails(t *testing.T) {
	d := newFakeDockerd(t)
	d.mark(t, "runfail")
	p := d.newPool(t, 1, nil)
	p.WantQuarantine(t, "docker-0", "3 failures in a row", "pull access denied")
}

// A host port taken by something else is skipped.
func TestDockerSkipsBusyPorts(t *testing.T) {
	d := newFakeDockerd(t)
	// A port the kernel hands out is free until we hold it: start the
	// pool's port range there.
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	port := busy.Addr().(*net.TCPAddr).Port
	p := d.newPool(t, 1, func(dc *Config) { dc.PortBase, dc.PortRange = port, min(100, 65536-port) })
	p.MustLease(t)
	for _, c := range d.calls(t) {
		if strings.HasPrefix(c, "run ") && strings.Contains(c, fmt.Sprintf(":%d:", port)) {
			t.Fatalf("busy port used: %s", c)
		}
	}
}

// A run that loses a host port to someone else after the probe is retried
// on other ports.
func TestDockerPortRaceRetried(t *testing.T) {
	d := newFakeDockerd(t)
	d.mark(t, "bindfail-once")
	p := d.newPool(t, 1, nil)
	l := p.MustLease(t)
	var runs []string
	for _, c := range d.calls(t) {
		if strings.HasPrefix(c, "run ") {
			runs = append(runs, c)
		}
	}
	if len(runs) != 2 || runs[0] == runs[1] {
		t.Fatalf("runs, want a second one on other ports:\n%s", strings.Join(runs, "\n"))
	}
	if !strings.Contains(p.Log.String(), "host port taken while starting a container; retrying") {
		t.Fatalf("log:\n%s", p.Log)
	}
	if _, err := l.Guest().Screenshot(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestDockerPoolIDInUse(t *testing.T) {
	d := newFakeDockerd(t)
	cfg, dc := dockerConfig(t, d, 1)
	newDockerPool(t, cfg, dc)
	_, err := vmpool.NewPool(context.Background(), cfg, newDockerBackend(t, cfg, dc), vmpool.WithLogger(slog.New(slog.DiscardHandler)))
	if err == nil || !strings.Contains(err.Error(), `pool id "t1" is in use by another process`) {
		t.Fatalf("second pool with the same id: %v", err)
	}
}

func TestDockerConfigErrors(t *testing.T) {
	pooltest.WantConfigErrors(t, []pooltest.ConfigCase[Config]{
		{Name: "no count", Cfg: Config{}, Want: "docker.count"},
		{Name: "host IP", Cfg: Config{Count: 1, HostIP: "localhost"}, Want: "docker.host_ip"},
		{Name: "port twice", Cfg: Config{Count: 1, Ports: []int{8006, 8006}}, Want: "appears twice"},
		{Name: "no server port", Cfg: Config{Count: 1, Ports: []int{8006}}, Want: "docker.server_port"},
		{Name: "low port base", Cfg: Config{Count: 1, PortBase: 80}, Want: "docker.port_base"},
		{Name: "port range", Cfg: Config{Count: 1, PortBase: 65000, PortRange: 1000}, Want: "docker.port_range"},
		{Name: "env name", Cfg: Config{Count: 1, Env: map[string]string{"A=B": "c"}}, Want: "docker.env"},
	}, func(c Config) error { _, err := New("p", t.TempDir(), c, nil); return err })
	if _, err := New("bad id", t.TempDir(), Config{Count: 1}, nil); err == nil {
		t.Error("pool id with a space accepted")
	}
}
