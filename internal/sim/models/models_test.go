package models

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"image"
	"image/png"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/apps/chimerax"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simguest "github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	openai "github.com/sashabaranov/go-openai"
)

// ---- helpers ---------------------------------------------------------------

// testModels starts the endpoints of cfg on loopback for the duration of
// the test and returns go-openai clients for them.
type testModels struct {
	m                        *Endpoints
	srv                      *Servers
	planner, executor, judge *openai.Client
	plannerRec, executorRec  *recorder
	judgeRec                 *recorder
}

// recorder is an http.RoundTripper that keeps every response body.
type recorder struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recorder) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	r.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func newClient(baseURL string, rec *recorder) *openai.Client {
	cfg := openai.DefaultConfig("sim-key")
	cfg.BaseURL = baseURL
	cfg.HTTPClient = &http.Client{Transport: rec}
	return openai.NewClientWithConfig(cfg)
}

func startModels(t testing.TB, cfg Config) *testModels {
	t.Helper()
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return startWith(t, m)
}

func startWith(t testing.TB, m *Endpoints) *testModels {
	t.Helper()
	srv := servertest.Serve(t, "the model servers", m.Start)
	tm := &testModels{m: m, srv: srv, plannerRec: &recorder{}, executorRec: &recorder{}, judgeRec: &recorder{}}
	tm.planner = newClient(srv.PlannerURL, tm.plannerRec)
	tm.executor = newClient(srv.ExecutorURL, tm.executorRec)
	tm.judge = newClient(srv.JudgeURL, tm.judgeRec)
	return tm
}

// sampleAnswers returns the answers of client to req with MaxChoices
// choices for each of the seeds 0-7, in order.
func sampleAnswers(t *testing.T, client *openai.Client, req openai.ChatCompletionRequest) []string {
	t.Helper()
	req.N = MaxChoices
	var out []string
	for seed := 0; seed < 8; seed++ {
		s := seed
		req.Seed = &s
		resp, err := client.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Choices {
			out = append(out, c.Message.Content)
		}
	}
	return out
}

// fastConfig is the default configuration without latency and without
// the planner's generation config: go-openai cannot send top_k, so with
// the default (Qwen2.5-VL's top_k 1) every planner request of these
// tests would be greedy. TestModelsGenerationConfig covers the defaults.
func fastConfig() Config {
	cfg := DefaultConfig()
	cfg.Clock = fault.Clock{Scale: 0}
	cfg.Planner.Generation = nil
	return cfg
}

// pngWithState encodes a w×h PNG with some texture and, when st is not
// nil, the simulator's state chunk.
func pngWithState(t testing.TB, w, h int, st *desktop.State) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for y := 0; y < h; y++ {
		row := img.Pix[y*img.Stride:]
		for x := 0; x < w; x++ {
			copy(row[4*x:], []byte{uint8(x * 7), uint8(y * 3), uint8(x ^ y), 255})
		}
	}
	var buf bytes.Buffer
	if err := png.Encode(&buf, img); err != nil {
		t.Fatal(err)
	}
	b := buf.Bytes()
	if st == nil {
		return b
	}
	js, err := json.Marshal(st)
	if err != nil {
		t.Fatal(err)
	}
	data := append(append([]byte(desktop.StateChunkKeyword), 0), js...)
	var chunk bytes.Buffer
	binary.Write(&chunk, binary.BigEndian, uint32(len(data)))
	chunk.WriteString("tEXt")
	chunk.Write(data)
	binary.Write(&chunk, binary.BigEndian, crc32.ChecksumIEEE(append([]byte("tEXt"), data...)))
	iend := len(b) - 12 // the IEND chunk closes every PNG
	out := append(append(append([]byte{}, b[:iend]...), chunk.Bytes()...), b[iend:]...)
	return out
}

func dataURI(png []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
}

func textMsg(role, text string) openai.ChatCompletionMessage {
	return openai.ChatCompletionMessage{Role: role, Content: text}
}

func imageMsg(text string, pngs ...[]byte) openai.ChatCompletionMessage {
	parts := []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: text}}
	for _, p := range pngs {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: dataURI(p)}})
	}
	return openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: parts}
}

// plannerRequest is a planner request in CODA's layout: a system prompt,
// the previous plans as assistant turns, and the instruction with the
// current screenshot.
func plannerRequest(instruction string, history []string, shot []byte) openai.ChatCompletionRequest {
	msgs := []openai.ChatCompletionMessage{textMsg(openai.ChatMessageRoleSystem, "You are a GUI agent. Answer with Thought: ... and Action: ...")}
	for _, h := range history {
		msgs = append(msgs, textMsg(openai.ChatMessageRoleAssistant, h))
	}
	msgs = append(msgs, imageMsg("Task instruction: "+instruction+"\nWhat is the next step?", shot))
	return openai.ChatCompletionRequest{Model: DefaultPlannerModel, Messages: msgs, Temperature: 1, TopP: 0.9, MaxTokens: 1500}
}

func executorRequest(thought string) openai.ChatCompletionRequest {
	return openai.ChatCompletionRequest{Model: DefaultExecutorModel, Messages: []openai.ChatCompletionMessage{
		textMsg(openai.ChatMessageRoleSystem, "You are a GUI grounding model."),
		textMsg(openai.ChatMessageRoleUser, "Ground this step.\nThought: "+thought),
	}, Temperature: 1}
}

var resultRE = regexp.MustCompile("(?s)Result:\\s*```json\\s*\\n(.*?)\\n```")

// parseJudge is a strict reader of the judge's answer: a "Result:" line
// followed by a ```json block holding exactly the six keys with the
// right types.
func parseJudge(text string) (JudgeResult, error) {
	var res JudgeResult
	mm := resultRE.FindStringSubmatch(text)
	if mm == nil {
		return res, errors.New("no result block")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal([]byte(mm[1]), &raw); err != nil {
		return res, err
	}
	keys := []string{"Correctness", "Redundant", "Optimized", "First_Error_Step", "Error_Type", "Correct_Action"}
	if len(raw) != len(keys) {
		return res, fmt.Errorf("%d keys, want %d", len(raw), len(keys))
	}
	for _, k := range keys {
		if _, ok := raw[k]; !ok {
			return res, fmt.Errorf("missing key %s", k)
		}
	}
	dec := json.NewDecoder(strings.NewReader(mm[1]))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&res); err != nil {
		return res, err
	}
	return res, nil
}

func mustTask(t testing.TB, m *Endpoints, pred func(*tasks.Task) bool) *tasks.Task {
	t.Helper()
	for _, task := range m.world.tasks() {
		if len(taskOracle(task)) > 0 && pred(task) {
			return task
		}
	}
	t.Fatal("no simulated task fits this test")
	return nil
}

func anyTask(*tasks.Task) bool { return true }

func isQuestion(t *tasks.Task) bool { _, ok := oracleAnswer(t); return ok }

// ---- 1. n, images, greedy ---------------------------------------------------

