package hosts

import (
	"context"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/pooltest"
)

// hostsConfig is the guest backend's configuration of guests, reset by
// the command reset.
func hostsConfig(reset string, guests ...*pooltest.FakeGuest) Config {
	hc := Config{ResetCommand: reset, PollInterval: 5 * time.Millisecond}
	for _, g := range guests {
		hc.VMs = append(hc.VMs, Host{URL: g.URL()})
	}
	return hc
}

// newHostsPool makes a pool under cfg over the guest backend of hc.
func newHostsPool(t *testing.T, cfg vmpool.Config, hc Config) *pooltest.Pool {
	t.Helper()
	return pooltest.NewLoggedPool(t, cfg, func(log *slog.Logger) (vmpool.Backend, error) { return New(hc, log) })
}

func TestHostsResetCommand(t *testing.T) {
	g0 := pooltest.NewFakeGuest(t)
	out := filepath.Join(t.TempDir(), "resets.log")
	reset := `echo "$1 $2 $CODAPIPE_VM_ID $CODAPIPE_VM_HOST $CODAPIPE_VM_URL" >> ` + out
	p := newHostsPool(t, pooltest.Config(t), hostsConfig(reset, g0))
	l := p.MustLease(t)
	_ = l.End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventReady, "guest-0", 2)
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

func TestHostsResetCommandFails(t *testing.T) {
	g0 := pooltest.NewFakeGuest(t)
	p := newHostsPool(t, pooltest.Config(t), hostsConfig(`echo "revert: quota exceeded for $1" >&2; exit 3`, g0))
	p.WantQuarantine(t, "guest-0", "", "exit status 3: revert: quota exceeded for 127.0.0.1")
}

// A reset command that hangs is killed at the reset deadline (its whole
// process group: the shell and its sleep), and the VM is quarantined.
func TestHostsResetCommandHangs(t *testing.T) {
	g0 := pooltest.NewFakeGuest(t)
	cfg := pooltest.Config(t)
	cfg.Timeouts.Start = 200 * time.Millisecond
	p := newHostsPool(t, cfg, hostsConfig(`sleep 30; echo done`, g0))
	p.WantQuarantine(t, "guest-0", "start timed out")
	p.CloseWithin(t, 3*time.Second) // the command's children must not outlive it
}

func TestHostsWithoutResetCommand(t *testing.T) {
	g0 := pooltest.NewFakeGuest(t)
	hc := hostsConfig("", g0)
	stopped := filepath.Join(t.TempDir(), "stopped")
	hc.StopCommand = "echo stopped $2 > " + stopped
	p := newHostsPool(t, pooltest.Config(t), hc)
	_ = p.MustLease(t).End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventReady, "guest-0", 2)
	if !strings.Contains(p.Log.String(), "no reset_command") {
		t.Fatalf("no warning about the missing reset command:\n%s", p.Log)
	}
	if err := p.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(stopped); err != nil || string(data) != "stopped guest-0\n" {
		t.Fatalf("stop command: %q, %v", data, err)
	}
}

func TestHostsConfigErrors(t *testing.T) {
	pooltest.WantConfigErrors(t, []pooltest.ConfigCase[Config]{
		{Name: "no VMs", Cfg: Config{}, Want: "guest.vms: empty"},
		{Name: "no URL", Cfg: Config{VMs: []Host{{}}}, Want: "guest.vms[0].url: missing"},
		{Name: "bad state URL", Cfg: Config{VMs: []Host{{URL: "http://a", StateURL: "gopher://a"}}}, Want: "guest.vms[0].state_url"},
	}, func(c Config) error { _, err := New(c, nil); return err })
}
