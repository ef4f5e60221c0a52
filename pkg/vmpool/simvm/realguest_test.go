package simvm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simguest "github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/pooltest"
)

// startSimGuests starts n guest servers of the real simulator.
func startSimGuests(t *testing.T, n int, cfg simguest.Config) []string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var urls []string
	for i := 0; i < n; i++ {
		m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: int64(i + 1)})
		g, err := simguest.Start(ctx, m, cfg)
		if err != nil {
			t.Fatal(err)
		}
		urls = append(urls, g.URL)
	}
	return urls
}

func simStats(t *testing.T, url string) (resets int) {
	t.Helper()
	resp, err := http.Get(url + "/sim/stats")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Resets int `json:"resets"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Resets
}

// The sim backend against the real simulated guest (internal/sim): leases
// work end to end, releases revert the machine.
func TestSimBackendRealGuest(t *testing.T) {
	urls := startSimGuests(t, 2, simguest.Config{
		BootTime:   fault.Fixed(50 * time.Millisecond),
		RevertTime: fault.Fixed(80 * time.Millisecond),
		Clock:      fault.Clock{Scale: 1},
	})
	sc := URLs(urls...)
	sc.PollInterval = 10 * time.Millisecond
	p := newSimPool(t, pooltest.Config(t), sc)

	ctx := context.Background()
	l := p.MustLease(t)
	png, err := l.Guest().Screenshot(ctx)
	if err != nil || len(png) < 1000 {
		t.Fatalf("screenshot: %d bytes, %v", len(png), err)
	}
	if w, h, err := l.ScreenSize(ctx); err != nil || w != desktop.ScreenW || h != desktop.ScreenH {
		t.Fatalf("screen size %dx%d, %v", w, h, err)
	}
	if pf, err := l.Guest().Platform(ctx); err != nil || !strings.Contains(pf, "simulator") {
		t.Fatalf("platform %q, %v", pf, err)
	}
	url := l.Guest().BaseURL()
	before := simStats(t, url)
	_ = l.End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventReady, l.ID(), 2)
	if after := simStats(t, url); after != before+1 {
		t.Fatalf("resets %d → %d, want one more after a release", before, after)
	}
}

// A simulated VM that dies mid-episode (every call hangs) is released
// unhealthy by the agent, reverted by the pool, and serves again.
func TestSimBackendRealGuestDiesAndRecovers(t *testing.T) {
	urls := startSimGuests(t, 1, simguest.Config{RevertTime: fault.Fixed(20 * time.Millisecond), Clock: fault.Clock{Scale: 1}})
	sc := URLs(urls...)
	sc.PollInterval = 10 * time.Millisecond
	b, err := New(sc)
	if err != nil {
		t.Fatal(err)
	}
	tp := &pooltest.Pool{Events: &pooltest.EventLog{}, Log: &syncio.Buffer{}}
	p, err := vmpool.NewPool(context.Background(), pooltest.Config(t), b, vmpool.WithEvents(tp.Events.Add), vmpool.WithLogger(slog.New(slog.DiscardHandler)),
		vmpool.WithGuestOptions(guest.Options{ScreenshotTimeout: 2 * time.Second, Retries: -1}))
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close(context.Background())
	tp.Pool = p

	l := tp.MustLease(t)
	req, _ := http.NewRequest(http.MethodPut, urls[0]+"/sim/faults", bytes.NewReader([]byte(`{"die_prob": 1, "death_mode": "hang"}`)))
	resp, err := http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT /sim/faults: %v %v", resp, err)
	}
	resp.Body.Close()
	_, err = l.Guest().Screenshot(context.Background())
	if !errors.Is(err, guest.ErrTimeout) {
		t.Fatalf("screenshot of a dead VM: %v, want guest.ErrTimeout", err)
	}
	// No more deaths; the VM stays dead until it is reverted.
	req, _ = http.NewRequest(http.MethodPut, urls[0]+"/sim/faults", bytes.NewReader([]byte(`{"die_prob": 0}`)))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("PUT /sim/faults: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	_ = l.End(vmpool.Fault(err))
	l2 := tp.MustLease(t)
	if _, err := l2.Guest().Screenshot(context.Background()); err != nil {
		t.Fatalf("after the reset: %v", err)
	}
	if st := p.Stats(); st.UnhealthyReleases != 1 || st.Quarantined != 0 {
		t.Fatalf("stats %+v", st)
	}
}

// The pool runs ScienceBoard's reset.sh in a simulated VM after every
// revert (the sim backend's default after_revert), the simulated shell
// runs it, and the lease's app server is the simulator's own.
func TestSimBackendRealGuestRunsResetScript(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	var mu sync.Mutex
	var execs []string
	record := func(r simguest.Recorded) {
		if r.Path == "/setup/execute" {
			mu.Lock()
			execs = append(execs, string(r.Body))
			mu.Unlock()
		}
	}
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
	srv, err := simguest.Start(ctx, m, simguest.Config{Record: record})
	if err != nil {
		t.Fatal(err)
	}
	sc := URLs(srv.URL)
	sc.PollInterval = 10 * time.Millisecond
	p := newSimPool(t, pooltest.Config(t), sc)
	l := p.MustLease(t)
	if l.Endpoint().StateURL != srv.AppURL {
		t.Errorf("state URL %s, want the app server %s", l.Endpoint().StateURL, srv.AppURL)
	}
	want := `{"command":"/bin/bash /home/user/server/reset.sh","shell":true}`
	mu.Lock()
	got := append([]string(nil), execs...)
	mu.Unlock()
	if len(got) != 1 || got[0] != want {
		t.Fatalf("after the start the guest ran %q, want one %s", got, want)
	}
	_ = l.End(vmpool.Healthy)
	p.Events.WaitCount(t, vmpool.EventReady, l.ID(), 2)
	mu.Lock()
	n := len(execs)
	mu.Unlock()
	if n != 2 {
		t.Errorf("%d after-revert commands after a start and a reset, want 2", n)
	}
	if strings.Contains(p.Log.String(), "exited non-zero") {
		t.Errorf("reset.sh failed in the simulator:\n%s", p.Log)
	}

	// A command that exits non-zero is logged and the VM still serves,
	// as in ScienceBoard's harness (HTTP 200 is success).
	cfg := pooltest.Config(t)
	cfg.AfterRevert = "false"
	p.CloseWithin(t, 10*time.Second)
	p2 := newSimPool(t, cfg, sc)
	p2.MustLease(t)
	if !strings.Contains(p2.Log.String(), "exited non-zero") {
		t.Errorf("the failed command was not logged:\n%s", p2.Log)
	}
}
