package vmpool

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// hostsConfig is the guest backend's configuration of guests, reset by
// the command reset.
func hostsConfig(reset string, guests ...*fakeGuest) GuestHostsConfig {
	hc := GuestHostsConfig{ResetCommand: reset, PollInterval: 5 * time.Millisecond}
	for _, g := range guests {
		hc.VMs = append(hc.VMs, GuestHost{URL: g.URL()})
	}
	return hc
}

// newHostsPool makes a pool under cfg over the guest backend of hc.
func newHostsPool(t *testing.T, cfg Config, hc GuestHostsConfig) *testPool {
	t.Helper()
	return newLoggedPool(t, cfg, func(log *slog.Logger) (Backend, error) { return NewGuestHostsBackend(hc, log) })
}

func TestGuestHostsResetCommand(t *testing.T) {
	g0 := newFakeGuest(t)
	out := filepath.Join(t.TempDir(), "resets.log")
	reset := `echo "$1 $2 $CODAPIPE_VM_ID $CODAPIPE_VM_HOST $CODAPIPE_VM_URL" >> ` + out
	p := newHostsPool(t, testConfig(t), hostsConfig(reset, g0))
	l := p.lease(t)
	_ = l.End(Healthy)
	p.ev.waitCount(t, EventReady, "guest-0", 2)
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	want := "127.0.0.1 guest-0 guest-0 127.0.0.1 " + g0.URL()
	lines := strings.Split(strings.TrimSpace(string(data)), "\n")
	if len(lines) != 2 || lines[0] != want || lines[1] != want {
		t.Fatalf("reset command saw:\n%s\nwant twice (start and reset):\n%s", data, want)
	}
	u, _ := url.Parse(g0.URL())
	if l.Spec().Key != "guest:"+u.Host {
		t.Fatalf("key %q", l.Spec().Key)
	}
}

func TestGuestHostsResetCommandFails(t *testing.T) {
	g0 := newFakeGuest(t)
	p := newHostsPool(t, testConfig(t), hostsConfig(`echo "revert: quota exceeded for $1" >&2; exit 3`, g0))
	p.ev.waitCount(t, EventQuarantined, "guest-0", 1)
	q := p.Quarantined()
	if len(q) != 1 || !strings.Contains(q[0].Err.Error(), "exit status 3: revert: quota exceeded for 127.0.0.1") {
		t.Fatalf("quarantine = %+v", q)
	}
}

// A reset command that hangs is killed at the reset deadline (its whole
// process group: the shell and its sleep), and the VM is quarantined.
func TestGuestHostsResetCommandHangs(t *testing.T) {
	g0 := newFakeGuest(t)
	cfg := testConfig(t)
	cfg.Timeouts.Start = 200 * time.Millisecond
	p := newHostsPool(t, cfg, hostsConfig(`sleep 30; echo done`, g0))
	p.ev.waitCount(t, EventQuarantined, "guest-0", 1)
	if q := p.Quarantined(); len(q) != 1 || q[0].Reason != "start timed out" {
		t.Fatalf("quarantine = %+v", q)
	}
	begin := time.Now()
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(begin); d > 3*time.Second {
		t.Fatalf("Close took %v: the command's children outlived it", d)
	}
}

func TestGuestHostsWithoutResetCommand(t *testing.T) {
	g0 := newFakeGuest(t)
	hc := hostsConfig("", g0)
	stopped := filepath.Join(t.TempDir(), "stopped")
	hc.StopCommand = "echo stopped $2 > " + stopped
	p := newHostsPool(t, testConfig(t), hc)
	_ = p.lease(t).End(Healthy)
	p.ev.waitCount(t, EventReady, "guest-0", 2)
	if !strings.Contains(p.log.String(), "no reset_command") {
		t.Fatalf("no warning about the missing reset command:\n%s", p.log)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(stopped); err != nil || string(data) != "stopped guest-0\n" {
		t.Fatalf("stop command: %q, %v", data, err)
	}
}

func TestGuestHostsConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  GuestHostsConfig
		want string
	}{
		{GuestHostsConfig{}, "guest.vms: empty"},
		{GuestHostsConfig{VMs: []GuestHost{{}}}, "guest.vms[0].url: missing"},
		{GuestHostsConfig{VMs: []GuestHost{{URL: "http://a", StateURL: "gopher://a"}}}, "guest.vms[0].state_url"},
	} {
		if _, err := NewGuestHostsBackend(tc.cfg, nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: error %v, want %q", tc.cfg, err, tc.want)
		}
	}
}
