package chaos

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// EnvSize selects the size of TestAcceptChaos: "full" is make chaos's
// (≥ 1,000 episodes, five kills of each kind); anything else the short
// form that make test runs.
const EnvSize = "CODAPIPE_CHAOS"

// EnvSeed fixes the chaos schedule's seed (default: the time; printed).
const EnvSeed = "CODAPIPE_CHAOS_SEED"

// size is one size of the chaos run.
type size struct {
	name string
	// apps: one rollout process each, its own --run and its own VMs.
	apps       []appRun
	vmsPerApp  int
	group      int
	timeScale  float64
	kills      int           // SIGKILLs of each kind of worker
	gap        [2]float64    // seconds between two chaos events (uniform)
	settle     time.Duration // before the first event
	idleWithin time.Duration // the workers must have caught up this long after the rollouts
	// rolloutWithin bounds the rollouts after the chaos schedule; one that
	// is still running then is stuck.
	rolloutWithin time.Duration
}

type appRun struct {
	app     string
	samples int
}

func sizeOf(name string) size {
	if name == "full" {
		return size{name: "full", apps: []appRun{{"KAlgebra", 18}, {"ChimeraX", 18}, {"Celestia", 18}, {"GrassGIS", 18}},
			vmsPerApp: 4, group: 2, timeScale: 0.001, kills: 6, gap: [2]float64{10, 40}, settle: 5 * time.Second,
			idleWithin: 10 * time.Minute, rolloutWithin: 50 * time.Minute}
	}
	return size{name: "short", apps: []appRun{{"KAlgebra", 4}, {"ChimeraX", 4}},
		vmsPerApp: 4, group: 2, timeScale: 0.001, kills: 2, gap: [2]float64{2, 4.5}, settle: 3 * time.Second,
		idleWithin: 3 * time.Minute, rolloutWithin: 5 * time.Minute}
}

// simConfig is the fault mix (SIMULATOR, docs/simulator.md): per guest
// protocol call a hang that ends after 30 simulated seconds, an HTTP 500
// and a VM death (the connection reset until the pool reverts it), about
// 5 % of the episodes meeting one (an episode makes about 18 calls); 10 %
// malformed planner answers; 20 % HTTP 500 from the judge endpoint.
const simConfig = `{
  "guest": {"faults": {"hang_prob": 0.0015, "hang_for": 30000000000, "error_prob": 0.0015},
            "die_prob": 0.0012, "death_mode": "reset"},
  "models": {"planner": {"faults": {"malformed_prob": 0.1}},
             "judge": {"faults": {"error_prob": 0.2}}}
}`

// harness is one chaos run.
type harness struct {
	t        *testing.T
	sz       size
	dir      string
	bin      string
	env      []string
	common   []string
	cluster  *natstest.Cluster
	minio    *miniotest.Server
	storeURL string
	procs    []*proc
}

