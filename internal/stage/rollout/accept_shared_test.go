package rollout

// Issue 24, acceptance 1: two rollout processes on one --run split its
// episodes through the shared work queue, and a killed one's episodes are
// finished by the other.

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/infra/vmlock"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/internal/testkit/proctest"
	"github.com/nats-io/nats.go/jetstream"
)

// sharedHost is one rollout process of a shared run.
type sharedHost struct {
	name    string
	cmd     *exec.Cmd
	log     string // its JSON log
	summary string // its --summary file
	exited  chan error
}

// startSharedHost starts a rollout process on run with its own simulated
// VMs (--sim --vms vms) and data directory, sharing NATS and the blob store.
func startSharedHost(t testing.TB, name, natsURL, dir, tasks, run string, samples, vms int, extra ...string) *sharedHost {
	t.Helper()
	return startHost(t, name, natsURL, dir, tasks, run, samples, vms, "0.002", extra...)
}

// startHost is startSharedHost with the simulator's time scale.
func startHost(t testing.TB, name, natsURL, dir, tasks, run string, samples, vms int, timeScale string, extra ...string) *sharedHost {
	t.Helper()
	h := &sharedHost{name: name, log: filepath.Join(dir, name+".log"), summary: filepath.Join(dir, name+".summary.json"), exited: make(chan error, 1)}
	args := append([]string{"--app", acceptApp, "--sim", "--vms", strconv.Itoa(vms), "--tasks", tasks,
		"--samples", strconv.Itoa(samples), "--group", "2", "--run", run, "--seed", "1",
		"--nats", natsURL, "--data", filepath.Join(dir, name), "--store", filepath.Join(dir, "shared", "blobs"),
		"--lease", "3s", "--time-scale", timeScale, "--summary", h.summary, "--log-format", "json", "--log-level", "debug"}, extra...)
	h.cmd = proctest.Command(t, "", args...)
	f, err := os.Create(h.log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	h.cmd.Stdout, h.cmd.Stderr = f, f
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { h.exited <- h.cmd.Wait() }() // owned: ends with the child (killed at cleanup at the latest)
	return h
}

// wait waits for the host to exit and returns its error.
func (h *sharedHost) wait(t testing.TB, d time.Duration) error {
	t.Helper()
	select {
	case err := <-h.exited:
		return err
	case <-time.After(d):
		t.Fatalf("%s did not finish within %v; log:\n%s", h.name, d, tail(h.log, 40))
		return nil
	}
}

// episodeLogs counts the host's log records with message msg per episode.
func (h *sharedHost) episodeLogs(t testing.TB, msg string) map[ledger.EpisodeKey]int {
	t.Helper()
	f, err := os.Open(h.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[ledger.EpisodeKey]int{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg    string `json:"msg"`
			Task   string `json:"task"`
			Sample int    `json:"sample"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg == msg {
			out[ledger.EpisodeKey{Task: rec.Task, Sample: rec.Sample}]++
		}
	}
	return out
}

func (h *sharedHost) readSummary(t testing.TB) *Summary {
	t.Helper()
	var s Summary
	if err := service.ReadJSON(h.summary, &s); err != nil {
		t.Fatalf("%s: summary: %v\n%s", h.name, err, tail(h.log, 40))
	}
	return &s
}

func tail(path string, n int) string {
	b, _ := os.ReadFile(path)
	lines := splitLines(string(b))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	out := ""
	for _, l := range lines {
		out += l + "\n"
	}
	return out
}

func splitLines(s string) []string {
	var out []string
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		out = append(out, sc.Text())
	}
	return out
}

// sharedWorld is what the shared-run tests check against: the NATS server,
// the tasks and the expected episodes.
type sharedWorld struct {
	url      string // NATS: one server or a cluster's seeds
	dir      string
	tasks    string
	taskIDs  []string
	samples  int
	episodes int
}

func newSharedWorld(t *testing.T, natsURL string) *sharedWorld {
	ids := []string{"S01", "S02", "S03", "S05"}
	w := &sharedWorld{url: natsURL, dir: t.TempDir(), taskIDs: ids, samples: 3}
	w.tasks = simTaskDir(t, acceptApp, ids...)
	w.episodes = len(ids) * w.samples
	return w
}

// checkStream: every planned episode of run has exactly one trajectory on
// the stream, and the run is recorded as finished.
func (w *sharedWorld) checkStream(t *testing.T, run string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, bus.Config{URL: w.url, Name: "accept-shared"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	per := map[ledger.EpisodeKey]int{}
	for _, p := range readPublished(t, b, openStore(t, filepath.Join(w.dir, "shared")), acceptApp) {
		if p.Header.Get(HeaderRun) == run {
			per[ledger.EpisodeKey{Task: p.Task, Sample: p.Sample}]++
		}
	}
	if len(per) != w.episodes {
		t.Errorf("run %s: %d episodes on the stream, want %d", run, len(per), w.episodes)
	}
	for k, n := range per {
		if n != 1 {
			t.Errorf("run %s: episode %v has %d trajectories on the stream, want 1", run, k, n)
		}
	}
	runs, err := ledger.Open(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	if fin, err := runs.Finished(ctx, run); err != nil || !fin {
		t.Errorf("run %s: finished = %v (%v), want the end recorded", run, fin, err)
	}
}

// Acceptance 1a: two hosts on one run split its episodes: each episode is
// taken (run) by one host only, both run some, the stream has each once.
func TestAcceptSharedRunSplit(t *testing.T) {
	clearRolloutEnv(t)
	w := newSharedWorld(t, natstest.Start(t).URL())
	const run = "shared-split"
	// The VM locks in NATS (the hosts' VMs differ, so they never meet):
	// every lock is taken and given back through CODA_VMLOCKS.
	a := startSharedHost(t, "a", w.url, w.dir, w.tasks, run, w.samples, 2, "--vm-locks", "nats")
	b := startSharedHost(t, "b", w.url, w.dir, w.tasks, run, w.samples, 2, "--vm-locks", "nats")
	for _, h := range []*sharedHost{a, b} {
		if err := h.wait(t, 2*time.Minute); err != nil {
			t.Fatalf("%s: %v\n%s", h.name, err, tail(h.log, 40))
		}
	}
	taken := map[ledger.EpisodeKey]int{}
	total := 0
	for _, h := range []*sharedHost{a, b} {
		s := h.readSummary(t)
		mine := h.episodeLogs(t, msgEpisodeTaken)
		for k, n := range mine {
			taken[k] += n
		}
		if s.Episodes == 0 || s.Episodes != len(mine) {
			t.Errorf("%s ran %d episodes (summary), took %d (log); want both > 0 and equal", h.name, s.Episodes, len(mine))
		}
		if !s.SharedQueue || s.Episodes+s.ByOtherHosts != w.episodes || s.Retaken != 0 {
			t.Errorf("%s: summary shared %v, %d episodes + %d by the other host, %d taken over; want %d, none taken over",
				h.name, s.SharedQueue, s.Episodes, s.ByOtherHosts, s.Retaken, w.episodes)
		}
		total += s.Episodes
		t.Logf("%s ran %d episodes, the other %d", h.name, s.Episodes, s.ByOtherHosts)
	}
	for k, n := range taken {
		if n != 1 {
			t.Errorf("episode %v was run %d times", k, n)
		}
	}
	if total != w.episodes || len(taken) != w.episodes {
		t.Errorf("the hosts ran %d episodes (%d distinct), want %d", total, len(taken), w.episodes)
	}
	w.checkStream(t, run)
	checkNoVMLocks(t, w.url)
}

// checkNoVMLocks: CODA_VMLOCKS exists and holds no lock (the hosts took
// their VMs' locks there and released them at the end).
func checkNoVMLocks(t *testing.T, url string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b, err := bus.Open(ctx, bus.Config{URL: url, Name: "accept-vmlocks"})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	kv, err := b.JetStream().KeyValue(ctx, vmlock.Bucket)
	if err != nil {
		t.Fatalf("bucket %s: %v", vmlock.Bucket, err)
	}
	keys, err := kv.Keys(ctx)
	if err != nil && !errors.Is(err, jetstream.ErrNoKeysFound) {
		t.Fatal(err)
	}
	if len(keys) != 0 {
		t.Errorf("VM locks left after both hosts ended: %v", keys)
	}
	st, err := kv.Status(ctx)
	if err != nil || st.Values() == 0 {
		t.Errorf("%s status %v (%v): want the hosts' lock history in it", vmlock.Bucket, st, err)
	}
}

// Acceptance 1b: one of two hosts is killed (SIGKILL) mid-run; the other
// finishes its episodes once their lease has expired. The stream has each
// episode once, and only the episodes the killed host held at the kill
// ran twice.
func TestAcceptSharedRunKill(t *testing.T) {
	clearRolloutEnv(t)
	testSharedRunKill(t, newSharedWorld(t, natstest.Start(t).URL()))
}

// The same on a 3-node JetStream cluster, with the work queue, its
// consumer, the streams and the ledger replicated 3 times (--replicas 3).
func TestAcceptSharedRunKillOnCluster(t *testing.T) {
	clearRolloutEnv(t)
	testSharedRunKill(t, newSharedWorld(t, natstest.StartCluster(t, 3).URL()), "--replicas", "3")
}

func testSharedRunKill(t *testing.T, w *sharedWorld, extra ...string) {
	const run = "shared-kill"
	a := startSharedHost(t, "a", w.url, w.dir, w.tasks, run, w.samples, 2, extra...)
	// b joins once a has taken an episode: on a cluster just formed, setting
	// up the streams can hold a host for seconds, in which b alone would
	// run the whole queue and leave a nothing to be killed with.
	deadline := time.Now().Add(time.Minute)
	for len(a.episodeLogs(t, msgEpisodeTaken)) == 0 {
		select {
		case err := <-a.exited:
			t.Fatalf("host a ended (%v) before it took an episode; its log:\n%s", err, tail(a.log, 40))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("host a took no episode within a minute; its log:\n%s", tail(a.log, 40))
		}
		time.Sleep(poll.Interval)
	}
	b := startSharedHost(t, "b", w.url, w.dir, w.tasks, run, w.samples, 2, extra...)
	// Kill a once it has finished an episode and holds others.
	deadline = time.Now().Add(time.Minute)
	for {
		done, taken := a.episodeLogs(t, msgEpisodeDone), a.episodeLogs(t, msgEpisodeTaken)
		if len(done) >= 1 && len(taken) > len(done) {
			break
		}
		select {
		case err := <-a.exited:
			t.Fatalf("host a ended (%v) before it held an episode after finishing one; its log:\n%s\nb's log:\n%s", err, tail(a.log, 40), tail(b.log, 20))
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("host a did not finish an episode and take another within a minute; its log:\n%s\nb's log:\n%s", tail(a.log, 40), tail(b.log, 20))
		}
		time.Sleep(poll.Interval)
	}
	if err := a.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	<-a.exited
	killedTook, killedDone := a.episodeLogs(t, msgEpisodeTaken), a.episodeLogs(t, msgEpisodeDone)
	held := map[ledger.EpisodeKey]bool{}
	for k := range killedTook {
		if killedDone[k] == 0 {
			held[k] = true
		}
	}
	if err := b.wait(t, 2*time.Minute); err != nil {
		t.Fatalf("b: %v\n%s", err, tail(b.log, 40))
	}
	s := b.readSummary(t)
	bTook := b.episodeLogs(t, msgEpisodeTaken)
	twice := 0
	for k, n := range bTook {
		if n != 1 {
			t.Errorf("host b ran %v %d times", k, n)
		}
		if killedTook[k] > 0 {
			twice++
			if !held[k] {
				t.Errorf("episode %v ran on both hosts but a had finished it before the kill", k)
			}
		}
	}
	// In flight at the kill: the episodes a had taken and not finished,
	// and at most one more per VM that it had fetched but not yet logged.
	const aVMs = 2
	if s.Retaken == 0 || s.Retaken > aVMs || twice > aVMs {
		t.Errorf("b took over %d episodes and %d ran on both hosts; a held %d at the kill, with %d VMs", s.Retaken, twice, len(held), aVMs)
	}
	t.Logf("a finished %d episodes and held %d at the kill; b ran %d (%d ran twice, %d taken over)", len(killedDone), len(held), len(bTook), twice, s.Retaken)
	for k := range killedDone {
		if bTook[k] > 0 {
			t.Errorf("episode %v was finished by a and run again by b", k)
		}
	}
	if len(killedDone)+len(bTook)+countPublishedBeforeAck(held, bTook) != w.episodes {
		t.Errorf("a finished %d, b ran %d: want the %d episodes each run to its end once", len(killedDone), len(bTook), w.episodes)
	}
	w.checkStream(t, run)
}

// countPublishedBeforeAck counts the episodes a held at the kill that b
// did not run: a published them and was killed before it acknowledged
// them, so b found them in the ledger.
func countPublishedBeforeAck(held map[ledger.EpisodeKey]bool, bTook map[ledger.EpisodeKey]int) int {
	n := 0
	for k := range held {
		if bTook[k] == 0 {
			n++
		}
	}
	return n
}