func TestModelsChoicesImagesGreedy(t *testing.T) {
	tm := startModels(t, fastConfig())
	task := mustTask(t, tm.m, anyTask)
	shot := pngWithState(t, desktop.ScreenW, desktop.ScreenH, &desktop.State{App: taskApp(task)})
	ctx := context.Background()

	req := plannerRequest(taskInstruction(task), nil, shot)
	req.N = 8
	resp, err := tm.planner.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(resp.Choices) != 8 {
		t.Fatalf("got %d choices, want 8", len(resp.Choices))
	}
	distinct := map[string]bool{}
	for i, c := range resp.Choices {
		if c.Index != i || c.Message.Role != "assistant" || c.FinishReason != openai.FinishReasonStop {
			t.Errorf("choice %d: index %d role %q finish %q", i, c.Index, c.Message.Role, c.FinishReason)
		}
		distinct[c.Message.Content] = true
	}
	if len(distinct) < 2 {
		t.Errorf("8 samples at temperature 1 with skill 0.6 are all the same: %q", resp.Choices[0].Message.Content)
	}
	if resp.Object != "chat.completion" || resp.Model != DefaultPlannerModel || !strings.HasPrefix(resp.ID, "chatcmpl-") {
		t.Errorf("response header: object %q model %q id %q", resp.Object, resp.Model, resp.ID)
	}
	if want := imageTokens(desktop.ScreenW, desktop.ScreenH); resp.Usage.PromptTokens <= want || resp.Usage.CompletionTokens <= 0 ||
		resp.Usage.TotalTokens != resp.Usage.PromptTokens+resp.Usage.CompletionTokens {
		t.Errorf("usage %+v (one image is %d tokens)", resp.Usage, want)
	}

	// Greedy: a tiny positive temperature (go-openai drops 0) gives n
	// identical choices, and the same answer on every call.
	req.Temperature = 1e-6
	var first string
	for call := 0; call < 3; call++ {
		resp, err := tm.planner.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		for _, c := range resp.Choices {
			if first == "" {
				first = c.Message.Content
			}
			if c.Message.Content != first {
				t.Fatalf("greedy choices differ: %q vs %q", c.Message.Content, first)
			}
		}
	}
	// Skill 0.6 > 0.5: greedy decoding always plans the oracle step.
	if want := PlanText(taskOracle(task)[0]); first != want {
		t.Errorf("greedy plan %q, want the oracle step %q", first, want)
	}

	// The executor accepts images too and answers one UI-TARS action.
	ereq := executorRequest(taskOracle(task)[0].Thought)
	ereq.Messages = append(ereq.Messages, imageMsg("Current screen:", shot))
	ereq.N = 3
	eresp, err := tm.executor.CreateChatCompletion(ctx, ereq)
	if err != nil {
		t.Fatal(err)
	}
	if len(eresp.Choices) != 3 {
		t.Fatalf("executor: %d choices, want 3", len(eresp.Choices))
	}
	for _, c := range eresp.Choices {
		if _, err := uitars.Parse(c.Message.Content, tm.m.execSpace.opt); err != nil {
			t.Errorf("executor answer %q does not parse: %v", c.Message.Content, err)
		}
	}

	// GET /v1/models names each endpoint's model.
	for name, cl := range map[string]*openai.Client{DefaultPlannerModel: tm.planner, DefaultExecutorModel: tm.executor, DefaultJudgeModel: tm.judge} {
		list, err := cl.ListModels(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want := 1
		if name == DefaultJudgeModel { // and the calibrated second model
			want = 2
		}
		if len(list.Models) != want || list.Models[0].ID != name || (want == 2 && list.Models[1].ID != DefaultSecondJudgeModel) {
			t.Errorf("models of %s: %+v", name, list.Models)
		}
	}
}

func TestModelsMaxTokensStopLogprobs(t *testing.T) {
	tm := startModels(t, fastConfig())
	task := mustTask(t, tm.m, anyTask)
	ctx := context.Background()
	req := plannerRequest(taskInstruction(task), nil, pngWithState(t, 64, 40, nil))
	req.MaxTokens = 3
	req.LogProbs = true
	req.TopLogProbs = 2
	resp, err := tm.planner.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	c := resp.Choices[0]
	if c.FinishReason != openai.FinishReasonLength || resp.Usage.CompletionTokens != 3 || len(c.Message.Content) > 12 {
		t.Errorf("max_tokens 3: finish %q, %d tokens, content %q", c.FinishReason, resp.Usage.CompletionTokens, c.Message.Content)
	}
	if c.LogProbs == nil || len(c.LogProbs.Content) != 3 {
		t.Fatalf("logprobs: %+v", c.LogProbs)
	}
	var joined string
	for _, lp := range c.LogProbs.Content {
		joined += lp.Token
		if lp.LogProb > 0 || len(lp.TopLogProbs) != 2 || lp.TopLogProbs[0].Token != lp.Token || string(lp.Bytes) != lp.Token {
			t.Errorf("token logprob %+v", lp)
		}
	}
	if joined != c.Message.Content {
		t.Errorf("tokens %q do not spell the content %q", joined, c.Message.Content)
	}

	req = plannerRequest(taskInstruction(task), nil, pngWithState(t, 64, 40, nil))
	req.Stop = []string{"\nAction:"}
	req.Temperature = 1e-6
	resp, err = tm.planner.CreateChatCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; strings.Contains(got, "Action:") || !strings.HasPrefix(got, "Thought:") || resp.Choices[0].FinishReason != openai.FinishReasonStop {
		t.Errorf("stop at \\nAction: gave %q (%s)", got, resp.Choices[0].FinishReason)
	}
}

// ---- 2. malformed rate ------------------------------------------------------

// countMalformed makes calls requests (seeds 0..calls-1) and counts the
// answers check rejects.
func countMalformed(t *testing.T, cl *openai.Client, calls int, mk func(i int) openai.ChatCompletionRequest, check func(string) error) (bad int, sample string) {
	t.Helper()
	var mu sync.Mutex
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	var firstErr error
	for i := 0; i < calls; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func(i int) {
			defer wg.Done()
			defer func() { <-sem }()
			req := mk(i)
			seed := i
			req.Seed = &seed
			resp, err := cl.CreateChatCompletion(context.Background(), req)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if firstErr == nil {
					firstErr = err
				}
				return
			}
			if content := resp.Choices[0].Message.Content; check(content) != nil {
				bad++
				if sample == "" || i%97 == 0 {
					sample = content
				}
			}
		}(i)
	}
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
	return bad, sample
}

func parsesAsAction(s string) error {
	_, err := uitars.Parse(s, uitars.DefaultOptions())
	return err
}

func judgeParses(s string) error {
	_, err := parseJudge(s)
	return err
}

func TestAcceptModelsMalformedRate(t *testing.T) {
	const calls = 1000
	for _, rate := range []float64{0.2, 0} {
		cfg := fastConfig()
		cfg.Planner.Faults.MalformedProb = rate
		cfg.Executor.Faults.MalformedProb = rate
		cfg.Judge.Faults.MalformedProb = rate
		tm := startModels(t, cfg)
		task := mustTask(t, tm.m, anyTask)
		oracle := taskOracle(task)
		shot := pngWithState(t, 320, 200, &desktop.State{App: taskApp(task)})
		lo, hi := int((rate-0.03)*calls+0.5), int((rate+0.03)*calls+0.5)
		if rate == 0 {
			lo, hi = 0, 0
		}
		cases := []struct {
			name  string
			cl    *openai.Client
			mk    func(i int) openai.ChatCompletionRequest
			check func(string) error
		}{
			{"planner", tm.planner, func(i int) openai.ChatCompletionRequest {
				var hist []string
				for _, o := range oracle[:i%len(oracle)] {
					hist = append(hist, PlanText(o))
				}
				return plannerRequest(taskInstruction(task), hist, shot)
			}, parsesAsAction},
			{"executor", tm.executor, func(i int) openai.ChatCompletionRequest {
				return executorRequest(oracle[i%len(oracle)].Thought)
			}, func(s string) error { _, err := tm.m.execSpace.parse(s); return err }},
			{"judge", tm.judge, func(i int) openai.ChatCompletionRequest {
				return openai.ChatCompletionRequest{Model: DefaultJudgeModel, Temperature: 1, TopP: 0.6, Messages: []openai.ChatCompletionMessage{
					textMsg(openai.ChatMessageRoleSystem, "You judge GUI agent trajectories."),
					imageMsg("Instruction: "+taskInstruction(task)+"\nScreenshots follow.", shot, shot),
				}}
			}, judgeParses},
		}
		for _, c := range cases {
			bad, sample := countMalformed(t, c.cl, calls, c.mk, c.check)
			t.Logf("rate %.2f: %s: %d/%d malformed (e.g. %q)", rate, c.name, bad, calls, sample)
			if bad < lo || bad > hi {
				t.Errorf("rate %.2f: %s: %d/%d malformed answers, want %d..%d", rate, c.name, bad, calls, lo, hi)
			}
		}
	}
}

// ---- 3. determinism -----------------------------------------------------------

// requestSequence runs a fixed mix of requests against tm and returns the
// raw response bodies of each endpoint, in order.
func requestSequence(t *testing.T, tm *testModels, concurrent bool) map[string][]byte {
	t.Helper()
	task := mustTask(t, tm.m, anyTask)
	oracle := taskOracle(task)
	shot := pngWithState(t, 320, 200, &desktop.State{App: taskApp(task), AppState: map[string]any{"done": true}})
	type job struct {
		name string
		cl   *openai.Client
		req  openai.ChatCompletionRequest
	}
	var jobs []job
	for i := 0; i < 12; i++ {
		// Distinct contents: identical unseeded requests are interchangeable
		// samples, which concurrent clients may receive in any order.
		pr := plannerRequest(taskInstruction(task), []string{PlanText(oracle[0])}[:i%2], shot)
		pr.Messages[0].Content += fmt.Sprintf(" (request %d)", i)
		pr.N = 1 + i%3
		pr.LogProbs = i%4 == 0
		if i%2 == 0 {
			seed := 1000 + i
			pr.Seed = &seed
		}
		jobs = append(jobs, job{fmt.Sprintf("planner/%d", i), tm.planner, pr})
		er := executorRequest(oracle[i%len(oracle)].Thought)
		er.Messages[0].Content += fmt.Sprintf(" (request %d)", i)
		er.N = 1 + i%2
		jobs = append(jobs, job{fmt.Sprintf("executor/%d", i), tm.executor, er})
		jr := openai.ChatCompletionRequest{Model: DefaultJudgeModel, Temperature: 1, TopP: 0.6, N: 4, Messages: []openai.ChatCompletionMessage{
			imageMsg(fmt.Sprintf("Instruction: %s\nTrajectory %d:", taskInstruction(task), i), shot, shot),
		}}
		jobs = append(jobs, job{fmt.Sprintf("judge/%d", i), tm.judge, jr})
	}
	out := map[string][]byte{}
	var mu sync.Mutex
	run := func(j job) {
		rec := &recorder{}
		// A recording client per job, so that the body is attributed to it.
		cl := tm.planner
		switch {
		case strings.HasPrefix(j.name, "planner"):
			cl = newClient(tm.srv.PlannerURL, rec)
		case strings.HasPrefix(j.name, "executor"):
			cl = newClient(tm.srv.ExecutorURL, rec)
		default:
			cl = newClient(tm.srv.JudgeURL, rec)
		}
		if _, err := cl.CreateChatCompletion(context.Background(), j.req); err != nil {
			t.Error(j.name, err)
			return
		}
		mu.Lock()
		out[j.name] = rec.bodies[0]
		mu.Unlock()
	}
	if !concurrent {
		for _, j := range jobs {
			run(j)
		}
		return out
	}
	var wg sync.WaitGroup
	for i := len(jobs) - 1; i >= 0; i-- { // reverse order, all at once
		wg.Add(1)
		go func(j job) { defer wg.Done(); run(j) }(jobs[i])
	}
	wg.Wait()
	return out
}

func TestModelsDeterministic(t *testing.T) {
	cfg := fastConfig()
	cfg.Seed = 42
	a := requestSequence(t, startModels(t, cfg), false)
	b := requestSequence(t, startModels(t, cfg), false)
	c := requestSequence(t, startModels(t, cfg), true)
	if len(a) == 0 {
		t.Fatal("no responses")
	}
	for name, body := range a {
		if !bytes.Equal(body, b[name]) {
			t.Errorf("%s: responses differ between two runs with the same seed:\n%s\n%s", name, body, b[name])
		}
		if !bytes.Equal(body, c[name]) {
			t.Errorf("%s: a concurrent run in another order differs:\n%s\n%s", name, body, c[name])
		}
	}
	cfg.Seed = 43
	d := requestSequence(t, startModels(t, cfg), false)
	same := 0
	for name, body := range a {
		if bytes.Equal(body, d[name]) {
			same++
		}
	}
	if same == len(a) {
		t.Error("another seed gives the same responses")
	}
}

