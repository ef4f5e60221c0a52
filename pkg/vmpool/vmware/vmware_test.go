package vmware

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/backendkit"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/pooltest"
)

type vmwareFixture struct {
	state  string
	vmx    []string
	guests []*pooltest.FakeGuest
	pool   vmpool.Config
	vmware Config
}

// newVMwareFixture makes n VMs for the fake vmrun, each with a fake guest
// server that the reported IP (127.0.0.1) and the VM's guest_port reach.
func newVMwareFixture(t *testing.T, n int) *vmwareFixture {
	t.Helper()
	f := &vmwareFixture{state: t.TempDir()}
	var vms []VM
	for i := 0; i < n; i++ {
		dir := filepath.Join(f.state, "vms", fmt.Sprintf("Ubuntu%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		vmx := filepath.Join(dir, fmt.Sprintf("Ubuntu%d.vmx", i))
		if err := os.WriteFile(vmx, []byte(".encoding = \"UTF-8\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g := pooltest.NewFakeGuest(t)
		u, _ := url.Parse(g.URL())
		var port int
		fmt.Sscanf(u.Port(), "%d", &port)
		f.vmx = append(f.vmx, vmx)
		f.guests = append(f.guests, g)
		vms = append(vms, VM{VMX: vmx, GuestPort: port})
	}
	f.pool = pooltest.Config(t)
	f.vmware = Config{
		Vmrun:          pooltest.FakeExec(t, "fake-vmrun"),
		CommandEnv:     []string{"FAKE_VMRUN_STATE=" + f.state},
		Snapshot:       "init_state",
		CommandTimeout: 5 * time.Second,
		IPTimeout:      2 * time.Second,
		ReadyTimeout:   2 * time.Second,
		PollInterval:   10 * time.Millisecond,
		VMs:            vms,
	}
	return f
}

// newPool makes a pool under f.pool over the vmware backend of f.vmware.
func (f *vmwareFixture) newPool(t *testing.T) *pooltest.Pool {
	t.Helper()
	return pooltest.NewLoggedPool(t, f.pool, func(log *slog.Logger) (vmpool.Backend, error) { return New(f.vmware, log) })
}

// mark creates a marker file of the fake vmrun for VM i.
func (f *vmwareFixture) mark(t *testing.T, i int, marker, content string) {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(f.vmx[i]), ".vmx")
	if err := os.WriteFile(filepath.Join(f.state, name+"."+marker), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// count is the number of the fake vmrun's invocations so far that contain
// s.
func (f *vmwareFixture) count(t *testing.T, s string) int {
	t.Helper()
	n := 0
	for _, c := range f.calls(t) {
		if strings.Contains(c, s) {
			n++
		}
	}
	return n
}

// calls returns the fake vmrun's invocations so far, with the state
// directory written as $S.
func (f *vmwareFixture) calls(t *testing.T) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.state, "calls.log"))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		if l != "" {
			out = append(out, strings.ReplaceAll(l, f.state, "$S"))
		}
	}
	return out
}

func TestVMwareStartAndReset(t *testing.T) {
	f := newVMwareFixture(t, 1)
	p := f.newPool(t)
	l := p.MustLease(t)
	vmx := "$S/vms/Ubuntu0/Ubuntu0.vmx"
	want := []string{
		"-T ws revertToSnapshot " + vmx + " init_state",
		"-T ws list",
		"-T ws start " + vmx + " nogui",
		"-T ws getGuestIPAddress " + vmx + " -wait",
		"-T ws getGuestIPAddress " + vmx + " -wait", // again after the network bounce
	}
	if got := f.calls(t); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("vmrun calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if l.ID() != "Ubuntu0" || l.Guest().BaseURL() != f.guests[0].URL() || l.Spec().Key != "vmware:"+f.vmx[0] {
		t.Fatalf("lease %s at %s (key %s)", l.ID(), l.Guest().BaseURL(), l.Spec().Key)
	}
	if ex := f.guests[0].Calls().Execs; len(ex) != 1 || !strings.Contains(ex[0], "nmcli connection down") {
		t.Fatalf("guest commands %q, want one network bounce", ex)
	}
	if _, err := l.Guest().Screenshot(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A reset reverts; the VM is running, so it is not started again.
	_ = l.End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventReady, "Ubuntu0", 2)
	got := f.calls(t)[len(want):]
	wantReset := []string{want[0], want[1], want[3], want[4]}
	if strings.Join(got, "\n") != strings.Join(wantReset, "\n") {
		t.Fatalf("vmrun calls of the reset:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantReset, "\n"))
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := f.count(t, " stop "); n != 0 {
		t.Fatalf("VM stopped %d times without stop_on_close:\n%s", n, strings.Join(f.calls(t), "\n"))
	}
}

// A snapshot taken powered off leaves the VM stopped after the revert: the
// backend starts it.
func TestVMwarePoweredOffSnapshot(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "offsnapshot", "")
	p := f.newPool(t)
	_ = p.MustLease(t).End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventReady, "Ubuntu0", 2)
	if starts := f.count(t, "-T ws start "); starts != 2 {
		t.Fatalf("%d starts, want one per revert:\n%s", starts, strings.Join(f.calls(t), "\n"))
	}
}

// A VM that vmrun lists as running but that never gets an IP is stuck: it
// is quarantined after one try, and the pool carries on with the others.
func TestVMwareRunningButNoIP(t *testing.T) {
	f := newVMwareFixture(t, 2)
	f.mark(t, 1, "noip", "")
	f.vmware.IPTimeout = 300 * time.Millisecond
	p := f.newPool(t)
	q := p.WantQuarantine(t, "Ubuntu1", "start timed out",
		"vm Ubuntu1: start", "got no IP within 300ms", "vmrun lists it as running", "getGuestIPAddress")
	if !errors.Is(q.Err, vmpool.ErrStuck) {
		t.Fatalf("quarantine error %v does not match ErrStuck", q.Err)
	}
	if l := p.MustLease(t); l.ID() != "Ubuntu0" {
		t.Fatalf("got %s", l.ID())
	}
}

func TestVMwareRevertFailure(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "revertfail", "")
	p := f.newPool(t)
	q := p.WantQuarantine(t, "Ubuntu0", "3 failures in a row", `the snapshot "init_state"`, "could not be restored")
	if reverts := f.count(t, "revertToSnapshot"); reverts != 3 {
		t.Fatalf("%d reverts, want 3 (quarantine_after)", reverts)
	}
	if ce := (*backendkit.CommandError)(nil); !errors.As(q.Err, &ce) || ce.ExitCode != 1 {
		t.Fatalf("error %v is not vmrun's exit status 1", q.Err)
	}
	if _, err := p.Lease(context.Background()); !errors.Is(err, vmpool.ErrNoVMs) {
		t.Fatalf("Lease: %v", err)
	}
}

