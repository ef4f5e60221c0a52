package vmpool

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
)

// fakeExec copies a fake executable from testdata into a temporary
// directory with the execute bit set, and returns its path.
func fakeExec(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

type vmwareFixture struct {
	state  string
	vmx    []string
	guests []*fakeGuest
	pool   Config
	vmware VMwareConfig
}

// newVMwareFixture makes n VMs for the fake vmrun, each with a fake guest
// server that the reported IP (127.0.0.1) and the VM's guest_port reach.
func newVMwareFixture(t *testing.T, n int) *vmwareFixture {
	t.Helper()
	f := &vmwareFixture{state: t.TempDir()}
	var vms []VMwareVM
	for i := 0; i < n; i++ {
		dir := filepath.Join(f.state, "vms", fmt.Sprintf("Ubuntu%d", i))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		vmx := filepath.Join(dir, fmt.Sprintf("Ubuntu%d.vmx", i))
		if err := os.WriteFile(vmx, []byte(".encoding = \"UTF-8\"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		g := newFakeGuest(t)
		u, _ := url.Parse(g.URL())
		var port int
		fmt.Sscanf(u.Port(), "%d", &port)
		f.vmx = append(f.vmx, vmx)
		f.guests = append(f.guests, g)
		vms = append(vms, VMwareVM{VMX: vmx, GuestPort: port})
	}
	f.pool = testConfig(t)
	f.vmware = VMwareConfig{
		Vmrun:          fakeExec(t, "fake-vmrun"),
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
func (f *vmwareFixture) newPool(t *testing.T) *testPool {
	t.Helper()
	return newLoggedPool(t, f.pool, func(log *slog.Logger) (Backend, error) { return NewVMwareBackend(f.vmware, log) })
}

// mark creates a marker file of the fake vmrun for VM i.
func (f *vmwareFixture) mark(t *testing.T, i int, marker, content string) {
	t.Helper()
	name := strings.TrimSuffix(filepath.Base(f.vmx[i]), ".vmx")
	if err := os.WriteFile(filepath.Join(f.state, name+"."+marker), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
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
	l := p.lease(t)
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
	if ex := f.guests[0].get().execs; len(ex) != 1 || !strings.Contains(ex[0], "nmcli connection down") {
		t.Fatalf("guest commands %q, want one network bounce", ex)
	}
	if _, err := l.Guest().Screenshot(context.Background()); err != nil {
		t.Fatal(err)
	}

	// A reset reverts; the VM is running, so it is not started again.
	_ = l.End(Healthy)
	p.ev.waitCount(t, EventReady, "Ubuntu0", 2)
	got := f.calls(t)[len(want):]
	wantReset := []string{want[0], want[1], want[3], want[4]}
	if strings.Join(got, "\n") != strings.Join(wantReset, "\n") {
		t.Fatalf("vmrun calls of the reset:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantReset, "\n"))
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	for _, c := range f.calls(t) {
		if strings.Contains(c, " stop ") {
			t.Fatalf("VM stopped without stop_on_close: %s", c)
		}
	}
}

// A snapshot taken powered off leaves the VM stopped after the revert: the
// backend starts it.
func TestVMwarePoweredOffSnapshot(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "offsnapshot", "")
	p := f.newPool(t)
	_ = p.lease(t).End(Healthy)
	p.ev.waitCount(t, EventReady, "Ubuntu0", 2)
	starts := 0
	for _, c := range f.calls(t) {
		if strings.HasPrefix(c, "-T ws start ") {
			starts++
		}
	}
	if starts != 2 {
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
	p.ev.waitCount(t, EventQuarantined, "Ubuntu1", 1)
	q := p.Quarantined()
	if len(q) != 1 || q[0].Reason != "start timed out" || !errors.Is(q[0].Err, ErrStuck) {
		t.Fatalf("quarantine = %+v", q)
	}
	msg := q[0].Err.Error()
	for _, want := range []string{"vm Ubuntu1: start", "got no IP within 300ms", "vmrun lists it as running", "getGuestIPAddress"} {
		if !strings.Contains(msg, want) {
			t.Errorf("quarantine error %q does not say %q", msg, want)
		}
	}
	if l := p.lease(t); l.ID() != "Ubuntu0" {
		t.Fatalf("got %s", l.ID())
	}
}

func TestVMwareRevertFailure(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "revertfail", "")
	p := f.newPool(t)
	p.ev.waitCount(t, EventQuarantined, "Ubuntu0", 1)
	reverts := 0
	for _, c := range f.calls(t) {
		if strings.Contains(c, "revertToSnapshot") {
			reverts++
		}
	}
	if reverts != 3 {
		t.Fatalf("%d reverts, want 3 (quarantine_after)", reverts)
	}
	q := p.Quarantined()
	if len(q) != 1 || q[0].Reason != "3 failures in a row" {
		t.Fatalf("quarantine = %+v", q)
	}
	var ce *CommandError
	if !errors.As(q[0].Err, &ce) || ce.ExitCode != 1 ||
		!strings.Contains(q[0].Err.Error(), `the snapshot "init_state"`) || !strings.Contains(q[0].Err.Error(), "could not be restored") {
		t.Fatalf("error %v does not carry vmrun's message", q[0].Err)
	}
	if _, err := p.Lease(context.Background()); !errors.Is(err, ErrNoVMs) {
		t.Fatalf("Lease: %v", err)
	}
}

func TestVMwareSlowStart(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "startdelay", "0.3")
	p := f.newPool(t)
	p.lease(t)
	for _, ev := range p.ev.events() {
		if ev.Kind == EventReady && ev.Duration < 300*time.Millisecond {
			t.Fatalf("ready after %v, but start takes 300ms", ev.Duration)
		}
	}
}

func TestVMwareStartHangs(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.mark(t, 0, "startdelay", "30")
	f.vmware.CommandTimeout = 200 * time.Millisecond
	p := f.newPool(t)
	p.ev.waitCount(t, EventQuarantined, "Ubuntu0", 1)
	q := p.Quarantined()
	var ce *CommandError
	if len(q) != 1 || q[0].Reason != "start timed out" || !errors.As(q[0].Err, &ce) || ce.Timeout == 0 ||
		!strings.Contains(q[0].Err.Error(), "nogui: no answer within") {
		t.Fatalf("quarantine = %+v", q)
	}
	begin := time.Now()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 5*time.Second {
		t.Fatalf("Close took %v", d)
	}
}

func TestVMwareBounceFailureTolerated(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.guests[0].set(func(g *fakeGuest) { g.execFail = true })
	p := f.newPool(t)
	p.lease(t)
	if !strings.Contains(p.log.String(), "network bounce after revert failed") {
		t.Fatalf("no warning about the failed bounce:\n%s", p.log)
	}
}

func TestVMwareGuestNeverReady(t *testing.T) {
	f := newVMwareFixture(t, 1)
	f.guests[0].set(func(g *fakeGuest) { g.shotFail = true })
	f.vmware.ReadyTimeout = 200 * time.Millisecond
	p := f.newPool(t)
	p.ev.waitCount(t, EventQuarantined, "Ubuntu0", 1)
	q := p.Quarantined()
	if len(q) != 1 || !errors.Is(q[0].Err, ErrStuck) || !strings.Contains(q[0].Err.Error(), "not ready within") {
		t.Fatalf("quarantine = %+v", q)
	}
}

func TestVMwareStopOnClose(t *testing.T) {
	f := newVMwareFixture(t, 2)
	f.vmware.StopOnClose = true
	f.vmware.StopMode = "hard"
	p := f.newPool(t)
	p.ev.waitCount(t, EventReady, "", 2)
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
	for _, tc := range []struct {
		cfg  VMwareConfig
		want string
	}{
		{VMwareConfig{}, "vmware.vms: empty"},
		{VMwareConfig{VMs: []VMwareVM{{VMX: "/a.vmx"}}}, "vmware.vms[0].snapshot: missing"},
		{VMwareConfig{Snapshot: "s", VMs: []VMwareVM{{VMX: "/a.vmdk"}}}, "want the path of a .vmx file"},
		{VMwareConfig{Snapshot: "s", Type: "hyperv", VMs: []VMwareVM{{VMX: "/a.vmx"}}}, "vmware.type"},
		{VMwareConfig{Snapshot: "s", VMs: []VMwareVM{{VMX: "/a.vmx", IP: "10.0.0"}}}, "vmware.vms[0].ip"},
		{VMwareConfig{Snapshot: "s", StopMode: "now", VMs: []VMwareVM{{VMX: "/a.vmx"}}}, "stop_mode"},
	} {
		_, err := NewVMwareBackend(tc.cfg, nil)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