// A repeated unseeded request is a new sample; a repeated seeded one is
// the same answer.
func TestModelsSeedSemantics(t *testing.T) {
	tm := startModels(t, fastConfig())
	task := mustTask(t, tm.m, anyTask)
	req := plannerRequest(taskInstruction(task), nil, pngWithState(t, 32, 20, nil))
	req.N = 4
	answers := func() string {
		resp, err := tm.planner.CreateChatCompletion(context.Background(), req)
		if err != nil {
			t.Fatal(err)
		}
		var s []string
		for _, c := range resp.Choices {
			s = append(s, c.Message.Content)
		}
		return strings.Join(s, "|")
	}
	distinct := map[string]bool{}
	for i := 0; i < 5; i++ {
		distinct[answers()] = true
	}
	if len(distinct) < 2 {
		t.Error("unseeded repeated requests gave the same samples 5 times")
	}
	seed := 7
	req.Seed = &seed
	first := answers()
	for i := 0; i < 3; i++ {
		if got := answers(); got != first {
			t.Errorf("seeded request answered %q then %q", first, got)
		}
	}
}

// ---- 4. errors ----------------------------------------------------------------

func TestModelsInjectedErrors(t *testing.T) {
	cfg := fastConfig()
	cfg.Planner.Faults.ErrorProb = 0.3
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, anyTask)
	const calls = 500
	errs := 0
	for i := 0; i < calls; i++ {
		req := plannerRequest(fmt.Sprintf("%s (%d)", taskInstruction(task), i), nil, pngWithState(t, 8, 8, nil))
		_, err := tm.planner.CreateChatCompletion(context.Background(), req)
		if err == nil {
			continue
		}
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusInternalServerError || apiErr.Type != "server_error" {
			t.Fatalf("call %d: error %T %v, want an *openai.APIError with status 500", i, err, err)
		}
		errs++
	}
	if errs < 120 || errs > 180 {
		t.Errorf("%d/%d calls failed, want about 30%%", errs, calls)
	}
}

func TestModelsRetrySucceeds(t *testing.T) {
	// A seeded call that failed may succeed when retried, and then gives
	// the seeded answer.
	cfg := fastConfig()
	cfg.Executor.Faults.ErrorProb = 0.5
	tm := startModels(t, cfg)
	req := executorRequest("Wait")
	seed := 3
	req.Seed = &seed
	ok, failed := 0, 0
	var answer string
	for i := 0; i < 40; i++ {
		resp, err := tm.executor.CreateChatCompletion(context.Background(), req)
		if err != nil {
			failed++
			continue
		}
		ok++
		if answer == "" {
			answer = resp.Choices[0].Message.Content
		} else if resp.Choices[0].Message.Content != answer {
			t.Errorf("seeded answer changed: %q vs %q", resp.Choices[0].Message.Content, answer)
		}
	}
	if ok == 0 || failed == 0 {
		t.Errorf("40 retries: %d ok, %d failed; want both", ok, failed)
	}
}

func TestModelsHang(t *testing.T) {
	cfg := fastConfig()
	cfg.Judge.Faults.HangProb = 1
	tm := startModels(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := tm.judge.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{textMsg("user", "hello")}})
	if el := time.Since(start); err == nil || !errors.Is(err, context.DeadlineExceeded) || el < 300*time.Millisecond || el > 5*time.Second {
		t.Fatalf("hung call returned after %v with %v, want the client's deadline (300ms)", el, err)
	}

	// HangFor bounds a hang in simulated time.
	cfg = fastConfig()
	cfg.Clock = fault.Clock{Scale: 0.001}
	cfg.Judge.Faults.HangProb = 1
	cfg.Judge.Faults.HangFor = 100 * time.Second // 100 ms of wall time
	tm = startModels(t, cfg)
	start = time.Now()
	_, err = tm.judge.CreateChatCompletion(context.Background(), openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{textMsg("user", "hello")}})
	if el := time.Since(start); err != nil || el < 100*time.Millisecond || el > 5*time.Second {
		t.Fatalf("HangFor 100s at scale 0.001: %v after %v", err, el)
	}
}

func TestModelsLatency(t *testing.T) {
	cfg := fastConfig()
	cfg.Clock = fault.Clock{Scale: 0.01}
	cfg.Executor.Faults.Latency = fault.Fixed(5 * time.Second) // 50 ms of wall time
	tm := startModels(t, cfg)
	start := time.Now()
	if _, err := tm.executor.CreateChatCompletion(context.Background(), executorRequest("Wait")); err != nil {
		t.Fatal(err)
	}
	if el := time.Since(start); el < 50*time.Millisecond || el > 5*time.Second {
		t.Errorf("latency 5s at scale 0.01 took %v", el)
	}
}

func TestModelsBadRequests(t *testing.T) {
	tm := startModels(t, fastConfig())
	ctx := context.Background()
	msgs := []openai.ChatCompletionMessage{textMsg("user", "hi")}
	cases := []struct {
		name   string
		req    openai.ChatCompletionRequest
		status int
		param  string
	}{
		{"no messages", openai.ChatCompletionRequest{}, 400, "messages"},
		{"n < 1", openai.ChatCompletionRequest{Messages: msgs, N: -1}, 400, "n"},
		{"n too large", openai.ChatCompletionRequest{Messages: msgs, N: MaxChoices + 1}, 400, "n"},
		{"temperature", openai.ChatCompletionRequest{Messages: msgs, Temperature: 3}, 400, "temperature"},
		{"top_p", openai.ChatCompletionRequest{Messages: msgs, TopP: 1.5}, 400, "top_p"},
		{"max_tokens", openai.ChatCompletionRequest{Messages: msgs, MaxTokens: -5}, 400, "max_tokens"},
		{"top_logprobs without logprobs", openai.ChatCompletionRequest{Messages: msgs, TopLogProbs: 2}, 400, "top_logprobs"},
		{"role", openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{textMsg("robot", "hi")}}, 400, "messages[0].role"},
		{"image url", openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{{Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "https://example.com/a.png"}}}}}}, 400, "messages[0].content[0].image_url.url"},
		{"bad image", openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{{Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "x"},
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "data:image/png;base64,aGVsbG8="}}}}}}, 400, "messages[0].content[1].image_url.url"},
		{"unknown model", openai.ChatCompletionRequest{Model: "gpt-4o", Messages: msgs}, 404, "model"},
	}
	for _, c := range cases {
		_, err := tm.planner.CreateChatCompletion(ctx, c.req)
		var apiErr *openai.APIError
		if !errors.As(err, &apiErr) {
			t.Errorf("%s: error %T %v, want *openai.APIError", c.name, err, err)
			continue
		}
		if apiErr.HTTPStatusCode != c.status || apiErr.Param == nil || *apiErr.Param != c.param || !strings.Contains(apiErr.Message, c.param) {
			t.Errorf("%s: status %d param %v message %q; want %d naming %q", c.name, apiErr.HTTPStatusCode, apiErr.Param, apiErr.Message, c.status, c.param)
		}
	}

	// Raw requests: invalid JSON, a wrong type, streaming, wrong method and path.
	raw := []struct {
		method, path, body string
		status             int
		want               string
	}{
		{"POST", "/v1/chat/completions", `{"messages": [`, 400, "not valid JSON"},
		{"POST", "/v1/chat/completions", `{"messages": [{"role":"user","content":"x"}], "n": "two"}`, 400, "n"},
		{"POST", "/v1/chat/completions", `{"messages": [{"role":"user","content":"x"}], "stream": true}`, 400, "stream"},
		{"POST", "/v1/chat/completions", `{"messages": [{"role":"user","content":[{"type":"audio"}]}]}`, 400, "messages[0].content[0].type"},
		{"POST", "/v1/chat/completions", `{"messages": [{"role":"user","content":"x"}], "stop": 5}`, 400, "stop"},
		{"GET", "/v1/chat/completions", ``, 405, "POST"},
		{"GET", "/v2/nothing", ``, 404, "no route"},
	}
	for _, c := range raw {
		req, _ := http.NewRequest(c.method, strings.TrimSuffix(tm.srv.PlannerURL, "/v1")+c.path, strings.NewReader(c.body))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var we wireError
		if resp.StatusCode != c.status || json.Unmarshal(body, &we) != nil || !strings.Contains(we.Error.Message, c.want) || we.Error.Type == "" || we.Error.Code == "" {
			t.Errorf("%s %s %s: %d %s; want %d mentioning %q", c.method, c.path, c.body, resp.StatusCode, body, c.status, c.want)
		}
	}
	// An unknown field is ignored; content may be null for an assistant turn.
	req, _ := http.NewRequest("POST", tm.srv.ExecutorURL+"/chat/completions",
		strings.NewReader(`{"model":"sim-executor","messages":[{"role":"assistant","content":null},{"role":"user","content":"Thought: Wait"}],"frobnicate":{"a":1},"seed":5}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"content":"Action: wait()"`) {
		t.Errorf("lenient request: %d %s", resp.StatusCode, body)
	}
	// A data URI with JSON escapes ("\/") is read like any other.
	uri := strings.ReplaceAll(dataURI(pngWithState(t, 30, 20, nil)), "/", `\/`)
	req, _ = http.NewRequest("POST", tm.srv.ExecutorURL+"/chat/completions",
		strings.NewReader(`{"messages":[{"role":"user","content":[{"type":"text","text":"Thought: Wait"},{"type":"image_url","image_url":{"url":"`+uri+`"}}]}]}`))
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if want := imageTokens(30, 20); resp.StatusCode != 200 || !strings.Contains(string(body), fmt.Sprintf(`"prompt_tokens":%d`, 2+4+4+want)) {
		t.Errorf("escaped data URI: %d %s (want %d prompt tokens)", resp.StatusCode, body, 2+4+4+want)
	}
}