// TestAcceptChaos runs the pipeline as separate processes of the real
// binaries on a 3-node NATS cluster and a real MinIO under faults and
// kills, and accounts for every planned episode at the end: one rollout
// process per app (its own --run and VMs), two judge workers and two
// advantage workers sharing their durable consumers, the simulated world
// as its own process; during the run each kind of worker is killed with
// SIGKILL several times (restarted with the same arguments), the leader of
// the trajectory stream is killed and brought back, and MinIO is down for
// a few seconds. Then judge and advantage drain, sftpack builds the SFT
// set, and Account must find nothing lost and nothing duplicated. It
// prints the accounting table, the kills and the workers' RSS.
// CODAPIPE_CHAOS=full is make chaos's size.
func TestAcceptChaos(t *testing.T) {
	sz := sizeOf(os.Getenv(EnvSize))
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv(EnvSeed); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", EnvSeed, s, err)
		}
		seed = v
	}
	t.Logf("chaos: size %s, seed %d (%s=%d repeats the schedule)", sz.name, seed, EnvSeed, seed)
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	start := time.Now()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// The folder stays when the test fails: its logs/ has every start's
	// output.
	dir, err := os.MkdirTemp("", "chaos-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("chaos: the run's folder (logs/, data/, shards/, sft/) is kept: %s", dir)
			return
		}
		_ = os.RemoveAll(dir)
	})
	h := &harness{t: t, sz: sz, dir: dir}
	h.build()
	t.Logf("chaos %5.1fs: binaries built", time.Since(start).Seconds())
	h.cluster = natstest.StartCluster(t, 3)
	h.minio = miniotest.Start(t)
	t.Logf("chaos %5.1fs: NATS cluster and MinIO up", time.Since(start).Seconds())
	h.storeURL = h.minio.URL("blobs")
	h.env = append(os.Environ(),
		"AWS_ENDPOINT_URL="+h.minio.Endpoint, "AWS_ACCESS_KEY_ID="+h.minio.AccessKey,
		"AWS_SECRET_ACCESS_KEY="+h.minio.SecretKey, "AWS_REGION="+miniotest.Region, "S3_FORCE_PATH_STYLE=true")
	h.common = []string{"--nats", h.cluster.URL(), "--replicas", "3", "--store", h.storeURL,
		"--log-format", "json", "--nats-timeout", "5s"}
	for _, d := range []string{"logs", "data", "shards", "pools"} {
		if err := os.MkdirAll(filepath.Join(h.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	world := h.startSim(ctx)
	h.copyTasks()

	// The workers.
	var runs []Run
	var rollouts, judges, advs []*proc
	var runNames []string
	for i, a := range sz.apps {
		run := fmt.Sprintf("chaos-%s-%d", strings.ToLower(a.app), seed%100000)
		runNames = append(runNames, run)
		runs = append(runs, Run{Name: run, App: a.app, Tasks: h.tasks(a.app), Samples: a.samples})
		pool := h.poolFile(i, world.Guests[i*sz.vmsPerApp:(i+1)*sz.vmsPerApp])
		args := []string{"--app", a.app, "--run", run, "--group", strconv.Itoa(sz.group), "--samples", strconv.Itoa(a.samples),
			"--pool", pool, "--tasks", h.taskDir(),
			"--planner-url", world.Planner.URL, "--planner-model", world.Planner.Model,
			"--executor-url", world.Executor.URL, "--executor-model", world.Executor.Model}
		rollouts = append(rollouts, h.proc("rollout", fmt.Sprintf("rollout-%d", i), true, args))
	}
	judgeArgs := []string{"--judge", world.Judges[0].URL + "=" + world.Judges[0].Model, "--votes", "2", "--concurrency", "4",
		"--backoff", "50ms", "--attempts", "4", "--attempt-timeout", "20s", "--ack-wait", "5s"}
	advArgs := []string{"--runs", strings.Join(runNames, ","), "--out", filepath.Join(h.dir, "shards"),
		"--max-delay", "1s", "--ack-wait", "5s"}
	for i := range 2 {
		judges = append(judges, h.proc("judge", fmt.Sprintf("judge-%d", i), false, judgeArgs))
		advs = append(advs, h.proc("advantage", fmt.Sprintf("advantage-%d", i), false, advArgs))
	}
	// Judges and advantage workers first (as in production they are
	// there before the run), then the rollouts.
	for _, p := range append(append(slices.Clone(judges), advs...), rollouts...) {
		h.launch(p)
	}
	client := &http.Client{Timeout: time.Second}
	stopSampling := bus.Every(ctx, time.Second, func(ctx context.Context) {
		for _, p := range h.procs {
			p.sample(ctx, client)
		}
	})

	// The chaos schedule: kills of each kind, the stream leader node and
	// the MinIO outage, shuffled, a random gap apart. Kills of judge and
	// advantage go to worker 0: worker 1 of each stays up the whole run,
	// the witness of the leak check.
	// The rollout kills come in the first third, half a gap apart, while
	// the rollouts still run: since the simulator's endpoints parse
	// requests faster (data URIs lifted out before the JSON), the full
	// size's rollouts end about 300 s in, before the half of the schedule
	// (seed 1795880763059458541 met no rollout for its last two kills).
	var events []string
	for range sz.kills {
		events = append(events, "judge", "advantage")
	}
	events = append(events, "nats-leader", "minio")
	rng.Shuffle(len(events), func(i, j int) { events[i], events[j] = events[j], events[i] })
	for range sz.kills {
		at := rng.IntN(len(events)/3 + 1)
		events = slices.Insert(events, at, "rollout")
	}
	t.Logf("chaos: schedule %s", strings.Join(events, " "))
	kills := map[string]int{}
	nodeKills := 0
	minioOutages := 0
	// The chaos begins once every long-lived worker serves its metrics
	// (a start-up that failed has been restarted by then), and settle
	// later.
	for _, p := range append(slices.Clone(judges), advs...) {
		// The latest start has served metrics for 8 s: longer than the
		// --nats-timeout a start-up request may fail after.
		up := func() bool {
			ss := p.lastStart()
			return p.isRunning() && len(ss) > 0 && time.Since(ss[0].Time) > 8*time.Second
		}
		if !poll(ctx, 2*time.Minute, up) {
			t.Fatalf("%s: not up within two minutes: %s", p.name, strings.Join(p.failures, "; "))
		}
	}
	sleep(ctx, sz.settle)
	chaosStart := time.Now()
	t.Logf("chaos %5.1fs: workers up", time.Since(start).Seconds())
	for _, ev := range events {
		gap := time.Duration((sz.gap[0] + rng.Float64()*(sz.gap[1]-sz.gap[0])) * float64(time.Second))
		if ev == "rollout" {
			gap /= 2
		}
		sleep(ctx, gap)
		switch ev {
		case "rollout":
			var live []*proc
			for _, p := range rollouts {
				if p.isRunning() {
					live = append(live, p)
				}
			}
			if len(live) == 0 {
				t.Logf("chaos %5.1fs: no rollout running to kill", time.Since(start).Seconds())
				continue
			}
			p := live[rng.IntN(len(live))]
			if p.kill() {
				kills["rollout"]++
				t.Logf("chaos %5.1fs: kill -9 %s", time.Since(start).Seconds(), p.name)
			}
		case "judge", "advantage":
			p := judges[0]
			if ev == "advantage" {
				p = advs[0]
			}
			if !poll(ctx, 10*time.Second, p.isRunning) {
				t.Logf("chaos %5.1fs: %s not running", time.Since(start).Seconds(), p.name)
				continue
			}
			if p.kill() {
				kills[ev]++
				t.Logf("chaos %5.1fs: kill -9 %s", time.Since(start).Seconds(), p.name)
			}
		case "nats-leader":
			lctx, lcancel := context.WithTimeout(ctx, 30*time.Second)
			meta, merr := h.cluster.MetaLeader(lctx)
			i, err := h.cluster.StreamLeader(lctx, bus.StreamName(bus.Raw))
			lcancel()
			if err != nil {
				t.Logf("chaos: stream leader of %s: %v; killing the meta leader %d (%v)", bus.StreamName(bus.Raw), err, meta, merr)
				i = meta
			}
			if i < 0 {
				t.Errorf("chaos: no leader to kill: %v, %v", err, merr)
				continue
			}
			t.Logf("chaos %5.1fs: kill -9 NATS node %s (leader of %s; meta leader %d)", time.Since(start).Seconds(), h.cluster.Name(i), bus.StreamName(bus.Raw), meta)
			h.cluster.Kill(i)
			nodeKills++
			sleep(ctx, 3*time.Second)
			h.cluster.Restart(i)
			rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
			if err := h.cluster.WaitReady(rctx); err != nil {
				t.Errorf("chaos: NATS node %s not ready after its restart: %v", h.cluster.Name(i), err)
			}
			rcancel()
			t.Logf("chaos %5.1fs: NATS node %s back", time.Since(start).Seconds(), h.cluster.Name(i))
		case "minio":
			t.Logf("chaos %5.1fs: MinIO down", time.Since(start).Seconds())
			h.minio.Stop()
			minioOutages++
			sleep(ctx, 3*time.Second)
			h.minio.Restart(t)
			t.Logf("chaos %5.1fs: MinIO back", time.Since(start).Seconds())
		}
	}
	t.Logf("chaos %5.1fs: schedule done; waiting for the rollouts", time.Since(start).Seconds())
	deadline := time.After(sz.rolloutWithin)
	for _, p := range rollouts {
		select {
		case <-p.done:
		case <-deadline:
		}
	}
	for _, p := range rollouts {
		select {
		case <-p.done:
			if !p.finished {
				t.Errorf("%s did not finish its run (%d starts, %d failures)", p.name, p.starts, len(p.failures))
			}
		default:
			// Stuck: its goroutines (SIGQUIT) say where.
			t.Errorf("%s has not finished %v after the chaos schedule (its goroutine dump: logs/%s.%d.log)", p.name, sz.rolloutWithin, p.name, p.starts)
			p.quit()
		}
	}
	rolloutEnd := time.Since(start)
	t.Logf("chaos %5.1fs: rollouts done", rolloutEnd.Seconds())

	// The long-lived workers catch up; then their idle readings, then
	// they stop and the drains finish what is left.
	b := h.openBus(ctx)
	idle := poll(ctx, sz.idleWithin, func() bool { return h.consumersIdle(ctx, b) })
	if !idle {
		t.Errorf("the judge and advantage workers did not catch up within %v of the rollouts' end", sz.idleWithin)
	}
	sleep(ctx, 3*time.Second)
	witnesses := []*proc{judges[1], advs[1]}
	for _, p := range append(judges, advs...) {
		p.stop(20 * time.Second)
	}
	stopSampling()
	t.Logf("chaos %5.1fs: workers stopped; draining", time.Since(start).Seconds())
	var drains []*proc
	for i := range 2 {
		drains = append(drains, h.proc("judge", fmt.Sprintf("judge-drain-%d", i), true, append([]string{"--drain"}, judgeArgs...)))
	}
	h.runAll(drains)
	drains = nil
	for i := range 2 {
		drains = append(drains, h.proc("advantage", fmt.Sprintf("advantage-drain-%d", i), true, append([]string{"--drain"}, advArgs...)))
	}
	h.runAll(drains)
	sftDir := filepath.Join(h.dir, "sft")
	sftp := h.proc("sftpack", "sftpack", true, []string{"--runs", strings.Join(runNames, ","), "--out", sftDir})
	sftp.args = append([]string{"build"}, sftp.args...)
	h.runAll([]*proc{sftp})
	t.Logf("chaos %5.1fs: pipeline drained", time.Since(start).Seconds())

	// The accounting.
	store, err := blob.Open(ctx, h.storeURL, h.minio.Config())
	if err != nil {
		t.Fatal(err)
	}
	var shardSets []string
	entries, err := os.ReadDir(filepath.Join(h.dir, "shards"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && !strings.HasPrefix(e.Name(), ".") { // .tmp: advantage's work folder
			shardSets = append(shardSets, filepath.Join(h.dir, "shards", e.Name()))
		}
	}
	rep, err := Account(ctx, Config{Bus: b, Archive: store.Bucket(), Runs: runs, ShardSets: shardSets, SFTDir: sftDir})
	if err != nil {
		t.Fatalf("accounting: %v", err)
	}
	for _, kind := range []string{"rollout", "judge", "advantage"} {
		rep.Extra = append(rep.Extra, [2]string{"kill -9 " + kind, fmt.Sprintf("%d (planned %d)", kills[kind], sz.kills)})
	}
	rep.Extra = append(rep.Extra,
		[2]string{"NATS leader node kills", strconv.Itoa(nodeKills)},
		[2]string{"MinIO outages", strconv.Itoa(minioOutages)},
		[2]string{"shard sets", strconv.Itoa(len(shardSets))},
		[2]string{"wall time", fmt.Sprintf("%.0fs (rollouts %.0fs)", time.Since(start).Seconds(), rolloutEnd.Seconds())})
	rep.Extra = append(rep.Extra, [2]string{"VM faults injected", world.stats(ctx)},
		[2]string{"judge endpoint errors met", fmt.Sprintf("%d (HTTP 500s the judges logged and retried)", h.countLog("judge", "injected fault"))})
	var out strings.Builder
	rep.Print(&out)
	h.printLeaks(&out, witnesses)
	t.Logf("chaos accounting (size %s, seed %d):\n%s", sz.name, seed, out.String())

	if !rep.OK() {
		t.Errorf("lost or duplicated items (see the table and PROBLEM lines)")
	}
	if len(runs) < 2 || len(judges) < 2 || len(advs) < 2 {
		t.Errorf("fewer than two processes of a stage")
	}
	for _, kind := range []string{"rollout", "judge", "advantage"} {
		if kills[kind] < sz.kills {
			t.Errorf("kill -9 %s: %d, want %d", kind, kills[kind], sz.kills)
		}
	}
	if nodeKills != 1 || minioOutages != 1 {
		t.Errorf("NATS node kills %d, MinIO outages %d; want one each", nodeKills, minioOutages)
	}
	if s := rep.Stage("trajectories"); s == nil || s.Present == 0 {
		t.Errorf("no trajectories at all")
	}
	h.checkLeaks(witnesses, chaosStart)
	if t.Failed() {
		h.dumpLogs()
	}
}

// build compiles the four commands and codasim into the test's folder, once.
func (h *harness) build() {
	h.t.Helper()
	h.bin = filepath.Join(h.dir, "bin")
	gobin := "go"
	if g := os.Getenv("GO"); g != "" {
		gobin = g
	}
	// -trimpath as make test's passes build: the packages they compiled are
	// reused from the build cache (without it a fresh clone compiles every
	// codapipe package once more, keyed by its folder: ~30 CPU-seconds);
	// -s -w: no symbol table and DWARF, a third less time linking.
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", h.bin+"/", "./cmd/rollout", "./cmd/judge", "./cmd/advantage", "./cmd/sftpack", "./cmd/codasim")
	cmd.Dir = repoRoot(h.t)
	if out, err := cmd.CombinedOutput(); err != nil {
		h.t.Fatalf("go build: %v\n%s", err, out)
	}
}

// proc makes a worker of the harness (not started): the command's
// arguments after the common ones, its own data folder and metrics port.
func (h *harness) proc(kind, name string, batch bool, args []string) *proc {
	p := &proc{kind: kind, name: name, bin: filepath.Join(h.bin, kind), env: h.env, logDir: filepath.Join(h.dir, "logs"),
		metrics: freeAddr(h.t), batch: batch, maxFailures: 6, done: make(chan struct{})}
	p.args = append(append(slices.Clone(h.common), "--data", filepath.Join(h.dir, "data", name), "--metrics-addr", p.metrics), args...)
	h.procs = append(h.procs, p)
	return p
}

func (h *harness) launch(p *proc) {
	go p.supervise(h.t) // owned by the test: it waits for p.done or stops p
	h.t.Cleanup(func() { p.stop(5 * time.Second) })
}

// runAll starts batch processes at once and waits for them all.
func (h *harness) runAll(ps []*proc) {
	for _, p := range ps {
		h.launch(p)
	}
	for _, p := range ps {
		<-p.done
		if !p.finished {
			h.t.Errorf("%s did not finish: %v", p.name, p.failures)
		}
	}
}

// simWorld is the simulated world: codasim's addresses.
type simWorld struct{ *codasim.World }

// startSim starts the simulator as its own process (codasim, through
// codasim.Launch as rollout --sim starts it) and reads its addresses.
func (h *harness) startSim(ctx context.Context) simWorld {
	h.t.Helper()
	cfg := filepath.Join(h.dir, "sim.json")
	if err := os.WriteFile(cfg, []byte(simConfig), 0o644); err != nil {
		h.t.Fatal(err)
	}
	vms := h.sz.vmsPerApp * len(h.sz.apps)
	stderr, err := os.Create(filepath.Join(h.dir, "logs", "sim.log"))
	if err != nil {
		h.t.Fatal(err)
	}
	w, err := codasim.Launch(ctx, codasim.Request{Binary: filepath.Join(h.bin, codasim.Name), VMs: vms,
		TimeScale: h.sz.timeScale, Config: cfg, Stderr: stderr})
	if err != nil {
		h.t.Fatalf("codasim: %v; log: %s", err, tailFile(stderr.Name(), 2000))
	}
	h.t.Cleanup(func() {
		if err := w.Close(); err != nil {
			h.t.Errorf("codasim: %v", err)
		}
		stderr.Close()
	})
	if len(w.Guests) != vms || len(w.Judges) == 0 {
		h.t.Fatalf("codasim started %d of %d VMs and %d judges; log: %s", len(w.Guests), vms, len(w.Judges), tailFile(stderr.Name(), 2000))
	}
	return simWorld{w}
}

// stats sums the guests' fault counters (SIMULATOR: GET /sim/stats).
func (w simWorld) stats(ctx context.Context) string {
	var calls, hangs, errs, deaths, deadHits int
	client := &http.Client{Timeout: 5 * time.Second}
	for _, g := range w.Guests {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, g+"/sim/stats", nil)
		if err != nil {
			return err.Error()
		}
		resp, err := client.Do(req)
		if err != nil {
			return err.Error()
		}
		var st struct {
			Calls    map[string]int `json:"calls"`
			Hangs    int            `json:"hangs"`
			Errors   int            `json:"errors"`
			Deaths   int            `json:"deaths"`
			DeadHits int            `json:"dead_hits"`
		}
		err = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if err != nil {
			return fmt.Sprintf("%s/sim/stats: %v", g, err)
		}
		for _, n := range st.Calls {
			calls += n
		}
		hangs, errs, deaths, deadHits = hangs+st.Hangs, errs+st.Errors, deaths+st.Deaths, deadHits+st.DeadHits
	}
	return fmt.Sprintf("%d hangs, %d HTTP 500s, %d VM deaths (%d calls met a dead VM) in %d guest calls", hangs, errs, deaths, deadHits, calls)
}

// poolFile writes the pool file of rollout i: its own VMs of the world.
func (h *harness) poolFile(i int, urls []string) string {
	h.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "backend: sim\nid: chaos-pool-%d\nquarantine_after: 5\nsim:\n  vms:\n", i)
	for j, u := range urls {
		fmt.Fprintf(&b, "    - id: sim-%d-%d\n      url: %s\n", i, j, u)
	}
	path := filepath.Join(h.dir, "pools", fmt.Sprintf("pool-%d.yaml", i))
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		h.t.Fatal(err)
	}
	return path
}

