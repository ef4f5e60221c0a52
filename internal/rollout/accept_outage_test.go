package rollout

import (
	"errors"
	"io"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/ledger"
	"github.com/codapipe/codapipe/internal/sched"
)

// switchProxy forwards TCP connections to a target and can be switched
// off: its listener closes (new connections are refused, as from a
// server that is down) and its open connections are cut.
type switchProxy struct {
	t      *testing.T
	addr   string
	target string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]bool
	wg     sync.WaitGroup
}

// newSwitchProxy returns a proxy, up, on a free loopback port; its target
// is set by route. Cleanup stops it.
func newSwitchProxy(t *testing.T) *switchProxy {
	p := &switchProxy{t: t, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	t.Cleanup(func() { p.down(); p.wg.Wait() })
	return p
}

// route sets the target from the simulated endpoint's URL and returns the
// same URL through the proxy (Options.simPlanner).
func (p *switchProxy) route(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		p.t.Errorf("proxy target %q: %v", raw, err)
		return raw
	}
	p.mu.Lock()
	p.target = u.Host
	p.mu.Unlock()
	u.Host = p.addr
	return u.String()
}

func (p *switchProxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	p.wg.Add(1)
	go func() { // owned by p: Cleanup waits for it
		defer p.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			target := p.target
			p.conns[c] = true
			p.mu.Unlock()
			p.wg.Add(1)
			go func() { // owned by p
				defer p.wg.Done()
				defer func() { p.mu.Lock(); delete(p.conns, c); p.mu.Unlock(); c.Close() }()
				up, err := net.DialTimeout("tcp", target, 5*time.Second)
				if err != nil {
					return
				}
				defer up.Close()
				done := make(chan struct{}, 2)
				go func() { io.Copy(up, c); done <- struct{}{} }() // ends when either side closes
				go func() { io.Copy(c, up); done <- struct{}{} }()
				<-done
				c.Close()
				up.Close()
				<-done
			}()
		}
	}()
}

// down refuses new connections and cuts the open ones.
func (p *switchProxy) down() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		c.Close()
	}
}

// up listens again on the same address.
func (p *switchProxy) up() {
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		p.t.Errorf("proxy up again on %s: %v", p.addr, err)
		return
	}
	p.serve(ln)
}

// Acceptance 1 of issue 36: the planner endpoint goes down for 60 s in
// the middle of a 60-episode simulated run. No episode may end as an
// environment error because of it: the run pauses (one WARN), the
// episodes it interrupted run again once the planner answers, the run
// finishes, and every episode is on the stream exactly once.
//
// It runs beside the other parallel acceptance tests of the package: most
// of its time it waits for the planner.
func TestAcceptPlannerOutageIsWaitedOut(t *testing.T) {
	t.Parallel()
	const (
		K       = 10
		outage  = 60 * time.Second
		downAt  = 100 // planner requests before the outage: about a third of the run
		episode = 60
	)
	taskIDs := []string{"S01", "S02", "S03", "S04", "S05", "S06"}
	proxy := newSwitchProxy(t)
	var requests atomic.Int64
	var downSince atomic.Int64
	dir := t.TempDir()
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, simTaskDir(t, acceptApp, taskIDs...), "accept-outage", log)
	cfg.Group, cfg.Samples, cfg.VMs = 1, K, 4 // G = 1: the run's CPU is not what is tested
	cfg.simPlanner = proxy.route
	cfg.outageProbe = 500 * time.Millisecond
	cfg.Planner.Backoff = 100 * time.Millisecond // a call fails in ~0.7 s, not ~7 s
	cfg.simRequests = func(kind string, _ []byte) {
		if kind == "planner" && requests.Add(1) == downAt {
			downSince.Store(time.Now().UnixNano())
			proxy.down()
			time.AfterFunc(outage, proxy.up)
		}
	}
	sum, err := runWithin(t, 5*time.Minute, cfg)
	if err != nil {
		logs.dump(t, slog.LevelWarn)
		t.Fatalf("Run: %v", err)
	}
	if downSince.Load() == 0 {
		t.Fatalf("the planner never went down (%d requests)", requests.Load())
	}
	if d := time.Since(time.Unix(0, downSince.Load())); d < outage {
		t.Errorf("the run ended %v after the outage began, before the planner came back (%v)", d, outage)
	}
	b := openTestBus(t, dir)
	defer b.Close()
	ps := readPublished(t, b, openStore(t, dir), acceptApp)
	seen := map[ledger.EpisodeKey]int{}
	for _, p := range ps {
		seen[ledger.EpisodeKey{Task: p.Traj.Task.ID, Sample: p.Traj.Sample}]++
		if p.Traj.Outcome.IsEnvError() {
			t.Errorf("trajectory %s (%s/%d): env_error %q", p.Traj.ID, p.Traj.Task.ID, p.Traj.Sample, p.Traj.Outcome.Reason)
		}
	}
	if len(ps) != episode || len(seen) != episode {
		t.Errorf("%d trajectories of %d episodes on the stream, want each of the %d once", len(ps), len(seen), episode)
	}
	if sum.EnvErrors != 0 || sum.Outages != 1 || sum.OutageRequeued == 0 || sum.Stopped != "" {
		t.Errorf("summary: env_errors %d, outages %d, requeued %d, stopped %q; want 0, 1, >0, \"\"", sum.EnvErrors, sum.Outages, sum.OutageRequeued, sum.Stopped)
	}
	if w := logs.records("model endpoint unavailable for every VM: the run pauses and resumes when it answers; the episodes it interrupted run again"); len(w) != 1 {
		t.Errorf("%d WARN lines for the outage, want 1", len(w))
	}
	checkSummaryAgrees(t, sum, ps)
}