func TestVMwareSlowStart(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "startdelay", "0.3")
	p := f.newPool(t)
	p.MustLease(t)
	for _, ev := range p.Events.Events() {
		if ev.Kind == vmpool.EventReady && ev.Duration < 300*time.Millisecond {
			t.Fatalf("ready after %v, but start takes 300ms", ev.Duration)
		}
	}
}

func TestVMwareStartHangs(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "startdelay", "30")
	f.vmware.CommandTimeout = 200 * time.Millisecond
	p := f.newPool(t)
	q := p.WantQuarantine(t, "Ubuntu0", "start timed out", "nogui: no answer within")
	if ce := (*backendkit.CommandError)(nil); !errors.As(q.Err, &ce) || ce.Timeout == 0 {
		t.Fatalf("error %v is not a vmrun call killed for its deadline", q.Err)
	}
	p.CloseWithin(t, 5*time.Second)
}

func TestVMwareBounceFailureTolerated(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.guests[0].Set(func(g *pooltest.FakeGuest) { g.ExecFail = true })
	p := f.newPool(t)
	p.MustLease(t)
	if !strings.Contains(p.Log.String(), "network bounce after revert failed") {
		t.Fatalf("no warning about the failed bounce:\n%s", p.Log)
	}
}

func TestVMwareGuestNeverReady(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.guests[0].Set(func(g *pooltest.FakeGuest) { g.ShotFail = true })
	f.vmware.ReadyTimeout = 200 * time.Millisecond
	p := f.newPool(t)
	if q := p.WantQuarantine(t, "Ubuntu0", "", "not ready within"); !errors.Is(q.Err, vmpool.ErrStuck) {
		t.Fatalf("quarantine error %v does not match ErrStuck", q.Err)
	}
}

func TestVMwareStopOnClose(t *testing.T) {
	f := newVMwareFixture(t, 2)
	f.vmware.StopOnClose = true
	f.vmware.StopMode = "hard"
	p := f.newPool(t)
	p.Events.WaitCount(t, vmpool.EventReady, "", 2)
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(f.calls(t), "\n")
	for i := range f.vmx {
		want := fmt.Sprintf("-T ws stop $S/vms/Ubuntu%d/Ubuntu%d.vmx hard", i, i)
		if !strings.Contains(calls, want) {
			t.Fatalf("no %q in:\n%s", want, calls)
		}
	}
	if m, _ := filepath.Glob(filepath.Join(f.state, "*.running")); len(m) != 0 {
		t.Fatalf("still running: %v", m)
	}
}

func TestVMwareConfigErrors(t *testing.T) {
	pooltest.WantConfigErrors(t, []pooltest.ConfigCase[Config]{
		{Name: "no VMs", Cfg: Config{}, Want: "vmware.vms: empty"},
		{Name: "no snapshot", Cfg: Config{VMs: []VM{{VMX: "/a.vmx"}}}, Want: "vmware.vms[0].snapshot: missing"},
		{Name: "not a vmx", Cfg: Config{Snapshot: "s", VMs: []VM{{VMX: "/a.vmdk"}}}, Want: "want the path of a .vmx file"},
		{Name: "bad type", Cfg: Config{Snapshot: "s", Type: "hyperv", VMs: []VM{{VMX: "/a.vmx"}}}, Want: "vmware.type"},
		{Name: "bad IP", Cfg: Config{Snapshot: "s", VMs: []VM{{VMX: "/a.vmx", IP: "10.0.0"}}}, Want: "vmware.vms[0].ip"},
		{Name: "bad stop mode", Cfg: Config{Snapshot: "s", StopMode: "now", VMs: []VM{{VMX: "/a.vmx"}}}, Want: "stop_mode"},
	}, func(c Config) error { _, err := New(c, nil); return err })
}