func (h *harness) taskDir() string { return filepath.Join(h.dir, "tasks") }

// waitRE matches the setup waits of a task file ("wait": 7.5, seconds).
var waitRE = regexp.MustCompile(`"wait":\s*([0-9.]+)`)

// copyTasks copies the simulator's task files of the apps into the test's
// task folder with their setup waits (seconds of wall time after
// launching the app, as a real VM needs) scaled by the world's time scale:
// rollout scales its waits only with --sim, where it runs the world
// itself, and here the world is a process of its own.
func (h *harness) copyTasks() {
	h.t.Helper()
	src := filepath.Join(repoRoot(h.t), "internal", "sim", "tasks", "VM")
	for _, a := range h.sz.apps {
		files, err := filepath.Glob(filepath.Join(src, a.app, "*.json"))
		if err != nil || len(files) == 0 {
			h.t.Fatalf("task files of %s: %v", a.app, err)
		}
		dst := filepath.Join(h.taskDir(), a.app)
		if err := os.MkdirAll(dst, 0o755); err != nil {
			h.t.Fatal(err)
		}
		for _, f := range files {
			body, err := os.ReadFile(f)
			if err != nil {
				h.t.Fatal(err)
			}
			body = waitRE.ReplaceAllFunc(body, func(m []byte) []byte {
				v, err := strconv.ParseFloat(string(waitRE.FindSubmatch(m)[1]), 64)
				if err != nil {
					h.t.Fatalf("%s: %s: %v", f, m, err)
				}
				return []byte(`"wait": ` + strconv.FormatFloat(v*h.sz.timeScale, 'g', -1, 64))
			})
			if err := os.WriteFile(filepath.Join(dst, filepath.Base(f)), body, 0o644); err != nil {
				h.t.Fatal(err)
			}
		}
	}
}