// ---- 5. planner skill -----------------------------------------------------------

func planOnce(t *testing.T, cl *openai.Client, instruction string, history []string, seed int) string {
	t.Helper()
	req := plannerRequest(instruction, history, pngWithState(t, 16, 10, nil))
	req.Seed = &seed
	resp, err := cl.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	return resp.Choices[0].Message.Content
}

func TestAcceptModelsPlannerSkill(t *testing.T) {
	for _, skill := range []float64{1, 0} {
		cfg := fastConfig()
		cfg.Planner.DefaultSkill = skill
		tm := startModels(t, cfg)
		tasks := tm.m.world.tasks()
		if len(tasks) == 0 {
			t.Fatal("no simulated tasks (the embedded tasks did not load)")
		}
		checked := 0
		for ti, task := range tasks {
			oracle := taskOracle(task)
			if len(oracle) == 0 {
				continue
			}
			for k := 0; k <= len(oracle); k++ {
				var hist []string
				for _, o := range oracle[:k] {
					hist = append(hist, PlanText(o))
				}
				want := PlanText(tm.m.NextOracleStep(task, hist))
				for seed := 0; seed < 3; seed++ {
					got := planOnce(t, tm.planner, taskInstruction(task), hist, 100*ti+seed)
					checked++
					if _, err := uitars.Parse(got, uitars.DefaultOptions()); err != nil {
						t.Errorf("skill %v: plan %q does not parse: %v", skill, got, err)
					}
					progress := tm.m.OracleProgress(task, append(hist, got))
					switch skill {
					case 1:
						if got != want {
							t.Errorf("task %s, k=%d: skill 1 planned %q, want %q", taskID(task), k, got, want)
						}
					case 0:
						if got == want || (k < len(oracle) && progress != k) {
							t.Errorf("task %s, k=%d: skill 0 planned the oracle step %q", taskID(task), k, got)
						}
					}
				}
			}
		}
		if checked == 0 {
			t.Fatal("no task with an oracle plan")
		}
	}
}

// A wrong step in the history does not count; the planner resumes with
// the oracle step after the last one taken.
func TestModelsPlannerHistoryWithMistakes(t *testing.T) {
	cfg := fastConfig()
	cfg.Planner.DefaultSkill = 1
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, func(t *tasks.Task) bool { return len(taskOracle(t)) >= 2 })
	oracle := taskOracle(task)
	hist := []string{
		PlanText(oracle[0]),
		"Thought: Press 'escape'.\nAction: hotkey(key='escape')",
		"Action: wait()",
	}
	got := planOnce(t, tm.planner, taskInstruction(task), hist, 1)
	if want := PlanText(oracle[1]); got != want {
		t.Errorf("after a mistake: %q, want %q", got, want)
	}
	// A history without thoughts counts by the actions (the oracle action).
	hist = []string{"Action: " + oracle[0].Action}
	if got := planOnce(t, tm.planner, taskInstruction(task), hist, 2); got != PlanText(oracle[1]) {
		t.Errorf("action-only history: %q, want %q", got, PlanText(oracle[1]))
	}
}

func TestModelsPlannerUnknownInstruction(t *testing.T) {
	tm := startModels(t, fastConfig())
	for seed := 0; seed < 20; seed++ {
		got := planOnce(t, tm.planner, "Make me a sandwich in an app that does not exist.", nil, seed)
		if _, err := uitars.Parse(got, uitars.DefaultOptions()); err != nil {
			t.Fatalf("unknown instruction: %q does not parse: %v", got, err)
		}
	}
}

func TestModelsPlannerSkillRate(t *testing.T) {
	cfg := fastConfig()
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, anyTask)
	cfg.Planner.Skill = map[string]float64{taskApp(task): 0.3}
	tm = startModels(t, cfg)
	want := PlanText(taskOracle(task)[0])
	req := plannerRequest(taskInstruction(task), nil, pngWithState(t, 16, 10, nil))
	hits, total := 0, 0
	for _, a := range sampleAnswers(t, tm.planner, req) {
		total++
		if a == want {
			hits++
		}
	}
	if rate := float64(hits) / float64(total); rate < 0.25 || rate > 0.35 {
		t.Errorf("skill 0.3: %d/%d oracle plans (%.3f)", hits, total, rate)
	}
}

// ---- executor ---------------------------------------------------------------------

func TestModelsExecutorGrounding(t *testing.T) {
	// Each space: the executor writes an element's centre as the whole
	// number (thousandths for unit) of that space nearest to it.
	spaces := []struct {
		c    traj.Coords
		w, h float64
		unit bool
	}{
		{c: uitars.Resized(), w: 1288, h: 812},
		{c: uitars.Grid(), w: 1000, h: 1000},
		{c: traj.Coords{Space: traj.PixelsScreen}, w: desktop.ScreenW, h: desktop.ScreenH},
		{c: traj.Coords{Space: traj.Unit}, w: 1, h: 1, unit: true},
	}
	for _, sp := range spaces {
		t.Run(string(sp.c.Space), func(t *testing.T) { testExecutorGrounding(t, sp.c, sp.w, sp.h, sp.unit) })
	}
}

func testExecutorGrounding(t *testing.T, space traj.Coords, w, h float64, unit bool) {
	cfg := fastConfig()
	cfg.Executor.GroundingNoise = 0
	cfg.Executor.MisgroundRate = 0
	cfg.Executor.Coords = space
	tm := startModels(t, cfg)
	ground := func(thought string) string {
		resp, err := tm.executor.CreateChatCompletion(context.Background(), executorRequest(thought))
		if err != nil {
			t.Fatal(err)
		}
		return resp.Choices[0].Message.Content
	}
	grid := func(e desktop.Element) string {
		x, y := centre(e)
		if unit {
			f := func(v float64) string { return strconv.FormatFloat(math.Round(v*1000)/1000, 'f', -1, 64) }
			return "(" + f(x/desktop.ScreenW) + "," + f(y/desktop.ScreenH) + ")"
		}
		return fmt.Sprintf("(%d,%d)", int(math.Round(x/desktop.ScreenW*w)), int(math.Round(y/desktop.ScreenH*h)))
	}
	n := 0
	for _, app := range tm.m.world.apps() {
		els := tm.m.world.elements(app)
		for i, e := range els {
			n++
			if got, want := ground(fmt.Sprintf("Click the '%s' %s.", e.Label, e.Kind)), "Action: click(start_box='"+grid(e)+"')"; got != want {
				t.Errorf("click %q: %q, want %q", e.Label, got, want)
			}
			if got, want := ground(fmt.Sprintf("Double-click the '%s'.", e.Label)), "Action: left_double(start_box='"+grid(e)+"')"; got != want {
				t.Errorf("double-click %q: %q, want %q", e.Label, got, want)
			}
			if got, want := ground(fmt.Sprintf("Scroll up over the '%s'.", e.Label)), "Action: scroll(start_box='"+grid(e)+"', direction='up')"; got != want {
				t.Errorf("scroll %q: %q, want %q", e.Label, got, want)
			}
			o := els[(i+1)%len(els)]
			if got, want := ground(fmt.Sprintf("Drag from '%s' to '%s'.", e.Label, o.Label)), "Action: drag(start_box='"+grid(e)+"', end_box='"+grid(o)+"')"; got != want {
				t.Errorf("drag: %q, want %q", got, want)
			}
		}
	}
	if n == 0 {
		t.Fatal("no simulated elements")
	}
	for thought, want := range map[string]string{
		"Type 'open 2olx' and press Enter.":        `Action: type(content='open 2olx\n')`,
		"Type 'it's fine'.":                        `Action: type(content='it\'s fine')`,
		"Press 'ctrl s'.":                          "Action: hotkey(key='ctrl s')",
		"I'll press Enter now.":                    "Action: hotkey(key='enter')",
		"Wait for the structure to load.":          "Action: wait()",
		"The task is complete.":                    "Action: finished()",
		"I cannot do this.":                        "Action: call_user()",
		"Scroll down.":                             "Action: scroll(direction='down')",
		"Hmm.":                                     "Action: wait()",
		"Think about the problem before starting.": "Action: wait()",
	} {
		if got := ground(thought); got != want {
			t.Errorf("%q: %q, want %q", thought, got, want)
		}
	}
	// An element that does not exist: a click somewhere on the screen.
	got := ground("Click the 'No Such Button' button.")
	p, err := uitars.Parse(got, uitars.Options{Coords: space, Image: uitars.Screen{W: desktop.ScreenW, H: desktop.ScreenH}})
	if err != nil || len(p.Actions) != 1 || p.Actions[0].Type != traj.Click {
		t.Errorf("ungroundable click: %q (%v)", got, err)
	}
	// The UI-TARS prompt layout: the instruction after "## User Instruction".
	req := openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{textMsg("user",
		"You are a GUI agent.\n## Output Format\nThought: ...\nAction: ...\n## Action Space\ntype(content='')\n## User Instruction\nThe task is complete.")}}
	resp, err := tm.executor.CreateChatCompletion(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != "Action: finished()" {
		t.Errorf("UI-TARS layout: %q", got)
	}
}

