package judge

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/proctest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Acceptance 1: on a demo-like run's trajectories (rollout --sim, then
// judge --sim --drain on the same data directory), every trajectory gets
// exactly one judged message and one archive entry, environment-error
// ones are recorded as not judged with 0 calls, a second drain judges
// nothing again, and judge report prints the table and the JSON document.
func TestAcceptDemoJudged(t *testing.T) {
	dir := t.TempDir()
	// VM 1 fails every screenshot (its setup and the pool's after-revert
	// call still work) and episodes are not retried: some trajectories end
	// by an environment error.
	raw := pipetest.Run(t, dir, pipetest.Spec{
		App: acceptApp, Tasks: []string{"S01", "S02", "S03", "S04", "S05"}, Samples: 2, Group: 1, Run: "demo",
		Sim: `{"per_vm": {"1": {"endpoints": {"/screenshot": {"error_prob": 1}}}}}`, RolloutArgs: []string{"--env-retries", "0"},
	}).Trajectories
	envErrs := 0
	for _, tr := range raw {
		if tr.Outcome.IsEnvError() {
			envErrs++
		}
	}
	if envErrs == 0 || envErrs == len(raw) {
		t.Fatalf("the run needs both kinds of trajectories: %d env errors of %d", envErrs, len(raw))
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	judgeCLI := func(args ...string) (string, string) {
		var out, errb bytes.Buffer
		common := []string{"--data", dir, "--log-level", "warn"}
		full := append(common, args...)
		if len(args) > 0 && args[0] == "report" { // a subcommand comes first
			full = append(append([]string{"report"}, common...), args[1:]...)
		}
		if code := service.MainContext(ctx, Command(), full, &out, &errb); code != 0 {
			t.Fatalf("judge %v: exit %d\n%s", args, code, errb.String())
		}
		return out.String(), errb.String()
	}
	frames := fmt.Sprint(testFrames)
	out, logs := judgeCLI("--sim", "--drain", "--lowres", "640x400", "--max-frames", frames, "--log-level", "info")
	if !strings.Contains(out, fmt.Sprintf("judge: %d trajectories", len(raw))) || !strings.Contains(logs, `"msg":"judge: drained"`) || !strings.Contains(logs, fmt.Sprintf(`"judged":%d,`, len(raw))) {
		t.Errorf("judge output:\n%s\nlog:\n%s", out, logs)
	}

	env, b, store := pipetest.Open(t, &service.Common{DataDir: dir})
	docs, msgs := judgedOn(t, b)
	arch := archived(t, store)
	byID := map[string]*traj.Judged{}
	for i, d := range docs {
		id := d.Trajectory.ID
		if byID[id] != nil {
			t.Errorf("trajectory %s has two judged messages", id)
		}
		byID[id] = d
		if got, want := msgs[i].Header.Get("Nats-Msg-Id"), archive.MessageID(id, d.Judgement.Judge.ID()); got != want {
			t.Errorf("message id %q, want %q", got, want)
		}
		key := archive.Key(d.Trajectory.Run, d.Trajectory.Task.App, id, d.Judgement.Judge.ID())
		if a := arch[key]; a == nil || a.Judgement.JudgedAt != d.Judgement.JudgedAt || a.Judgement.Decision != d.Judgement.Decision {
			t.Errorf("trajectory %s: archive entry %s missing or different from the message", id, key)
		}
	}
	if len(arch) != len(raw) {
		t.Errorf("%d archive entries for %d trajectories", len(arch), len(raw))
	}
	for _, tr := range raw {
		d := byID[tr.ID]
		if d == nil {
			t.Errorf("trajectory %s (%s) was not judged", tr.ID, tr.Outcome.Kind)
			continue
		}
		j := d.Judgement
		switch {
		case tr.Outcome.IsEnvError():
			if j.Decision != traj.NotJudged || len(j.Votes) != 0 || !strings.Contains(j.Reason, tr.Outcome.Reason) {
				t.Errorf("env-error trajectory %s: decision %s, %d votes, reason %q", tr.ID, j.Decision, len(j.Votes), j.Reason)
			}
		case j.Decision == traj.NotJudged || len(j.Votes) == 0:
			t.Errorf("trajectory %s was not shown to the judge: %+v", tr.ID, j)
		default: // the default policy with the simulator's two models
			pol := DefaultPolicy(2)
			for i, v := range j.Votes {
				if want := map[bool]string{true: "640x400", false: "1280x800"}[pol.LowResVote(i)]; v.Resolution != want {
					t.Errorf("trajectory %s: vote %d was at %s, want %s", tr.ID, i, v.Resolution, want)
				}
			}
		}
	}
	if t.Failed() {
		return
	}
	env.Close()

	// Everything is acknowledged: a second drain judges nothing.
	out, _ = judgeCLI("--sim", "--drain", "--lowres", "640x400", "--max-frames", frames)
	if !strings.Contains(out, "judge: 0 trajectories") {
		t.Errorf("second drain:\n%s", out)
	}

	table, _ := judgeCLI("report")
	for _, want := range []string{"calls/traj", "precision", acceptApp, "overall", "not judged"} {
		if !strings.Contains(table, want) {
			t.Errorf("report table lacks %q:\n%s", want, table)
		}
	}
	js, _ := judgeCLI("report", "--json", "--run", "demo")
	var rep struct {
		Overall map[string]any            `json:"overall"`
		Apps    map[string]map[string]any `json:"apps"`
	}
	if err := json.Unmarshal([]byte(js), &rep); err != nil {
		t.Fatalf("report --json: %v\n%s", err, js)
	}
	for _, part := range []map[string]any{rep.Overall, rep.Apps[acceptApp]} {
		for _, k := range []string{"trajectories", "decisions", "calls_per_trajectory", "precision", "recall", "f1"} {
			if _, ok := part[k]; !ok {
				t.Errorf("report JSON lacks %q: %v", k, part)
			}
		}
	}
	if n := rep.Overall["trajectories"].(float64); int(n) != len(raw) {
		t.Errorf("report: %v trajectories, want %d", n, len(raw))
	}
	if n := rep.Overall["decisions"].(map[string]any)[string(traj.NotJudged)].(float64); int(n) != envErrs {
		t.Errorf("report: %v not judged, want %d", n, envErrs)
	}
}

// TestArchiveAndMessageIDsPerVersion: a trajectory judged by two judge
// versions has two distinct archive keys and message ids; by one, the
// same.
func TestArchiveAndMessageIDsPerVersion(t *testing.T) {
	a, b := traj.JudgeVersion{PromptSHA256: "p", Models: []string{"m"}, Policy: "unanimous@4"}, traj.JudgeVersion{PromptSHA256: "p", Models: []string{"m"}, Policy: "majority@4"}
	id := traj.NewID()
	if archive.Key("r", "ChimeraX", id, a.ID()) == archive.Key("r", "ChimeraX", id, b.ID()) || archive.MessageID(id, a.ID()) == archive.MessageID(id, b.ID()) {
		t.Fatal("two judge versions share a key")
	}
	if got := archive.Key("night/1", "GRASS GIS", id, a.ID()); got != "judged/night=2F1/GRASS=20GIS/"+id+"."+a.ID()+".json" {
		t.Fatalf("archive key %q", got)
	}
	if filepath.Base(archive.Key("..", "..", id, a.ID())) == ".." || strings.Contains(archive.Key("..", "x", id, "v"), "/../") {
		t.Fatal("a run name escapes the archive")
	}
	if !slices.Equal([]string{DurableName("v", nil), DurableName("v", []string{"GRASS GIS"})}, []string{"judge_v", "judge_v_GRASS_GIS"}) {
		t.Fatalf("durable names %q %q", DurableName("v", nil), DurableName("v", []string{"GRASS GIS"}))
	}
	if bus.KeyToken("x") != "x" {
		t.Fatal("key token")
	}
}

// Acceptance 5: the judge endpoint answers 10 % of calls with HTTP 500,
// 10 % with 429 and 20 % of its answers are malformed; the stream also
// holds a corrupt message and a trajectory whose screenshots are gone.
// Every trajectory still ends with exactly one judgement (decided or
// undecided), malformed answers are asked again, and the two bad
// messages are dead-lettered with a reason that says what is wrong while
// the others are judged.
func TestAcceptFaults(t *testing.T) {
	srv := natstest.Start(t)
	c := sharedCorpus(t)
	common := &service.Common{DataDir: t.TempDir(), Store: filepath.Join(c.dir, "blobs")}
	common.NATS.URL = srv.URL()

	models, ep := startSimJudge(t, 1, func(mc *simmodels.Config) {
		mc.Judge.Faults.ErrorProb = 0.1
		mc.Judge.Faults.RateLimitProb = 0.1
		mc.Judge.Faults.MalformedProb = 0.2
	})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	_, b, store := pipetest.Open(t, common)
	raw := republish(t, b, c.trajs, "faults-"+traj.NewID(), 24)

	// A corrupt message and a trajectory whose final screenshot is gone.
	subject := bus.Subject(bus.Raw, acceptApp)
	if _, err := b.Publish(ctx, subject, "corrupt-1", []byte(`{"schema_version": 3, "id": "01J`), nil); err != nil {
		t.Fatal(err)
	}
	var victim *traj.Trajectory
	for _, tr := range raw {
		if !tr.Outcome.IsEnvError() && tr.FinalScreenshot != nil {
			c := *tr
			victim = &c
			break
		}
	}
	victim.ID = traj.NewID()
	gone := *victim.FinalScreenshot
	gone.SHA256 = strings.Repeat("ab", 32)
	victim.FinalScreenshot = &gone
	body, err := traj.MarshalCompact(victim)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Publish(ctx, subject, victim.ID, body, nil); err != nil {
		t.Fatal(err)
	}

	j := cachedJudge(t, b, common.Topology(), store, ep, Limits{Backoff: 5 * time.Millisecond})
	st, err := Serve(ctx, ServiceConfig{Judge: j, Bus: b, Archive: store, Workers: 4, Drain: true, RetryDelay: 50 * time.Millisecond, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("stats %+v", st)

	docs, _ := judgedOn(t, b)
	seen := map[string]int{}
	undecided, reasked := 0, 0
	for _, d := range docs {
		seen[d.Trajectory.ID]++
		if d.Judgement.Decision == traj.Undecided {
			undecided++
			if d.Judgement.Reason == "" {
				t.Errorf("trajectory %s undecided without a reason", d.Trajectory.ID)
			}
		}
		for _, v := range d.Judgement.Votes {
			if v.Attempts > 1 {
				reasked++
			}
		}
	}
	for _, tr := range raw {
		if seen[tr.ID] != 1 {
			t.Errorf("trajectory %s: %d judgements, want 1", tr.ID, seen[tr.ID])
		}
	}
	if seen[victim.ID] != 0 || len(docs) != len(raw) {
		t.Errorf("%d judged messages for %d good trajectories (the one without screenshots: %d)", len(docs), len(raw), seen[victim.ID])
	}
	if reasked == 0 {
		t.Error("no vote was asked again although 20 % of the answers are malformed")
	}
	if st.DeadLettered != 2 {
		t.Errorf("%d dead-lettered, want 2", st.DeadLettered)
	}
	t.Logf("%d undecided, %d votes asked again, %d judge calls answered", undecided, reasked, len(models.Answered("judge")))

	pipetest.CheckDeadLetters(t, b, map[string][]string{
		"corrupt-1": {"not a valid trajectory"},
		victim.ID:   {victim.ID, gone.SHA256, "final screen", "not found"},
	})
}

// procRig is the set-up of a test that runs judge processes: a fresh NATS
// server with the topology, on which the test republishes trajectories of
// the shared corpus (raw), and the processes' log file, printed when the
// test fails.
type procRig struct {
	srv  *natstest.Server
	dir  string // the test's folder
	c    *corpus
	b    *bus.Bus
	raw  []*traj.Trajectory
	logf *os.File
}

// newProcRig sets up the rig with 24 of the corpus's trajectories
// republished under run name run.
func newProcRig(ctx context.Context, t *testing.T, run string) *procRig {
	t.Helper()
	r := &procRig{srv: natstest.Start(t), dir: t.TempDir(), c: sharedCorpus(t)}
	r.b = pipetest.Bus(t, r.srv.URL())
	if err := r.b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	r.raw = republish(t, r.b, r.c.trajs, run, 24)
	logf, err := os.Create(filepath.Join(r.dir, "judge.log"))
	if err != nil {
		t.Fatal(err)
	}
	r.logf = logf
	t.Cleanup(func() {
		if t.Failed() {
			b, _ := os.ReadFile(logf.Name())
			t.Logf("judge processes' output:\n%s", b)
		}
		logf.Close()
	})
	return r
}

// args are a judge drain's arguments: its data directory dir/data, the
// corpus's blob store, endpoint ep, concurrency, an --ack-wait of 2 s (a
// killed process's trajectories come back quickly).
func (r *procRig) args(data string, ep EndpointSpec, concurrency int) []string {
	return []string{
		"--drain", "--nats", r.srv.URL(), "--data", filepath.Join(r.dir, data), "--store", filepath.Join(r.c.dir, "blobs"),
		"--max-frames", fmt.Sprint(testFrames), "--judge", ep.URL + "=" + ep.Model, "--concurrency", fmt.Sprint(concurrency),
		"--log-level", "warn", "--ack-wait", "2s",
	}
}

// start starts the judge command with args in a child process (the test
// binary in its TestMain mode), its output to the rig's log; exited
// receives its end (the caller receives it).
func (r *procRig) start(t *testing.T, args []string) (cmd *exec.Cmd, exited chan error) {
	t.Helper()
	cmd = proctest.Command(t, "", args...)
	cmd.Stdout, cmd.Stderr = r.logf, r.logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited = make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	return cmd, exited
}

// checkJudgedOnce checks that every republished trajectory has exactly one
// judged message on the bus, and returns the judged messages.
func (r *procRig) checkJudgedOnce(t *testing.T) []*traj.Judged {
	t.Helper()
	docs, _ := judgedOn(t, r.b)
	seen := map[string]int{}
	for _, d := range docs {
		seen[d.Trajectory.ID]++
	}
	for _, tr := range r.raw {
		if seen[tr.ID] != 1 {
			t.Errorf("trajectory %s has %d judged messages, want 1", tr.ID, seen[tr.ID])
		}
	}
	if len(docs) != len(r.raw) {
		t.Errorf("%d judged messages for %d trajectories", len(docs), len(r.raw))
	}
	return docs
}

// Acceptance 4: the judge is killed with SIGKILL at random moments (3
// times) while it drains a run, and started again until it finishes. No
// call that had answered before a kill is made again — the calls exceed
// those of an uninterrupted run (the same judge against a second
// simulated endpoint with the same configuration) only by the calls in
// flight at each kill, at most the concurrency per kill — every
// trajectory has exactly one judged message, and the judgements are those
// of the uninterrupted run.
func TestAcceptKillAndRestart(t *testing.T) {
	const (
		kills       = 3
		concurrency = 4
	)
	rig := newProcRig(t.Context(), t, "kill-"+traj.NewID()) // the rig (and the corpus) first, then the deadline
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()

	// Judge calls take 40 ms, so that kills land in the middle of calls.
	edit := func(c *simmodels.Config) {
		c.Clock = fault.Clock{Scale: 1}
		c.Judge.Faults.Latency = fault.Fixed(40 * time.Millisecond)
	}
	models, ep := startSimJudge(t, 1, edit)
	args := rig.args("judge", ep, concurrency)

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
	killed := 0
	for killed < kills {
		before := len(models.Answered("judge"))
		cmd, exited := rig.start(t, args)
		// A random moment: after 1 to 5 more answered calls, plus up to
		// 30 ms (often in the middle of a call).
		target := before + 1 + rng.IntN(5)
		deadline := time.Now().Add(time.Minute)
		var done bool
		for !done && len(models.Answered("judge")) < target && time.Now().Before(deadline) {
			select {
			case err := <-exited:
				t.Fatalf("the judge process ended before it was killed (%v): the run is too short for %d kills", err, kills)
			case <-time.After(2 * time.Millisecond):
			}
		}
		time.Sleep(time.Duration(rng.IntN(30)) * time.Millisecond)
		if err := cmd.Process.Kill(); err != nil {
			t.Fatal(err)
		}
		if err := <-exited; err == nil || !strings.Contains(err.Error(), "killed") {
			t.Fatalf("kill %d: the process ended with %v, not by the kill", killed+1, err)
		}
		killed++
		t.Logf("kill %d after %d answered calls", killed, len(models.Answered("judge")))
	}
	_, exited := rig.start(t, args)
	if err := <-exited; err != nil {
		t.Fatalf("the last judge process: %v", err)
	}

	// What an uninterrupted run calls and decides.
	refModels, refEP := startSimJudge(t, 1, edit)
	pol := DefaultPolicy(1) // what the command judges with, one --judge
	pol.MaxFrames = testFrames
	ref, err := New(Config{Endpoints: []EndpointSpec{refEP}, Policy: pol, Store: rig.c.store(t), Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	refDecision := map[string]*traj.Judgement{}
	for _, tr := range rig.raw {
		jd, err := ref.Judge(ctx, tr, false)
		if err != nil {
			t.Fatal(err)
		}
		refDecision[tr.ID] = jd
	}

	calls, refCalls := models.Answered("judge"), refModels.Answered("judge")
	count := map[string]int{}
	for _, c := range calls {
		count[c]++
	}
	refSet := map[string]bool{}
	for _, c := range refCalls {
		refSet[c] = true
		if count[c] == 0 {
			t.Errorf("call %s of the uninterrupted run was never made", c)
		}
	}
	repeated := 0
	for c, n := range count {
		if !refSet[c] {
			t.Errorf("call %s is not one the uninterrupted run makes", c)
		}
		repeated += n - 1
	}
	t.Logf("%d calls, uninterrupted %d: %d repeated after %d kills", len(calls), len(refCalls), repeated, kills)
	if extra := len(calls) - len(refCalls); extra > kills*concurrency || extra != repeated {
		t.Errorf("%d calls beyond the uninterrupted run's %d; at most %d (the concurrency %d per kill) may be", extra, len(refCalls), kills*concurrency, concurrency)
	}

	for _, d := range rig.checkJudgedOnce(t) {
		id := d.Trajectory.ID
		if r := refDecision[id]; r == nil || r.Decision != d.Judgement.Decision || len(r.Votes) != len(d.Judgement.Votes) {
			t.Errorf("trajectory %s: judged %s with %d votes, uninterrupted %+v", id, d.Judgement.Decision, len(d.Judgement.Votes), r)
		}
	}
}