// tasks lists the task ids of app in the simulator's task folder, as
// `rollout tasks --json` prints them.
func (h *harness) tasks(app string) []string {
	h.t.Helper()
	out, err := exec.Command(filepath.Join(h.bin, "rollout"), "tasks", "--tasks", h.taskDir(), "--app", app, "--json").Output()
	if err != nil {
		h.t.Fatalf("rollout tasks: %v", err)
	}
	var doc struct {
		Tasks []struct {
			ID string `json:"id"`
		} `json:"tasks"`
	}
	if err := json.Unmarshal(out, &doc); err != nil {
		h.t.Fatalf("rollout tasks --json: %v", err)
	}
	var ids []string
	for _, tk := range doc.Tasks {
		ids = append(ids, tk.ID)
	}
	if len(ids) == 0 {
		h.t.Fatalf("no tasks of %s", app)
	}
	return ids
}

// openBus connects the test to the cluster, with the claim store.
func (h *harness) openBus(ctx context.Context) *bus.Bus {
	h.t.Helper()
	claims, err := blob.Open(ctx, h.storeURL, h.minio.Config())
	if err != nil {
		h.t.Fatal(err)
	}
	b, err := bus.Open(ctx, bus.Config{URL: h.cluster.URL(), Claims: claims, Name: "chaos-test", Timeout: 10 * time.Second})
	if err != nil {
		h.t.Fatal(err)
	}
	h.t.Cleanup(func() { b.Close() })
	return b
}