func TestModelsExecutorNoise(t *testing.T) {
	var target desktop.Element
	for _, app := range (packageWorld{}).apps() {
		if els := (packageWorld{}).elements(app); len(els) > 1 {
			target = els[0]
			break
		}
	}
	if target.Label == "" {
		t.Fatal("no app with two elements")
	}
	cx, cy := centre(target)
	sp, err := newSpace(uitars.Resized()) // the default executor space
	if err != nil {
		t.Fatal(err)
	}
	centreText := "Action: " + sp.format(traj.Action{Type: traj.Click, Point: sp.point(cx, cy)})
	sample := func(noise, misground float64) []string {
		cfg := fastConfig()
		cfg.Executor.GroundingNoise = noise
		cfg.Executor.MisgroundRate = misground
		tm := startModels(t, cfg)
		req := executorRequest(fmt.Sprintf("Click the '%s' %s.", target.Label, target.Kind))
		return sampleAnswers(t, tm.executor, req)
	}
	// Misgrounding without noise: the answer is the target's centre or
	// another element's.
	off := 0
	answers := sample(0, 0.2)
	for _, a := range answers {
		if a != centreText {
			off++
		}
	}
	if rate := float64(off) / float64(len(answers)); rate < 0.16 || rate > 0.24 {
		t.Errorf("misgrounded %d/%d (%.3f), want about 0.2", off, len(answers), rate)
	}
	// Noise without misgrounding: Gaussian with sigma 10 px on each axis.
	var sum, sum2 float64
	answers = sample(10, 0)
	for _, a := range answers {
		p, err := uitars.Parse(a, sp.opt)
		if err != nil {
			t.Fatal(err)
		}
		dx := p.Actions[0].Point.X*desktop.ScreenW - cx
		sum += dx
		sum2 += dx * dx
	}
	n := float64(len(answers))
	mean := sum / n
	if sd := math.Sqrt(sum2/n - mean*mean); sd < 8.5 || sd > 11.5 || math.Abs(mean) > 1.5 {
		t.Errorf("x noise: mean %.2f px, sd %.2f px; want 0 and 10", mean, sd)
	}
}

// ---- judge --------------------------------------------------------------------------

// markerTruth: success when the last frame's app state has done = true.
func markerTruth(task *tasks.Task, states []desktop.State, answer string) (bool, int, []int, error) {
	if len(states) == 0 {
		return false, 0, nil, errors.New("no frames")
	}
	if done, _ := states[len(states)-1].AppState["done"].(bool); done {
		if len(states) > 3 {
			return true, 0, []int{2}, nil
		}
		return true, 0, nil, nil
	}
	return false, len(states) - 1, nil, nil
}

func judgeRequest(instruction, answer string, n int, frames ...[]byte) openai.ChatCompletionRequest {
	text := "Instruction: " + instruction + "\nThe screenshots of the trajectory follow, one per step."
	if answer != "" {
		text += "\nThe agent's final answer:\nANS " + answer
	}
	return openai.ChatCompletionRequest{Model: DefaultJudgeModel, Temperature: 1, TopP: 0.6, N: n, Messages: []openai.ChatCompletionMessage{
		textMsg(openai.ChatMessageRoleSystem, "Judge the trajectory. Caption each frame, then write Result: and a JSON dict."),
		imageMsg(text, frames...),
	}}
}

