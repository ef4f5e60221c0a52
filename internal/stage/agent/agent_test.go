package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/agent"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
	openai "github.com/sashabaranov/go-openai"
)

// world starts a simulated world and an agent on it.
type world struct {
	w    *sim.World
	pool *vmpool.Pool
	ag   *agent.Agent
}

func startWorld(t *testing.T, vms, group int, tweak func(*sim.WorldConfig)) *world {
	t.Helper()
	return startWorldWith(t, vms, group, tweak, nil)
}

// startWorldWith is startWorld with a hook that edits the agent's
// configuration before the agent is built.
func startWorldWith(t *testing.T, vms, group int, tweak func(*sim.WorldConfig), agentTweak func(*agent.Config)) *world {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	wc := sim.DefaultWorldConfig()
	wc.VMs, wc.Clock = vms, fault.Clock{Scale: 0}
	if tweak != nil {
		tweak(&wc)
	}
	w, err := sim.StartWorld(ctx, wc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := simvm.New(simvm.URLs(w.GuestURLs...))
	if err != nil {
		t.Fatal(err)
	}
	pool, err := vmpool.NewPool(ctx, vmpool.Config{ID: "agent-test", IdleCheck: -1, LockDir: t.TempDir()}, b)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		pool.Close(context.Background())
		cancel()
		w.Models.Wait()
	})
	store, err := blob.Open(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	planner, err := model.New(model.Config{BaseURL: w.Models.PlannerURL, Model: simmodels.DefaultPlannerModel, Attempts: 2, Backoff: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	executor, err := model.New(model.Config{BaseURL: w.Models.ExecutorURL, Model: simmodels.DefaultExecutorModel, Attempts: 2, Backoff: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	prompts, err := prompt.Load("")
	if err != nil {
		t.Fatal(err)
	}
	seed := int64(7)
	acfg := agent.Config{Planner: planner, Executor: executor, Prompts: prompts, Store: store, Group: group, Run: "test", RequestSeed: &seed, Sleep: fault.Clock{Scale: 1e-6}.Sleep}
	if agentTweak != nil {
		agentTweak(&acfg)
	}
	ag, err := agent.New(acfg)
	if err != nil {
		t.Fatal(err)
	}
	return &world{w: w, pool: pool, ag: ag}
}

// runAll runs one episode of every simulated task, on the pool's VMs.
func (w *world) runAll(t *testing.T) map[string]*traj.Trajectory {
	t.Helper()
	return w.runSome(t, func(int) bool { return true })
}

// runSome is runAll for the tasks whose index (in ID order) keep accepts.
func (w *world) runSome(t *testing.T, keep func(i int) bool) map[string]*traj.Trajectory {
	t.Helper()
	all, err := simtasks.All()
	if err != nil {
		t.Fatal(err)
	}
	var tasks []simtasks.Task
	for i, tk := range all {
		if keep(i) {
			tasks = append(tasks, tk)
		}
	}
	if raceEnabled {
		// One task per app under the race detector (see race_on_test.go).
		seen := map[string]bool{}
		var some []simtasks.Task
		for _, tk := range tasks {
			if !seen[tk.App] {
				seen[tk.App] = true
				some = append(some, tk)
			}
		}
		tasks = some
	}
	var mu sync.Mutex
	out := map[string]*traj.Trajectory{}
	var wg sync.WaitGroup
	sem := make(chan struct{}, w.pool.Size())
	for i := range tasks {
		task := &tasks[i].Task
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l, err := w.pool.Lease(context.Background())
			if err != nil {
				t.Error(err)
				return
			}
			tr, err := w.ag.Run(context.Background(), agent.Episode{Task: task, Samples: 1, VM: l.ID(), Guest: l.Guest()})
			l.End(vmpool.Healthy)
			if tr == nil {
				t.Errorf("%s: no trajectory: %v", task.ID, err)
				return
			}
			mu.Lock()
			out[task.ID] = tr
			mu.Unlock()
		}()
	}
	wg.Wait()
	if len(out) != len(tasks) {
		t.Fatalf("%d trajectories for %d tasks", len(out), len(tasks))
	}
	return out
}

// runOne runs one episode of the simulated task id on a leased VM and
// fails the test unless it returns a trajectory without error.
func (w *world) runOne(t *testing.T, id string) *traj.Trajectory {
	t.Helper()
	task, ok := simtasks.ByID(id)
	if !ok {
		t.Fatalf("no task %s", id)
	}
	l, err := w.pool.Lease(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer l.End(vmpool.Healthy)
	tr, err := w.ag.Run(context.Background(), agent.Episode{Task: &task.Task, Samples: 1, VM: l.ID(), Guest: l.Guest()})
	if tr == nil || err != nil {
		t.Fatalf("%s: %v (trajectory %v)", id, err, tr != nil)
	}
	return tr
}

func perfect(wc *sim.WorldConfig) {
	wc.Models.Planner.DefaultSkill, wc.Models.Planner.Skill = 1, nil
	wc.Models.Executor.GroundingNoise, wc.Models.Executor.MisgroundRate = 0, 0
}

// TestAcceptNoSimTaskSucceedsWithSkillZero: the evaluators are real checks of
// the simulated state — a planner that never takes the right step never
// passes one.
func TestAcceptNoSimTaskSucceedsWithSkillZero(t *testing.T) {
	w := startWorld(t, 4, 0, func(wc *sim.WorldConfig) {
		perfect(wc)
		wc.Models.Planner.DefaultSkill = 0
	})
	for id, tr := range w.runAll(t) {
		if tr.Outcome.IsEnvError() {
			t.Errorf("%s: environment error %q", id, tr.Outcome.Reason)
		}
		if tr.Eval != nil && tr.Eval.Passed {
			t.Errorf("%s: passed with a planner of skill 0: %+v", id, tr.Eval)
		}
	}
}

// TestAcceptSameSeedSameTrajectory: with the same seed and configuration, two
// runs in fresh worlds produce byte-identical screenshots and model
// answers (the times and ids differ).
func TestAcceptSameSeedSameTrajectory(t *testing.T) {
	tasks, err := simtasks.All()
	if err != nil {
		t.Fatal(err)
	}
	picks := []*simtasks.Task{&tasks[0], &tasks[len(tasks)/2], &tasks[len(tasks)-1]}
	run := func(seed int64) []*traj.Trajectory {
		w := startWorld(t, 1, 3, func(wc *sim.WorldConfig) { wc.Seed = seed })
		var out []*traj.Trajectory
		for _, task := range picks {
			l, err := w.pool.Lease(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tr, _ := w.ag.Run(context.Background(), agent.Episode{Task: &task.Task, Samples: 1, VM: l.ID(), Guest: l.Guest()})
			l.End(vmpool.Healthy)
			if tr == nil {
				t.Fatalf("%s: no trajectory", task.ID)
			}
			out = append(out, tr)
		}
		return out
	}
	// fingerprint is everything that must repeat: screenshots and answers.
	fingerprint := func(trs []*traj.Trajectory) []string {
		var fp []string
		for _, tr := range trs {
			fp = append(fp, tr.Task.ID, string(tr.Outcome.Kind), tr.Outcome.Answer)
			for _, s := range tr.Steps {
				fp = append(fp, s.Screenshot.SHA256, s.Code)
				for _, c := range s.Candidates {
					fp = append(fp, c.Plan, c.ExecutorOutput)
				}
			}
			if tr.FinalScreenshot != nil {
				fp = append(fp, tr.FinalScreenshot.SHA256)
			}
		}
		return fp
	}
	a, b := fingerprint(run(11)), fingerprint(run(11))
	if len(a) != len(b) {
		t.Fatalf("runs differ in length: %d vs %d", len(a), len(b))
	}
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("same seed, different trajectories at %d: %q vs %q", i, a[i], b[i])
		}
	}
	if c := fingerprint(run(12)); len(c) == len(a) && strings.Join(c, "\x00") == strings.Join(a, "\x00") {
		t.Error("a different seed gave the very same trajectories; the seed has no effect")
	}
}

// TestPlannerIgnoringNFallsBack: a server that answers one choice whatever
// n asks still yields G+1 candidates per step, from G+1 requests.
func TestPlannerIgnoringNFallsBack(t *testing.T) {
	w := startWorld(t, 1, 3, func(wc *sim.WorldConfig) {
		perfect(wc)
		wc.Models.Planner.IgnoreN = true
	})
	tr := w.runOne(t, "ChimeraX/S01")
	if len(tr.Steps) == 0 {
		t.Fatal("no steps")
	}
	for _, s := range tr.Steps {
		if len(s.Candidates) != 4 {
			t.Fatalf("step %d: %d candidates from a server that ignores n, want G+1 = 4", s.Index, len(s.Candidates))
		}
	}
	if tr.Eval == nil || !tr.Eval.Passed {
		t.Errorf("with perfect models the task should pass: %+v", tr.Eval)
	}
}

// An action that fails on the guest (the guest ran it: /execute answers
// 500 as it does when the code raises) is the agent's step going wrong, not
// the VM: the step records the error and the episode goes on to its end.
func TestFailingActionIsAStepErrorNotAnEnvError(t *testing.T) {
	w := startWorld(t, 1, 1, func(wc *sim.WorldConfig) {
		perfect(wc)
		wc.Guest.Endpoints = map[string]fault.Faults{"/execute": {ErrorProb: 1}}
	})
	tr := w.runOne(t, "ChimeraX/S01")
	if tr.Outcome.IsEnvError() {
		t.Fatalf("outcome %+v: a failing action is not an environment error", tr.Outcome)
	}
	failed := 0
	for _, s := range tr.Steps {
		if s.Code != "" && !strings.HasPrefix(s.Code, "DONE") && !strings.HasPrefix(s.Code, "FAIL") && !strings.HasPrefix(s.Code, "WAIT") && !strings.HasPrefix(s.Code, "ANS") {
			if s.Executed != 0 || !strings.Contains(s.Error, "failed on the guest") {
				t.Errorf("step %d: executed %d, error %q: want candidate 0 run and its failure recorded", s.Index, s.Executed, s.Error)
			}
			failed++
		}
	}
	if failed == 0 {
		t.Fatalf("no step ran a GUI action: %+v", tr.Steps)
	}
	if err := tr.Validate(); err != nil {
		t.Errorf("trajectory does not validate: %v", err)
	}
}

// capture is a reverse proxy in front of a model endpoint that records
// the messages of every chat request it forwards.
type capture struct {
	mu   sync.Mutex
	reqs [][]openai.ChatCompletionMessage
}

func startCapture(t *testing.T, target string) (*capture, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			var req openai.ChatCompletionRequest
			if err := json.Unmarshal(body, &req); err != nil {
				t.Errorf("capture: %v", err)
			}
			c.mu.Lock()
			c.reqs = append(c.reqs, req.Messages)
			c.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL + u.Path
}

func (c *capture) take() [][]openai.ChatCompletionMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reqs
	c.reqs = nil
	return r
}

// normalized is the JSON of messages with every data-URI image replaced
// by "sha256:<hash of its bytes>", so images compare by hash.
func normalized(t *testing.T, msgs []openai.ChatCompletionMessage) string {
	t.Helper()
	out := make([]openai.ChatCompletionMessage, len(msgs))
	copy(out, msgs)
	for i := range out {
		parts := make([]openai.ChatMessagePart, len(out[i].MultiContent))
		copy(parts, out[i].MultiContent)
		for j, p := range parts {
			if p.ImageURL == nil {
				continue
			}
			b64, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,")
			if !ok {
				t.Fatalf("message %d part %d: image is not a PNG data URI: %.40q", i, j, p.ImageURL.URL)
			}
			png, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(png)
			parts[j].ImageURL = &openai.ChatMessageImageURL{URL: "sha256:" + hex.EncodeToString(sum[:])}
		}
		if out[i].MultiContent != nil {
			out[i].MultiContent = parts
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// startCapturedWorld starts a world of one VM whose agent asks for G+1 =
// group+1 plans from a planner of the given skill, with every planner
// request captured on the wire and the prompt set stored in the blob
// store (so trajectories can be rendered again from it).
func startCapturedWorld(t *testing.T, group int, skill float64) (*world, *capture, *blob.Store) {
	t.Helper()
	var capt *capture
	var store *blob.Store
	w := startWorldWith(t, 1, group, func(wc *sim.WorldConfig) {
		wc.Models.Planner.DefaultSkill, wc.Models.Planner.Skill = skill, nil
	}, func(c *agent.Config) {
		var u string
		capt, u = startCapture(t, c.Planner.Config().BaseURL)
		mc := c.Planner.Config()
		mc.BaseURL = u
		p, err := model.New(mc, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Planner = p
		store = c.Store.(*blob.Store)
		if err := prompt.Store(context.Background(), store, c.Prompts); err != nil {
			t.Fatal(err)
		}
	})
	return w, capt, store
}

// capturedEpisode is a simulated episode run on a captured world: its
// trajectory, what the planner endpoint received for each step and the
// prompt set the trajectory names, fetched from the blob store.
type capturedEpisode struct {
	tr      *traj.Trajectory
	sent    [][]openai.ChatCompletionMessage
	prompts *prompt.Set
}

// runCaptured runs the first n simulated tasks (nRace under the race
// detector) one after the other on a captured world (startCapturedWorld)
// and returns their episodes and the world's blob store. Each trajectory
// names its prompt set, and the planner received one request a step.
func runCaptured(t *testing.T, group int, skill float64, n, nRace int) ([]capturedEpisode, *blob.Store) {
	t.Helper()
	w, capt, store := startCapturedWorld(t, group, skill)
	tasks, err := simtasks.All()
	if err != nil {
		t.Fatal(err)
	}
	if raceEnabled {
		n = nRace
	}
	var eps []capturedEpisode
	for _, tk := range tasks[:n] {
		tr := w.runOne(t, tk.ID)
		sent := capt.take()
		if tr.Prompts == "" {
			t.Fatal("the trajectory records no prompt set")
		}
		if len(sent) != len(tr.Steps) {
			t.Fatalf("%s: the planner received %d requests for %d steps", tr.ID, len(sent), len(tr.Steps))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		prompts, err := prompt.Fetch(ctx, store, tr.Prompts)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		eps = append(eps, capturedEpisode{tr: tr, sent: sent, prompts: prompts})
	}
	return eps, store
}

// Acceptance (advantage issue, item 2): a simulated rollout records the
// hash of its prompt set, and for every step of every trajectory the
// planner's messages rendered again from the trajectory, the prompt set
// fetched by that hash and the screenshots in the blob store are
// identical to what the planner endpoint received (images by hash).
func TestRebuiltPlannerMessagesAreWhatThePlannerReceived(t *testing.T) {
	eps, store := runCaptured(t, 3, 0.6, 5, 2)
	steps := 0
	for _, ep := range eps {
		tr, sent, prompts := ep.tr, ep.sent, ep.prompts
		if err := tr.Validate(); err != nil {
			t.Fatal(err)
		}
		fromStore := func(r traj.ImageRef) (string, error) {
			png, err := store.GetBytes(context.Background(), r.SHA256)
			return model.DataURI(png), err
		}
		for i := range tr.Steps {
			got, err := prompts.PlannerMessagesAt(tr, i, fromStore)
			if err != nil {
				t.Fatal(err)
			}
			if g, s := normalized(t, got), normalized(t, sent[i]); g != s {
				t.Fatalf("%s step %d: rebuilt messages differ from what the planner received:\nrebuilt  %s\nreceived %s", tr.ID, i, g, s)
			}
			refs, err := prompts.PlannerMessagesAt(tr, i, prompt.RefURL)
			if err != nil {
				t.Fatal(err)
			}
			if len(refs) != 2 {
				t.Errorf("%s step %d: %d messages, want system + user (the history is in the user text)", tr.ID, i, len(refs))
			}
			steps++
		}
	}
	if steps < 2*len(eps) {
		t.Fatalf("only %d steps over %d trajectories: the test needs multi-step trajectories", steps, len(eps))
	}
	t.Logf("%d steps of %d trajectories rebuilt identically", steps, len(eps))
}

// Settings of BenchmarkStepLatency (docs/performance.md explains them).
const (
	benchPlannerLatency  = 400 * time.Millisecond // simulated, per request (n plans in one request)
	benchExecutorLatency = 300 * time.Millisecond // simulated, per request
	// benchStepScale is wall time per simulated second. Real time: at 0.3
	// (steps of ~300 ms) the CPU work of the 8 extra executor requests —
	// each carries the ~250 KB screenshot as a data URI that go-openai
	// encodes and the simulator decodes, on the same 2 shared cores — is
	// a third of a step, and the figure measures the CPU.
	benchStepScale   = 1.0
	benchGroup       = 8 // G: 9 plans, 9 concurrent executor calls
	benchTasksPerApp = 1 // tasks with a 10-step limit, per simulated app
)

// BenchmarkStepLatency compares the mean wall time of one agent step with
// G=8 (one planner request for 9 plans, then 9 concurrent executor
// requests) against G=0 (one plan, one executor request), with the
// simulated model endpoints at a fixed latency and no faults. The real
// agent runs against a real simulated world (guest servers, model
// endpoints on loopback) and a real blob store; episodes run one at a
// time, alternating G=0 and G=8 task by task, so both see the same load.
//
// Figures: agent.step_latency_ratio_g8 (G=8 over G=0; target ≤ 1.3),
// agent.step_latency_ms_g0 and _g8 (mean wall ms per step) and their
// difference agent.step_overhead_ms_g8, the mean planner and grounding
// phases of a step (agent.plan_ms_*, agent.ground_ms_*; the 9 executor
// calls run in the latter), agent.model_latency_ms (the simulated model
// latency of a step, planner + executor), the mean screenshot size and
// the number of steps measured.
func BenchmarkStepLatency(b *testing.B) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))

	clock := fault.Clock{Scale: benchStepScale}
	wc := sim.DefaultWorldConfig()
	wc.VMs, wc.Seed, wc.Clock = 2, 11, clock
	wc.Models.Planner.Faults = fault.Faults{Latency: fault.Fixed(benchPlannerLatency)}
	wc.Models.Executor.Faults = fault.Faults{Latency: fault.Fixed(benchExecutorLatency)}
	w, err := sim.StartWorld(ctx, wc)
	if err != nil {
		b.Fatal(err)
	}
	defer w.Models.Wait()
	defer cancel()

	backend, err := simvm.New(simvm.URLs(w.GuestURLs...))
	if err != nil {
		b.Fatal(err)
	}
	pool, err := vmpool.NewPool(ctx, vmpool.Config{ID: "bench-agent", IdleCheck: -1, LockDir: b.TempDir()}, backend, vmpool.WithLogger(quiet))
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close(context.Background())
	store, err := blob.Open(ctx, b.TempDir(), blob.Config{Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	model := func(url, name string) *model.Client {
		m, err := model.New(model.Config{BaseURL: url, Model: name, Attempts: 1}, quiet)
		if err != nil {
			b.Fatal(err)
		}
		return m
	}
	planner := model(w.Models.PlannerURL, simmodels.DefaultPlannerModel)
	executor := model(w.Models.ExecutorURL, simmodels.DefaultExecutorModel)
	prompts, err := prompt.Load("")
	if err != nil {
		b.Fatal(err)
	}
	newAgent := func(group int) *agent.Agent {
		seed := int64(5)
		// Sleep (setup waits, the wait() action's pause) is near zero:
		// the figure is about the model calls of a step.
		ag, err := agent.New(agent.Config{Planner: planner, Executor: executor, Prompts: prompts, Store: store,
			Group: group, Run: "bench", RequestSeed: &seed, Sleep: fault.Clock{Scale: 1e-3}.Sleep, Log: quiet})
		if err != nil {
			b.Fatal(err)
		}
		return ag
	}
	agents := map[int]*agent.Agent{0: newAgent(0), benchGroup: newAgent(benchGroup)}
	tasks := benchStepTasks(b)

	type acc struct {
		steps             int
		shotBytes         int64
		wall, plan, grnd  time.Duration
		episodes, envErrs int
	}
	stats := map[int]*acc{0: {}, benchGroup: {}}
	run := func(group int, task *scienceboard.Task) {
		l, err := pool.Lease(ctx)
		if err != nil {
			b.Fatal(err)
		}
		tr, err := agents[group].Run(ctx, agent.Episode{Task: task, Samples: 1, VM: l.ID(), Guest: l.Guest()})
		_ = l.End(vmpool.Healthy)
		if tr == nil {
			b.Fatalf("%s: no trajectory: %v", task.ID, err)
		}
		a := stats[group]
		a.episodes++
		if tr.Outcome.Kind == traj.OutcomeEnvError {
			a.envErrs++
			b.Logf("G=%d %s: environment error: %s", group, task.ID, tr.Outcome.Reason)
		}
		if len(tr.Steps) == 0 {
			return
		}
		// Steps run back to back: the first step's start to the end of
		// the episode (before the evaluator) is the steps' wall time.
		a.wall += tr.EndedAt.Sub(tr.Steps[0].StartedAt)
		a.steps += len(tr.Steps)
		for _, s := range tr.Steps {
			a.plan += time.Duration(s.Timings.PlanMS) * time.Millisecond
			a.grnd += time.Duration(s.Timings.GroundMS) * time.Millisecond
			a.shotBytes += s.Screenshot.Size
		}
	}

	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		for j, task := range tasks {
			order := []int{0, benchGroup}
			if (i+j)%2 == 1 {
				order = []int{benchGroup, 0}
			}
			for _, g := range order {
				run(g, task)
			}
		}
	}
	b.StopTimer()

	ms := func(d time.Duration, n int) float64 {
		return float64(d) / float64(time.Millisecond) / float64(max(n, 1))
	}
	g0, g8 := stats[0], stats[benchGroup]
	if g0.steps == 0 || g8.steps == 0 {
		b.Fatalf("no steps ran (G=0: %d, G=8: %d)", g0.steps, g8.steps)
	}
	l0, l8 := ms(g0.wall, g0.steps), ms(g8.wall, g8.steps)
	b.ReportMetric(l8/l0, "agent.step_latency_ratio_g8")
	b.ReportMetric(l8-l0, "agent.step_overhead_ms_g8")
	b.ReportMetric(l0, "agent.step_latency_ms_g0")
	b.ReportMetric(l8, "agent.step_latency_ms_g8")
	b.ReportMetric(ms(g0.plan, g0.steps), "agent.plan_ms_g0")
	b.ReportMetric(ms(g8.plan, g8.steps), "agent.plan_ms_g8")
	b.ReportMetric(ms(g0.grnd, g0.steps), "agent.ground_ms_g0")
	b.ReportMetric(ms(g8.grnd, g8.steps), "agent.ground_ms_g8")
	b.ReportMetric(float64(g0.steps+g8.steps)/float64(b.N), "agent.steps_per_run")
	b.ReportMetric(float64(g0.shotBytes+g8.shotBytes)/1024/float64(g0.steps+g8.steps), "agent.screenshot_kb")
	b.ReportMetric(float64(g0.envErrs+g8.envErrs), "agent.env_errors")
	// The simulated latency of a step's model calls, in wall time: what
	// the steps would take with no CPU work at all.
	b.ReportMetric(float64(clock.Real(benchPlannerLatency+benchExecutorLatency))/float64(time.Millisecond), "agent.model_latency_ms")
}

// benchStepTasks picks benchTasksPerApp simulated tasks with a step limit
// of 10 or more from each app, in a fixed order.
func benchStepTasks(b *testing.B) []*scienceboard.Task {
	all, err := simtasks.All()
	if err != nil {
		b.Fatal(err)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].ID < all[j].ID })
	per := map[string]int{}
	var out []*scienceboard.Task
	for i := range all {
		t := &all[i].Task
		if t.Steps >= 10 && per[t.App] < benchTasksPerApp {
			per[t.App]++
			out = append(out, t)
		}
	}
	if len(out) == 0 {
		b.Fatal("no simulated task with a step limit of 10 or more")
	}
	return out
}