// Acceptance 1 of issue 36, the other half: the planner endpoint is down
// for good. The run stops with an *OutageError within the outage budget,
// publishes nothing it ran during the outage, and says what is left; the
// same run started again once the planner answers completes every
// episode, each once.
func TestAcceptPlannerDownStopsAndResumes(t *testing.T) {
	t.Parallel()
	const K = 4
	taskIDs := []string{"S01", "S02", "S03"}
	proxy := newSwitchProxy(t)
	var requests atomic.Int64
	dir := t.TempDir()
	tasks := simTaskDir(t, acceptApp, taskIDs...)
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, tasks, "accept-down", log)
	cfg.Samples, cfg.VMs = K, 2
	cfg.simPlanner = proxy.route
	cfg.outageProbe = 200 * time.Millisecond
	cfg.Planner.Backoff = 100 * time.Millisecond
	cfg.OutageBudget = 5 * time.Second
	var downOnce sync.Once
	cfg.simRequests = func(kind string, _ []byte) {
		if kind == "planner" && requests.Add(1) >= 20 {
			downOnce.Do(proxy.down)
		}
	}
	start := time.Now()
	sum, err := runWithin(t, 3*time.Minute, cfg)
	var oe *sched.OutageError
	if !errors.As(err, &oe) || !errors.Is(err, sched.ErrOutage) {
		logs.dump(t, slog.LevelWarn)
		t.Fatalf("Run with the planner down for good: %v, want an OutageError", err)
	}
	t.Logf("stopped after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if sum == nil || !strings.Contains(sum.Stopped, "outage budget") || sum.Left == 0 || sum.EnvErrors != 0 {
		t.Fatalf("summary of the stopped run: %+v", sum)
	}
	var out strings.Builder
	sum.Print(&out)
	if !strings.Contains(out.String(), "run the same command again (same --run accept-down)") {
		t.Errorf("the summary does not say how to finish the run:\n%s", out.String())
	}
	left := sum.Left

	proxy.up()
	cfg.simRequests = nil
	sum2 := runOK(t, cfg, logs)
	if sum2.Episodes != left || sum2.Skipped != len(taskIDs)*K-left {
		t.Errorf("the second start ran %d episodes (%d already published), want the %d left", sum2.Episodes, sum2.Skipped, left)
	}
	b := openTestBus(t, dir)
	defer b.Close()
	ps := readPublished(t, b, openStore(t, dir), acceptApp)
	seen := map[ledger.EpisodeKey]int{}
	for _, p := range ps {
		seen[ledger.EpisodeKey{Task: p.Traj.Task.ID, Sample: p.Traj.Sample}]++
		if p.Traj.Outcome.IsEnvError() {
			t.Errorf("trajectory %s: env_error %q", p.Traj.ID, p.Traj.Outcome.Reason)
		}
	}
	if len(ps) != len(taskIDs)*K || len(seen) != len(taskIDs)*K {
		t.Errorf("%d trajectories of %d episodes on the stream, want each of the %d once", len(ps), len(seen), len(taskIDs)*K)
	}
}