func TestModelsJudgeVerdicts(t *testing.T) {
	cfg := fastConfig()
	cfg.Judge.VoteModel = VoteModel{JudgeRates: JudgeRates{Recall: 1, FalsePositiveRate: 0}}
	cfg.Judge.Truth = markerTruth
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, anyTask)
	app := taskApp(task)
	start := pngWithState(t, 320, 200, &desktop.State{App: app, AppState: map[string]any{"done": false}})
	done := pngWithState(t, 320, 200, &desktop.State{App: app, AppState: map[string]any{"done": true, "molecule": "2olx"}})
	judge := func(frames ...[]byte) JudgeResult {
		resp, err := tm.judge.CreateChatCompletion(context.Background(), judgeRequest(taskInstruction(task), "", 2, frames...))
		if err != nil {
			t.Fatal(err)
		}
		var first JudgeResult
		for i, c := range resp.Choices {
			res, err := parseJudge(c.Message.Content)
			if err != nil {
				t.Fatalf("judge answer %q: %v", c.Message.Content, err)
			}
			if !strings.HasPrefix(c.Message.Content, "Frame 1: "+app+" is open") || !strings.Contains(c.Message.Content, fmt.Sprintf("Frame %d:", len(frames))) {
				t.Errorf("captions: %q", c.Message.Content)
			}
			if i == 0 {
				first = res
			}
		}
		return first
	}
	if r := judge(start, done); !r.Correctness || r.FirstErrorStep != nil || len(r.Redundant) != 0 || !r.Optimized {
		t.Errorf("clean success judged %+v", r)
	}
	if r := judge(start, start, start, done); !r.Correctness || len(r.Redundant) != 1 || r.Redundant[0] != 2 || r.Optimized {
		t.Errorf("redundant success judged %+v", r)
	}
	if r := judge(start, start, start); r.Correctness || r.FirstErrorStep == nil || *r.FirstErrorStep != 2 || r.ErrorType == "" || r.CorrectAction == "" {
		t.Errorf("failure judged %+v", r)
	}
	// A screenshot without a state chunk is captioned as unreadable.
	resp, err := tm.judge.CreateChatCompletion(context.Background(), judgeRequest(taskInstruction(task), "", 1, pngWithState(t, 64, 40, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if c := resp.Choices[0].Message.Content; !strings.Contains(c, "no application state") || judgeParses(c) != nil {
		t.Errorf("stateless frame: %q", c)
	}
}

func TestModelsJudgeAnswerTruth(t *testing.T) {
	cfg := fastConfig()
	cfg.Judge.VoteModel = VoteModel{JudgeRates: JudgeRates{Recall: 1, FalsePositiveRate: 0}} // DefaultTruth: the oracle's answer
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, isQuestion)
	want, _ := oracleAnswer(task)
	shot := pngWithState(t, 32, 20, &desktop.State{App: taskApp(task)})
	for answer, ok := range map[string]bool{want: true, want + "0": false, "": false} {
		resp, err := tm.judge.CreateChatCompletion(context.Background(), judgeRequest(taskInstruction(task), answer, 1, shot))
		if err != nil {
			t.Fatal(err)
		}
		res, err := parseJudge(resp.Choices[0].Message.Content)
		if err != nil || res.Correctness != ok {
			t.Errorf("answer %q: %+v (%v), want correctness %v", answer, res, err, ok)
		}
	}
}

func TestAcceptModelsJudgeRates(t *testing.T) {
	cfg := fastConfig()
	cfg.Judge.VoteModel = VoteModel{JudgeRates: JudgeRates{Recall: 0.8, FalsePositiveRate: 0.2}, LowRes: &JudgeRates{Recall: 0.5, FalsePositiveRate: 0.5}}
	cfg.Judge.Second = &SecondJudge{Model: "second", VoteModel: VoteModel{JudgeRates: JudgeRates{Recall: 0.95, FalsePositiveRate: 0.6}, VoteCorrelation: 1}}
	cfg.Judge.Truth = markerTruth
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, anyTask)
	model := DefaultJudgeModel
	rate := func(done bool, w int, vc float64) (single, unanimous float64) {
		m := tm
		if vc > 0 {
			c := cfg
			c.Judge.VoteCorrelation = vc
			one := 0.0
			c.Judge.FailureVoteCorrelation = &one // failures stay independent
			m = startModels(t, c)
		}
		frame := pngWithState(t, w, 2, &desktop.State{App: taskApp(task), AppState: map[string]any{"done": done}})
		pos, all, votes, trajs := 0, 0, 0, 0
		for i := 0; i < 250; i++ {
			// 4 independent votes per trajectory (n = 4).
			req := judgeRequest(taskInstruction(task), "", 4, frame)
			req.Model = model
			seed := i
			req.Seed = &seed
			// Distinct trajectories: a distinct final state per i.
			frame2 := pngWithState(t, w, 2, &desktop.State{App: taskApp(task), Seq: i, AppState: map[string]any{"done": done}})
			req.Messages[1] = imageMsg("Instruction: "+taskInstruction(task), frame, frame2)
			resp, err := m.judge.CreateChatCompletion(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			yes := 0
			for _, c := range resp.Choices {
				res, err := parseJudge(c.Message.Content)
				if err != nil {
					t.Fatal(err)
				}
				votes++
				if res.Correctness {
					pos++
					yes++
				}
			}
			trajs++
			if yes == 4 {
				all++
			}
		}
		return float64(pos) / float64(votes), float64(all) / float64(trajs)
	}
	near := func(name string, got, want, tol float64) {
		if got < want-tol || got > want+tol {
			t.Errorf("%s = %.3f, want %.3f ± %.2f", name, got, want, tol)
		}
	}
	s, u := rate(true, desktop.ScreenW, 0)
	near("recall", s, 0.8, 0.04)
	near("unanimous recall (independent votes)", u, 0.8*0.8*0.8*0.8, 0.07)
	s, _ = rate(false, desktop.ScreenW, 0)
	near("false-positive rate", s, 0.2, 0.04)
	s, _ = rate(true, 640, 0)
	near("low-res recall", s, 0.5, 0.05)
	s, u = rate(true, desktop.ScreenW, 1)
	near("recall (correlated votes)", s, 0.8, 0.06)
	near("unanimous recall (fully correlated votes)", u, 0.8, 0.06)
	_, u = rate(false, desktop.ScreenW, 1)
	near("unanimous false-positive rate (failures independent)", u, 0.2*0.2*0.2*0.2, 0.02)
	_, u = rate(true, 640, 1)
	near("unanimous low-res recall (low-res votes never share the draw)", u, 0.5*0.5*0.5*0.5, 0.06)
	model = "second" // the second model: its own rates, fully correlated
	s, u = rate(false, desktop.ScreenW, 0)
	near("second model's false-positive rate", s, 0.6, 0.05)
	near("second model's unanimous false-positive rate", u, 0.6, 0.07)
	if p := cfg.Judge.Precision(0.15); p < 0.41 || p > 0.42 {
		t.Errorf("precision at base rate 0.15: %.3f", p)
	}
}

// ---- config -------------------------------------------------------------------------

func TestModelsConfigValidate(t *testing.T) {
	if err := DefaultConfig().Validate(); err != nil {
		t.Fatal(err)
	}
	cfg := DefaultConfig()
	cfg.Planner.Skill = map[string]float64{"ChimeraX": 1.5}
	cfg.Executor.MisgroundRate = -0.1
	cfg.Executor.GroundingNoise = -1
	cfg.Judge.Recall = 2
	cfg.Judge.Model = DefaultPlannerModel
	cfg.Planner.Faults.ErrorProb = 0.7
	cfg.Planner.Faults.HangProb = 0.7
	cfg.Clock.Scale = -1
	cfg.Judge.Second = &SecondJudge{Model: DefaultPlannerModel}
	err := cfg.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{`planner.skill["ChimeraX"]`, "executor.misground_rate", "executor.grounding_noise", "judge.recall",
		"judge.model", "judge.second.model", "hang_prob + error_prob", "clock.scale"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := New(cfg); err == nil {
		t.Error("New accepted an invalid config")
	}

	// The JSON form round-trips and decodes over the defaults.
	cfg = DefaultConfig()
	if err := json.Unmarshal([]byte(`{"seed": 9, "clock": {"scale": 0.001}, "planner": {"skill": {"Celestia": 0.9}, "faults": {"malformed_prob": 0.05}},
		"executor": {"grounding_noise": 4}, "judge": {"recall": 0.9, "low_res": {"recall": 0.7, "false_positive_rate": 0.3}}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if cfg.Seed != 9 || cfg.Clock.Scale != 0.001 || cfg.Planner.Skill["Celestia"] != 0.9 || cfg.Planner.DefaultSkill != 0.6 ||
		cfg.Planner.Faults.MalformedProb != 0.05 || cfg.Executor.GroundingNoise != 4 || cfg.Executor.MisgroundRate != 0.05 ||
		cfg.Judge.Recall != 0.9 || cfg.Judge.FalsePositiveRate != 0.1993 || cfg.Judge.LowRes.Recall != 0.7 || cfg.Planner.Model != DefaultPlannerModel {
		t.Errorf("decoded config %+v", cfg)
	}
	if err := cfg.Validate(); err != nil {
		t.Error(err)
	}
	if fc := cfg.Judge.FailureVoteCorrelation; fc == nil || *fc != 0.467 {
		t.Errorf("a config without correlations keeps the calibrated failure correlation, got %v", fc)
	}
	// One vote_correlation is meant for both classes: it clears the
	// calibrated failure correlation it is decoded over, per model.
	cfg = DefaultConfig()
	if err := json.Unmarshal([]byte(`{"judge": {"vote_correlation": 0.5, "second": {"vote_correlation": 0.2, "failure_vote_correlation": 0.1}}}`), &cfg); err != nil {
		t.Fatal(err)
	}
	if j := cfg.Judge; j.FailureVoteCorrelation != nil || j.Correlation(false) != 0.5 || j.Second.Correlation(false) != 0.1 || j.Second.Correlation(true) != 0.2 ||
		j.Second.Model != DefaultSecondJudgeModel || j.Second.Recall != 0.955 {
		t.Errorf("decoded judge %+v, second %+v", j.VoteModel, *j.Second)
	}
}

func TestTemper(t *testing.T) {
	for _, c := range []struct{ p, t, want float64 }{
		{0.6, 1, 0.6}, {0.6, 1e-6, 1}, {0.4, 1e-6, 0}, {0.5, 1e-6, 0.5}, {0, 0.5, 0}, {1, 2, 1},
	} {
		if got := temper(c.p, c.t); got != c.want {
			t.Errorf("temper(%v, %v) = %v, want %v", c.p, c.t, got, c.want)
		}
	}
	if a, b := temper(0.8, 0.5), temper(0.8, 2); !(a > 0.8 && b < 0.8 && b > 0.5) {
		t.Errorf("temper(0.8, 0.5) = %v, temper(0.8, 2) = %v", a, b)
	}
}

// ---- benchmarks ------------------------------------------------------------------

func benchEndpoint(b *testing.B, call func(cl *testModels, i int) error) {
	tm := startModels(b, fastConfig())
	b.ReportAllocs()
	b.ResetTimer()
	start := time.Now()
	var n int64
	var mu sync.Mutex
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			if err := call(tm, i); err != nil {
				b.Error(err)
				return
			}
			i++
		}
		mu.Lock()
		n += int64(i)
		mu.Unlock()
	})
	b.ReportMetric(float64(n)/time.Since(start).Seconds(), "calls/s")
}

func BenchmarkPlanner(b *testing.B) {
	// A real simulated screenshot (about 270 KB), as the rollout sends it.
	mach := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
	if err := mach.Launch("chimerax"); err != nil {
		b.Fatal(err)
	}
	shot, err := mach.Screenshot()
	if err != nil {
		b.Fatal(err)
	}
	var instruction string
	if ts := (packageWorld{}).tasks(); len(ts) > 0 {
		instruction = taskInstruction(ts[0])
	}
	benchEndpoint(b, func(tm *testModels, i int) error {
		req := plannerRequest(instruction, nil, shot)
		_, err := tm.planner.CreateChatCompletion(context.Background(), req)
		return err
	})
}

func BenchmarkExecutor(b *testing.B) {
	var thought = "Wait"
	for _, app := range (packageWorld{}).apps() {
		if els := (packageWorld{}).elements(app); len(els) > 0 {
			thought = fmt.Sprintf("Click the '%s' %s.", els[0].Label, els[0].Kind)
			break
		}
	}
	benchEndpoint(b, func(tm *testModels, i int) error {
		_, err := tm.executor.CreateChatCompletion(context.Background(), executorRequest(thought))
		return err
	})
}

// ---- with the simulated machine -------------------------------------------------------

// The executor's grounding drives a real simulated machine, and the judge
// reads the state chunk of its screenshots.
func TestModelsWithMachine(t *testing.T) {
	cfg := fastConfig()
	cfg.Executor.GroundingNoise = 0
	cfg.Executor.MisgroundRate = 0
	cfg.Judge.VoteModel = VoteModel{JudgeRates: JudgeRates{Recall: 1, FalsePositiveRate: 0}}
	cfg.Judge.Truth = func(task *tasks.Task, states []desktop.State, answer string) (bool, int, []int, error) {
		last := states[len(states)-1]
		return last.App == chimerax.Name && last.Focus == "cmdline", len(states), nil, nil
	}
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, anyTask)
	ctx := context.Background()

	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: 1})
	if err := m.Launch("chimerax"); err != nil {
		t.Fatal(err)
	}
	shot1, err := m.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := tm.planner.CreateChatCompletion(ctx, plannerRequest(taskInstruction(task), nil, shot1))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := uitars.Parse(resp.Choices[0].Message.Content, uitars.DefaultOptions()); err != nil {
		t.Errorf("plan on a real screenshot: %v", err)
	}
	if want := imageTokens(desktop.ScreenW, desktop.ScreenH); resp.Usage.PromptTokens < want {
		t.Errorf("prompt tokens %d < one screenshot (%d)", resp.Usage.PromptTokens, want)
	}

	eresp, err := tm.executor.CreateChatCompletion(ctx, executorRequest("Click the 'ChimeraX command line' field."))
	if err != nil {
		t.Fatal(err)
	}
	p, err := uitars.Parse(eresp.Choices[0].Message.Content, tm.m.execSpace.opt)
	if err != nil || len(p.Actions) != 1 || p.Actions[0].Type != traj.Click {
		t.Fatalf("executor: %q (%v)", eresp.Choices[0].Message.Content, err)
	}
	pt := p.Actions[0].Point
	if err := m.Input(desktop.Event{Kind: desktop.EvClick, X: int(pt.X * desktop.ScreenW), Y: int(pt.Y * desktop.ScreenH), HasXY: true, Button: "left", Clicks: 1}); err != nil {
		t.Fatal(err)
	}
	if f := m.State().Focus; f != "cmdline" {
		t.Fatalf("after the grounded click the focus is %q, want cmdline", f)
	}
	shot2, err := m.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	jresp, err := tm.judge.CreateChatCompletion(ctx, judgeRequest(taskInstruction(task), "", 1, shot1, shot2))
	if err != nil {
		t.Fatal(err)
	}
	content := jresp.Choices[0].Message.Content
	res, err := parseJudge(content)
	if err != nil || !res.Correctness {
		t.Errorf("judge on real screenshots: %+v %v\n%s", res, err, content)
	}
	if !strings.Contains(content, "Frame 1: ChimeraX is open") || !strings.Contains(content, "Frame 2: ChimeraX is open; the focus is on 'ChimeraX command line'") {
		t.Errorf("captions: %s", content)
	}
	t.Logf("judge on real screenshots:\n%s", content)
}

// Every oracle thought grounds to its oracle action: the same action type,
// arguments, and a point inside the target element.
func TestModelsExecutorGroundsOracle(t *testing.T) {
	cfg := fastConfig()
	cfg.Executor.GroundingNoise = 0
	cfg.Executor.MisgroundRate = 0
	tm := startModels(t, cfg)
	n := 0
	for _, task := range tm.m.world.tasks() {
		for i, o := range taskOracle(task) {
			if _, ans := cutANS(o.Action); ans {
				continue // answers are not grounded
			}
			resp, err := tm.executor.CreateChatCompletion(context.Background(), executorRequest(o.Thought))
			if err != nil {
				t.Fatal(err)
			}
			got, err := uitars.Parse(resp.Choices[0].Message.Content, tm.m.execSpace.opt)
			want, werr := uitars.Parse(o.Action, uitars.DefaultOptions())
			if err != nil || werr != nil || len(got.Actions) != 1 || len(want.Actions) != 1 {
				t.Errorf("%s oracle[%d] %q: executor %q (%v), oracle action %q (%v)", taskID(task), i, o.Thought, resp.Choices[0].Message.Content, err, o.Action, werr)
				continue
			}
			n++
			if !tm.m.sameStep(got.Actions[0], want.Actions[0], o.Target) {
				t.Errorf("%s oracle[%d] %q: grounded to %q, oracle action %q", taskID(task), i, o.Thought, resp.Choices[0].Message.Content, o.Action)
			}
		}
	}
	if n == 0 {
		t.Fatal("no oracle steps")
	}
}

// With skill 1 and exact grounding, the simulated planner and executor
// solve every simulated task on a simulated machine (checked by the
// task's evaluator), and a judge whose Truth is that evaluator's verdict
// (recall 1, no false positives) agrees.
func TestModelsSolveTasksOnMachines(t *testing.T) {
	cfg := fastConfig()
	cfg.Planner.DefaultSkill = 1
	cfg.Executor.GroundingNoise = 0
	cfg.Executor.MisgroundRate = 0
	cfg.Judge.VoteModel = VoteModel{JudgeRates: JudgeRates{Recall: 1, FalsePositiveRate: 0}}
	var mu sync.Mutex
	verdicts := map[string]bool{} // final state + answer -> evaluator verdict
	key := func(states []desktop.State, answer string) string {
		return string(mustJSON(states[len(states)-1])) + "\x00" + answer
	}
	cfg.Judge.Truth = func(task *tasks.Task, states []desktop.State, answer string) (bool, int, []int, error) {
		mu.Lock()
		defer mu.Unlock()
		if len(states) == 0 {
			return false, 0, nil, errors.New("no frames")
		}
		v, ok := verdicts[key(states, answer)]
		if !ok {
			return false, 0, nil, errors.New("unknown trajectory")
		}
		return v, 0, nil, nil
	}
	tm := startModels(t, cfg)
	ctx := context.Background()
	ts := tm.m.world.tasks()
	if len(ts) == 0 {
		t.Fatal("no simulated tasks (the embedded tasks did not load)")
	}
	if testing.Short() || raceEnabled {
		// One task per app (rendering dominates, and is slow under -race).
		seen := map[string]bool{}
		var some []*tasks.Task
		for _, task := range ts {
			if !seen[task.App] {
				seen[task.App] = true
				some = append(some, task)
			}
		}
		ts = some
	}
	for ti, task := range ts {
		m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: int64(ti)})
		if err := tasks.RunInit(m, &task.Task, nil); err != nil {
			t.Errorf("%s: init: %v", task.ID, err)
			continue
		}
		shot, err := m.Screenshot()
		if err != nil {
			t.Fatal(err)
		}
		shots := [][]byte{shot}
		var history []string
		var final scienceboard.FinalAction
		for step := 0; step < task.Steps && final.Kind == ""; step++ {
			plan := planOnce(t, tm.planner, task.Instruction, history, step)
			history = append(history, plan)
			p, err := uitars.Parse(plan, uitars.DefaultOptions())
			if err != nil || len(p.Actions) != 1 {
				t.Fatalf("%s step %d: plan %q: %v", task.ID, step, plan, err)
			}
			switch a := p.Actions[0]; a.Type {
			case traj.Answer:
				final = scienceboard.FinalAction{Kind: scienceboard.FinalAns, Answer: a.Text}
				continue
			case traj.Finished:
				final = scienceboard.FinalAction{Kind: scienceboard.FinalDone}
				continue
			case traj.CallUser:
				final = scienceboard.FinalAction{Kind: scienceboard.FinalFail}
				continue
			}
			resp, err := tm.executor.CreateChatCompletion(ctx, executorRequest(p.Thought))
			if err != nil {
				t.Fatal(err)
			}
			ea, err := uitars.Parse(resp.Choices[0].Message.Content, tm.m.execSpace.opt)
			if err != nil || len(ea.Actions) != 1 {
				t.Fatalf("%s step %d: executor %q: %v", task.ID, step, resp.Choices[0].Message.Content, err)
			}
			code, err := uitars.Render(ea.Actions[0], uitars.DefaultScreen)
			if err != nil {
				t.Fatal(err)
			}
			evs, err := desktop.ParsePyAutoGUI(code)
			if err != nil {
				t.Fatalf("%s step %d: %q: %v", task.ID, step, code, err)
			}
			for _, ev := range evs {
				if err := m.Input(ev); err != nil {
					t.Fatalf("%s step %d: input %+v: %v", task.ID, step, ev, err)
				}
			}
			shot, err := m.Screenshot()
			if err != nil {
				t.Fatal(err)
			}
			shots = append(shots, shot)
		}
		res := scienceboard.Evaluate(ctx, &task.Task, simguest.Local(m, simguest.Config{}), final)
		if !res.Passed {
			t.Errorf("%s: the oracle plan, grounded by the executor, fails the evaluator: %+v\nplans: %q", task.ID, res, history)
		}
		states := make([]desktop.State, len(shots))
		for i, s := range shots {
			if states[i], err = desktop.ReadStateChunk(s); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		verdicts[key(states, final.Answer)] = res.Passed
		mu.Unlock()
		jresp, err := tm.judge.CreateChatCompletion(ctx, judgeRequest(task.Instruction, final.Answer, 1, shots...))
		if err != nil {
			t.Fatal(err)
		}
		jr, err := parseJudge(jresp.Choices[0].Message.Content)
		if err != nil || jr.Correctness != res.Passed {
			t.Errorf("%s: judge %+v (%v), evaluator passed=%v", task.ID, jr, err, res.Passed)
		}
	}
}

// A wrong plan's left click never lands on an element a solution uses —
// an oracle step's target or an alternative — even one of another tab
// that shares its screen space (KAlgebra's 2D and 3D Remove buttons once
// let a planner of skill 0 clear the graph by a click meant for the hidden
// 3D tab).
func TestWrongPlanClicksMissEverySolution(t *testing.T) {
	tm := startModels(t, fastConfig())
	checked := 0
	for _, task := range tm.m.world.tasks() {
		oracle := taskOracle(task)
		var boxes []image.Rectangle
		var labels []string
		for _, label := range task.Alternatives {
			labels = append(labels, label)
		}
		for _, st := range oracle {
			labels = append(labels, st.Target)
		}
		for _, label := range labels {
			if e, ok := tm.m.lookupLabel(label); ok {
				boxes = append(boxes, e.Box)
			}
		}
		for k, next := range oracle {
			for seed := range 200 {
				r := rand.New(rand.NewPCG(uint64(seed), uint64(k)))
				text := tm.m.wrongPlan(task, next, r)
				p, err := uitars.Parse(text, uitars.DefaultOptions())
				if err != nil {
					t.Fatalf("task %s step %d: wrong plan %q does not parse: %v", taskID(task), k, text, err)
				}
				for _, a := range p.Actions {
					if a.Type != traj.Click || a.Point == nil {
						continue
					}
					checked++
					pt := image.Pt(int(a.Point.X*desktop.ScreenW), int(a.Point.Y*desktop.ScreenH))
					for i, b := range boxes {
						if pt.In(b) {
							t.Errorf("task %s step %d: wrong plan %q clicks (%d,%d) inside %v of a solution element", taskID(task), k, text, pt.X, pt.Y, boxes[i])
						}
					}
				}
			}
		}
	}
	if checked == 0 {
		t.Fatal("no wrong click was checked")
	}
}

// TestModelsJudgeStepLabels: when each frame is labelled with its step
// (a subsampled trajectory), the judge cites steps by the labels: the
// first error step is the step of the frame the truth names, and a
// redundant step counts only where the frames around it are consecutive
// steps.
func TestModelsJudgeStepLabels(t *testing.T) {
	// Frames: steps 1, 4, 5 and the final screen after step 5.
	labels := []string{"Step 1. It executed: click.", "Step 4. The agent thought: \"after step 2 it failed\" It executed: type.", "Step 5. It executed: DONE.", "Final screen, after step 5."}
	request := func(task *tasks.Task, frames [][]byte) openai.ChatCompletionRequest {
		parts := []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: "Task: " + taskInstruction(task)}}
		for i, f := range frames {
			parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: labels[i]},
				openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: dataURI(f)}})
		}
		return openai.ChatCompletionRequest{Model: DefaultJudgeModel, Temperature: 1, Messages: []openai.ChatCompletionMessage{
			textMsg(openai.ChatMessageRoleSystem, "Judge."), {Role: openai.ChatMessageRoleUser, MultiContent: parts}}}
	}
	cases := []struct {
		name      string
		truth     TruthFunc
		wantFirst int
		wantRed   []int
	}{
		// Frame 2 (step 4) is where the truth's first error is.
		{"failure", func(*tasks.Task, []desktop.State, string) (bool, int, []int, error) { return false, 2, nil, nil }, 4, nil},
		// Truth: step 1 (frame 1→2, steps 1→4: not consecutive, not
		// visible as one step) and step 2 (frame 2→3, steps 4→5).
		{"redundant", func(*tasks.Task, []desktop.State, string) (bool, int, []int, error) { return true, 0, []int{1, 2}, nil }, 0, []int{4}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := fastConfig()
			cfg.Judge.VoteModel = VoteModel{JudgeRates: JudgeRates{Recall: 1, FalsePositiveRate: 0}}
			cfg.Judge.Truth = c.truth
			tm := startModels(t, cfg)
			task := mustTask(t, tm.m, anyTask)
			var frames [][]byte
			for range labels {
				frames = append(frames, pngWithState(t, 64, 40, &desktop.State{App: taskApp(task)}))
			}
			resp, err := tm.judge.CreateChatCompletion(context.Background(), request(task, frames))
			if err != nil {
				t.Fatal(err)
			}
			res, err := parseJudge(resp.Choices[0].Message.Content)
			if err != nil {
				t.Fatal(err)
			}
			if c.wantFirst > 0 && (res.FirstErrorStep == nil || *res.FirstErrorStep != c.wantFirst) {
				t.Errorf("first error step %v, want %d", res.FirstErrorStep, c.wantFirst)
			}
			if c.wantRed != nil && !slices.Equal(res.Redundant, c.wantRed) {
				t.Errorf("redundant %v, want %v", res.Redundant, c.wantRed)
			}
		})
	}
	for label, want := range map[string][2]int{
		"Step 7. It executed: x.":          {7, 0},
		"Final screen, after step 12.":     {13, 1},
		"step 3 thought: after step 1":     {3, 0},
		"Frame without a number":           {0, 0},
		"Step 0":                           {0, 0},
		"the screen after step 0, at last": {1, 1},
	} {
		pos, after := framePos(label)
		if pos != want[0] || after != (want[1] == 1) {
			t.Errorf("framePos(%q) = %d, %v; want %d, %v", label, pos, after, want[0], want[1] == 1)
		}
	}
}

// TestModelsRateLimit: RateLimitProb answers 429 with Retry-After, the
// error OpenAI clients retry on.
func TestModelsRateLimit(t *testing.T) {
	cfg := fastConfig()
	cfg.Judge.Faults.RateLimitProb = 1
	tm := startModels(t, cfg)
	task := mustTask(t, tm.m, anyTask)
	_, err := tm.judge.CreateChatCompletion(context.Background(), judgeRequest(taskInstruction(task), "", 1, pngWithState(t, 8, 8, nil)))
	var apiErr *openai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != http.StatusTooManyRequests || apiErr.Type != "rate_limit_error" {
		t.Fatalf("error %T %v, want a 429 rate_limit_error", err, err)
	}
	body, _ := json.Marshal(judgeRequest(taskInstruction(task), "", 1, pngWithState(t, 8, 8, nil)))
	resp, err := http.Post(tm.srv.JudgeURL+"/chat/completions", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("status %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
}

// TestMsgCache: the same messages are parsed once and shared; other
// messages are not confused with them; the cache keeps at most
// msgCacheSize lists.
func TestMsgCache(t *testing.T) {
	var mc msgCache
	raw := func(i int) []byte { return fmt.Appendf(nil, `[{"role":"user","content":"message %d"}]`, i) }
	a, aerr := mc.parse(raw(1), nil)
	b, berr := mc.parse(raw(1), nil)
	if aerr != nil || berr != nil || a != b {
		t.Fatalf("the same messages were parsed twice (%p, %p) or failed (%v, %v)", a, b, aerr, berr)
	}
	c, _ := mc.parse(raw(2), nil)
	if c == a || c.content == a.content || c.msgs[0].text != "message 2" {
		t.Fatal("different messages share a parse")
	}
	for i := 3; i < 3+msgCacheSize; i++ {
		mc.parse(raw(i), nil)
	}
	if len(mc.byKey) != msgCacheSize || len(mc.order) != msgCacheSize {
		t.Fatalf("%d cached, want %d", len(mc.byKey), msgCacheSize)
	}
	if d, _ := mc.parse(raw(1), nil); d == a {
		t.Fatal("the oldest entry was not evicted")
	}
	if _, aerr := mc.parse([]byte(`[{"role":"robot","content":"x"}]`), nil); aerr == nil || !strings.Contains(aerr.msg, "unknown role") {
		t.Fatalf("bad role: %v", aerr)
	}
}

// TestSeededChoicesAsVLLM: choice i of a seeded request with n choices is
// what vLLM samples for it, the answer of a request with seed + i
// (ParentRequest._get_child_sampling_params, vllm/v1/engine/
// parallel_sampling.py), and the choices are independent draws.
func TestSeededChoicesAsVLLM(t *testing.T) {
	tm := startModels(t, fastConfig())
	ctx := context.Background()
	shot := pngWithState(t, 64, 40, nil)
	ask := func(seed, n int) []string {
		req := plannerRequest("Open the file /data/2olx.pdb", nil, shot)
		req.Seed, req.N = &seed, n
		resp, err := tm.planner.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		if len(resp.Choices) != n {
			t.Fatalf("seed %d, n %d: %d choices", seed, n, len(resp.Choices))
		}
		out := make([]string, n)
		for i, c := range resp.Choices {
			out[i] = c.Message.Content
		}
		return out
	}
	const n = 8
	many := ask(40, n)
	distinct := map[string]bool{}
	for i, got := range many {
		if one := ask(40+i, 1)[0]; got != one {
			t.Errorf("choice %d of seed 40: %q, want the answer of seed %d: %q", i, got, 40+i, one)
		}
		distinct[got] = true
	}
	if len(distinct) < 2 {
		t.Errorf("%d seeded choices all the same: %q", n, many[0])
	}
}

// TestLiftDataURIs: lifting the data URIs out of a request body before
// it is parsed changes nothing a call sees: the same messages, images,
// content hash and tokens as the body parsed as it is, for compact and
// spaced JSON, escaped URIs (left in place), a data URI in a text part
// and in another field (left in place); the cache tells two bodies that
// differ only in their images apart.
func TestLiftDataURIs(t *testing.T) {
	a, b := dataURI(pngWithState(t, 64, 48, nil)), dataURI(pngWithState(t, 40, 30, nil))
	escaped := strings.ReplaceAll(b, "/", `\/`)
	bodies := map[string]string{
		"compact": `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"frame 1"},{"type":"image_url","image_url":{"url":"` + a + `"}},{"type":"image_url","image_url":{"url":"` + b + `"}}]}]}`,
		"spaced":  `{"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "frame 1"}, {"type": "image_url", "image_url": {"url" :  "` + a + `"}}, {"type": "image_url", "image_url": {"url": "` + b + `"}}]}]}`,
		"escaped": `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"frame 1"},{"type":"image_url","image_url":{"url":"` + a + `"}},{"type":"image_url","image_url":{"url":"` + escaped + `"}}]}]}`,
		"in text": `{"model":"m","user":"` + a + `","messages":[{"role":"user","content":[{"type":"text","text":"url: \"` + a + `\""},{"type":"image_url","image_url":{"url":"` + b + `"}}]}]}`,
	}
	for name, body := range bodies {
		t.Run(name, func(t *testing.T) {
			skel, urls := liftDataURIs([]byte(body))
			want := map[string]int{"compact": 2, "spaced": 2, "escaped": 1, "in text": 1}[name]
			n := 0
			for _, u := range urls {
				n += len(u)
			}
			if len(urls) != want || len(skel) != len(body)-n+len(urls)*len(liftedJSON+"0") {
				t.Errorf("%d URIs lifted (want %d), the skeleton keeps %d of %d bytes", len(urls), want, len(skel), len(body))
			}
			lifted, _, aerr := parseCall([]byte(body), nil)
			if aerr != nil {
				t.Fatal(aerr.msg)
			}
			var req wireRequest
			if err := json.Unmarshal([]byte(body), &req); err != nil {
				t.Fatal(err)
			}
			plain, aerr := parseMessages(req.Messages, nil)
			if aerr != nil {
				t.Fatal(aerr.msg)
			}
			if lifted.content != plain.content || lifted.promptTokens != plain.tokens || !reflect.DeepEqual(lifted.msgs, plain.msgs) {
				t.Errorf("lifted parse differs from the plain one (%d URIs lifted)", len(urls))
			}
			if name == "in text" && (lifted.msgs[0].text != `url: "`+a+`"` || string(urls[0]) != b || len(urls) != 1) {
				t.Errorf("a data URI outside an image_url was lifted: text %.40q, %d lifted", lifted.msgs[0].text, len(urls))
			}
		})
	}
	var mc msgCache
	swap := strings.NewReplacer(a, b, b, a).Replace(bodies["compact"])
	x, _, _ := parseCall([]byte(bodies["compact"]), &mc)
	y, _, _ := parseCall([]byte(swap), &mc)
	if x.content == y.content || x.msgs[0].images[0].w == y.msgs[0].images[0].w {
		t.Error("two bodies that differ only in their images share a cached parse")
	}
}

// A connection a client dialled ahead of a request that never came does
// not hold the servers' stop: http.Server.Shutdown would count it busy
// for 5 s (ShutdownGrace), and every simulated run ended 5 s late. A call
// in flight is still waited for.
func TestShutdownClosesUnusedConnections(t *testing.T) {
	m, err := New(DefaultConfig())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv, err := m.Start(ctx)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(srv.PlannerURL)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.Dial("tcp", u.Host) // no request on it
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// The server has accepted it when a request on another connection
	// is answered (Serve accepts in order).
	resp, err := http.Get(srv.PlannerURL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	start := time.Now()
	cancel()
	select {
	case <-srv.Done():
	case <-time.After(ShutdownGrace + 5*time.Second):
		t.Fatal("the servers did not stop")
	}
	// Stopping at the grace's end would mean the unused connection held
	// it: the stop must come well before.
	if d := time.Since(start); d >= ShutdownGrace {
		t.Errorf("the servers stopped after %v, the whole grace (%v) of an unused connection", d, ShutdownGrace)
	}
	if _, err := conn.Read(make([]byte, 1)); err == nil {
		t.Error("the unused connection is still open")
	}
}