// consumersIdle: every durable consumer of the trajectory and judged
// streams has nothing pending and nothing unacknowledged.
func (h *harness) consumersIdle(ctx context.Context, b *bus.Bus) bool {
	for _, k := range []bus.Kind{bus.Raw, bus.Judged} {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		s, err := b.JetStream().Stream(cctx, bus.StreamName(k))
		if err != nil {
			cancel()
			return false
		}
		lister := s.ListConsumers(cctx)
		n := 0
		for ci := range lister.Info() {
			if ci.Config.Durable == "" {
				continue
			}
			n++
			if ci.NumPending > 0 || ci.NumAckPending > 0 {
				cancel()
				return false
			}
		}
		err = lister.Err()
		cancel()
		if err != nil || n == 0 {
			return false
		}
	}
	return true
}

// printLeaks prints each worker's RSS first/last/max and the witnesses'
// goroutines and open files at their start and at the end.
func (h *harness) printLeaks(w *strings.Builder, witnesses []*proc) {
	fmt.Fprintf(w, "\n%-20s %6s %6s %8s %8s %8s %8s %8s\n", "worker", "starts", "kills", "failures", "samples", "rss0 MB", "rssN MB", "max MB")
	var failures []string
	for _, p := range h.procs {
		ss := p.allSamples()
		for _, f := range p.failures {
			if r := []rune(f); len(r) > 400 { // the error is at the end
				f = string(r[:40]) + " … " + string(r[len(r)-360:])
			}
			failures = append(failures, p.name+" "+f)
		}
		if len(ss) == 0 {
			fmt.Fprintf(w, "%-20s %6d %6d %8d %8d %8s %8s %8s\n", p.name, p.starts, p.kills, len(p.failures), 0, "-", "-", "-")
			continue
		}
		var mx int64
		for _, s := range ss {
			mx = max(mx, s.RSS)
		}
		fmt.Fprintf(w, "%-20s %6d %6d %8d %8d %8.1f %8.1f %8.1f\n", p.name, p.starts, p.kills, len(p.failures), len(ss), mb(ss[0].RSS), mb(ss[len(ss)-1].RSS), mb(mx))
	}
	for _, f := range failures {
		fmt.Fprintf(w, "exit (not a kill, restarted): %s\n", f)
	}
	for _, p := range witnesses {
		ss := p.lastStart()
		if len(ss) < 2 {
			continue
		}
		first, last := ss[0], ss[len(ss)-1]
		var mg, mf int
		for _, s := range ss {
			mg, mf = max(mg, s.Goroutines), max(mf, s.OpenFDs)
		}
		fmt.Fprintf(w, "leak witness %s (never killed): goroutines %d → %d (max %d), open fds %d → %d (max %d), RSS %.1f → %.1f MB over %d samples\n",
			p.name, first.Goroutines, last.Goroutines, mg, first.OpenFDs, last.OpenFDs, mf, mb(first.RSS), mb(last.RSS), len(ss))
	}
}

// Leak margins: idle keep-alive connections (to MinIO, the judge endpoint,
// NATS after a reconnect) each hold a descriptor and two goroutines.
const (
	goroutineMargin = 40
	fdMargin        = 20
	leakWarmUp      = 10 * time.Second // into the chaos, where the baseline is read
)

// checkLeaks: the witnesses, up through the whole run, end with about the
// goroutines and open files they had when the chaos began.
func (h *harness) checkLeaks(witnesses []*proc, chaosStart time.Time) {
	checked := 0
	for _, p := range witnesses {
		ss := p.lastStart()
		if len(ss) < 3 || !ss[0].Time.Before(chaosStart) {
			// It exited on its own during the chaos (listed under the
			// table) and was restarted: its readings do not span the run.
			h.t.Logf("leak check of %s skipped: its last start (%d readings) began after the chaos did", p.name, len(ss))
			continue
		}
		checked++
		// The baseline is the first reading 10 s into the chaos: a reading
		// from a worker's first moments may come before its start-up
		// (streams, buckets, selection; retried through the cluster's
		// elections) ended and its consumers started their goroutines.
		first, last := ss[0], ss[len(ss)-1]
		for _, r := range ss {
			if !r.Time.Before(chaosStart.Add(leakWarmUp)) {
				first = r
				break
			}
		}
		if last.Goroutines > first.Goroutines+goroutineMargin {
			h.t.Errorf("%s: goroutines %d at the end, %d at the start (margin %d)", p.name, last.Goroutines, first.Goroutines, goroutineMargin)
		}
		if last.OpenFDs > first.OpenFDs+fdMargin {
			h.t.Errorf("%s: open fds %d at the end, %d at the start (margin %d)", p.name, last.OpenFDs, first.OpenFDs, fdMargin)
		}
	}
	if checked == 0 {
		h.t.Errorf("no leak witness ran through the chaos")
	}
}

// countLog counts the lines holding s in the logs of the workers of kind.
func (h *harness) countLog(kind, s string) int {
	n := 0
	for _, p := range h.procs {
		if p.kind != kind {
			continue
		}
		for i := 1; i <= p.starts; i++ {
			body, err := os.ReadFile(filepath.Join(h.dir, "logs", fmt.Sprintf("%s.%d.log", p.name, i)))
			if err == nil {
				n += strings.Count(string(body), s)
			}
		}
	}
	return n
}

// dumpLogs prints the tail of every worker's last log.
func (h *harness) dumpLogs() {
	for _, p := range h.procs {
		path := filepath.Join(h.dir, "logs", fmt.Sprintf("%s.%d.log", p.name, p.starts))
		h.t.Logf("%s (start %d, failures %d): %s", p.name, p.starts, len(p.failures), tailFile(path, 1500))
	}
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// poll calls cond every 200 ms until it holds (true) or within passes.
func poll(ctx context.Context, within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		sleep(ctx, 200*time.Millisecond)
	}
}
