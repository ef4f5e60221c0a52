package model_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/pkg/traj"
	openai "github.com/sashabaranov/go-openai"
)

// recorder is an OpenAI-compatible endpoint that keeps every request body
// and answers with the next scripted answer (the last one repeats).
type recorder struct {
	mu      sync.Mutex
	bodies  [][]byte
	answers []answer
}

type answer struct {
	status int
	header map[string]string
	body   string
}

func (r *recorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, _ := io.ReadAll(req.Body)
	r.mu.Lock()
	r.bodies = append(r.bodies, b)
	a := r.answers[0]
	if len(r.answers) > 1 {
		r.answers = r.answers[1:]
	}
	r.mu.Unlock()
	if req.URL.Path != "/v1/chat/completions" || req.Header.Get("Authorization") != "Bearer k" {
		http.Error(w, "wrong path or key", http.StatusNotFound)
		return
	}
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(a.status)
	io.WriteString(w, a.body)
}

func (r *recorder) script(as ...answer) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.answers, r.bodies = as, nil
}

func (r *recorder) seen() [][]byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([][]byte(nil), r.bodies...)
}

const okAnswer = `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":1,"total_tokens":6}}`

// sleeps records the waits between attempts instead of waiting.
type sleeps struct {
	mu sync.Mutex
	d  []time.Duration
}

func (s *sleeps) sleep(ctx context.Context, d time.Duration) error {
	s.mu.Lock()
	s.d = append(s.d, d)
	s.mu.Unlock()
	return ctx.Err()
}

func (s *sleeps) waits() []time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Duration(nil), s.d...)
}

func newRecorded(t *testing.T, as ...answer) (*recorder, *model.Client, *sleeps) {
	t.Helper()
	rec := &recorder{answers: as}
	srv := httptest.NewServer(rec)
	t.Cleanup(srv.Close)
	sl := &sleeps{}
	m, err := model.New(model.Config{BaseURL: srv.URL + "/v1/", Model: "m", APIKey: "k", Attempts: 3, Backoff: time.Millisecond, Sleep: sl.sleep}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return rec, m, sl
}

// TestChatSendsEverySamplingParameter fails if any sampling parameter is
// left out of a request body, whatever its value (a zero temperature, a
// top_k of -1 and an empty stop list included): a server's generation
// defaults must never decide them. With LogProbs the body asks for
// log-probabilities and token ids with vLLM's names, as in
// ChatCompletionRequest of vllm/entrypoints/openai/chat_completion/protocol.py
// (vllm-project/vllm, commit d5dba2d7b0ab9b98096560c69db7126b54b14d79):
// logprobs, top_logprobs, return_token_ids and return_tokens_as_token_ids.
func TestChatSendsEverySamplingParameter(t *testing.T) {
	rec, m, _ := newRecorded(t, answer{status: 200, body: okAnswer})
	seed := int64(7)
	msgs := `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`
	for _, tc := range []struct {
		name string
		req  model.Request
		want map[string]string // key → exact JSON value
	}{
		{"greedy, nothing set", model.Request{Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}},
			Params: model.Params{Sampling: traj.Sampling{Temperature: 0, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 256}}},
			map[string]string{"temperature": "0", "top_p": "1", "top_k": "-1", "min_p": "0", "repetition_penalty": "1",
				"presence_penalty": "0", "frequency_penalty": "0", "max_tokens": "256", "stop": "[]", "logprobs": "false", "n": "1", "model": `"m"`}},
		{"everything set, encoded messages, logprobs", model.Request{Encoded: []byte(msgs), N: 4, User: "t/v1",
			Params: model.Params{LogProbs: true, Sampling: traj.Sampling{Temperature: 1, TopP: 0.9, TopK: 50, MinP: 0.05, RepetitionPenalty: 1.05,
				PresencePenalty: 0.5, FrequencyPenalty: -0.5, MaxTokens: 1500, Seed: &seed, Stop: []string{"\nObservation"}}}},
			map[string]string{"messages": msgs, "temperature": "1", "top_p": "0.9", "top_k": "50", "min_p": "0.05", "repetition_penalty": "1.05",
				"presence_penalty": "0.5", "frequency_penalty": "-0.5", "max_tokens": "1500", "seed": "7", "stop": `["\nObservation"]`,
				"logprobs": "true", "top_logprobs": "0", "return_token_ids": "true", "return_tokens_as_token_ids": "true", "n": "4", "user": `"t/v1"`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec.script(answer{status: 200, body: okAnswer})
			if _, err := m.Chat(context.Background(), tc.req); err != nil {
				t.Fatal(err)
			}
			bodies := rec.seen()
			if len(bodies) != 1 {
				t.Fatalf("%d requests", len(bodies))
			}
			var got map[string]json.RawMessage
			if err := json.Unmarshal(bodies[0], &got); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, bodies[0])
			}
			for _, k := range model.SamplingKeys {
				if _, ok := got[k]; !ok {
					t.Errorf("sampling parameter %q left to the server: %s", k, bodies[0])
				}
			}
			for k, v := range tc.want {
				if string(got[k]) != v {
					t.Errorf("%s = %s, want %s", k, got[k], v)
				}
			}
			if n := strings.Count(string(bodies[0]), `"messages"`); n != 1 {
				t.Errorf("messages appear %d times", n)
			}
		})
	}
	t.Run("invalid requests are refused before sending", func(t *testing.T) {
		rec.script(answer{status: 200, body: okAnswer})
		for _, r := range []model.Request{
			{Params: model.Params{Sampling: sampling(1, nil)}}, // no messages
			{Messages: []openai.ChatCompletionMessage{{Role: "user"}}, Encoded: []byte(msgs), Params: model.Params{Sampling: sampling(1, nil)}},
			{Messages: []openai.ChatCompletionMessage{{Role: "user"}}, Params: model.Params{Sampling: traj.Sampling{Temperature: 1}}}, // top_p 0
		} {
			if _, err := m.Chat(context.Background(), r); err == nil {
				t.Errorf("%+v was sent", r)
			}
		}
		if n := len(rec.seen()); n != 0 {
			t.Errorf("%d invalid requests sent", n)
		}
	})
}

// TestChatParsesChoices: each choice's content, finish reason, the
// request's prompt token ids (vLLM's top-level "prompt_token_ids"),
// log-probabilities, token ids (vLLM's choice "token_ids", else the
// "token_id:N" logprob tokens) and own completion token count; usage / n
// only as a marked last resort.
func TestChatParsesChoices(t *testing.T) {
	for _, tc := range []struct {
		name      string
		body      string
		ids       [][]int32
		lps       []int // number of log-probabilities per choice
		tokens    []int
		estimated bool
		finish    []string
	}{
		{"token_ids field", `{"choices":[
			{"index":0,"message":{"content":"ab"},"finish_reason":"stop","token_ids":[10,11],"logprobs":{"content":[{"token":"a","logprob":-0.1},{"token":"b","logprob":-0.2}]}},
			{"index":1,"message":{"content":"abc"},"finish_reason":"length","token_ids":[10,11,12],"logprobs":{"content":[{"token":"a","logprob":-0.1},{"token":"b","logprob":-0.2},{"token":"c","logprob":-0.3}]}}],
			"usage":{"prompt_tokens":9,"completion_tokens":5},"prompt_token_ids":[1,2,3,4,5,6,7,8,9]}`,
			[][]int32{{10, 11}, {10, 11, 12}}, []int{2, 3}, []int{2, 3}, false, []string{"stop", "length"}},
		{"token_id:N tokens", `{"choices":[{"index":0,"message":{"content":"ab"},"finish_reason":"stop","logprobs":{"content":[{"token":"token_id:151643","logprob":-0.1},{"token":"token_id:0","logprob":0}]}}],"usage":{"prompt_tokens":9,"completion_tokens":2}}`,
			[][]int32{{151643, 0}}, []int{2}, []int{2}, false, []string{"stop"}},
		{"token_ids disagreeing with logprobs fall back to the tokens", `{"choices":[{"index":0,"message":{"content":"ab"},"finish_reason":"stop","token_ids":[1,2,3],"logprobs":{"content":[{"token":"token_id:5","logprob":-0.1},{"token":"token_id:6","logprob":-0.1}]}}],"usage":{"prompt_tokens":9,"completion_tokens":2}}`,
			[][]int32{{5, 6}}, []int{2}, []int{2}, false, []string{"stop"}},
		{"logprobs without ids", `{"choices":[{"index":0,"message":{"content":"ab"},"finish_reason":"stop","logprobs":{"content":[{"token":"a","logprob":-0.1},{"token":"b","logprob":-0.1},{"token":"c","logprob":-0.1}]}}],"usage":{"prompt_tokens":9,"completion_tokens":3}}`,
			[][]int32{nil}, []int{3}, []int{3}, false, []string{"stop"}},
		{"nothing per choice: usage / n, marked", `{"choices":[{"index":0,"message":{"content":"a"}},{"index":1,"message":{"content":"b"},"finish_reason":"stop"}],"usage":{"prompt_tokens":9,"completion_tokens":10}}`,
			[][]int32{nil, nil}, []int{0, 0}, []int{5, 5}, true, []string{"", "stop"}},
		{"listed out of index order: index order", `{"choices":[{"index":1,"message":{"content":"b"},"finish_reason":"length","token_ids":[7]},{"index":0,"message":{"content":"a"},"finish_reason":"stop","token_ids":[5,6]}],"usage":{"prompt_tokens":9,"completion_tokens":3}}`,
			[][]int32{{5, 6}, {7}}, []int{0, 0}, []int{2, 1}, false, []string{"stop", "length"}},
		{"indexes not 0..n-1: as listed", `{"choices":[{"index":1,"message":{"content":"b"},"finish_reason":"length","token_ids":[7]},{"index":1,"message":{"content":"a"},"finish_reason":"stop","token_ids":[5,6]}],"usage":{"prompt_tokens":9,"completion_tokens":3}}`,
			[][]int32{{7}, {5, 6}}, []int{0, 0}, []int{1, 2}, false, []string{"length", "stop"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, m, _ := newRecorded(t, answer{status: 200, body: tc.body})
			got, err := m.Chat(context.Background(), model.Request{Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, N: len(tc.ids),
				Params: model.Params{Sampling: sampling(1, nil), LogProbs: true}})
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tc.ids) {
				t.Fatalf("%d choices", len(got))
			}
			for i, c := range got {
				// vLLM's top-level prompt_token_ids go to every choice.
				var prompt []int32
				if strings.Contains(tc.body, `"prompt_token_ids"`) {
					prompt = []int32{1, 2, 3, 4, 5, 6, 7, 8, 9}
				}
				if !equalIDs(c.TokenIDs, tc.ids[i]) || !equalIDs(c.PromptTokenIDs, prompt) || len(c.LogProbs) != tc.lps[i] || c.CompletionTokens != tc.tokens[i] ||
					c.CompletionTokensEstimated != tc.estimated || c.FinishReason != tc.finish[i] || c.PromptTokens != 9 {
					t.Errorf("choice %d = %+v", i, c)
				}
			}
		})
	}
}

func equalIDs(a, b []int32) bool {
	if len(a) != len(b) || (a == nil) != (b == nil) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestRetryAfter: a 429 or 503 with Retry-After waits what the server asks
// (seconds or an HTTP date), at most MaxRetryAfter, instead of the
// computed backoff; the waits are measured through the client's Sleep.
func TestRetryAfter(t *testing.T) {
	future := time.Now().Add(30 * time.Second).UTC().Format(http.TimeFormat)
	for _, tc := range []struct {
		name     string
		status   int
		header   string
		min, max time.Duration
	}{
		{"429 seconds", 429, "7", 7 * time.Second, 7 * time.Second},
		{"503 seconds", 503, "2", 2 * time.Second, 2 * time.Second},
		{"429 HTTP date", 429, future, 25 * time.Second, 31 * time.Second},
		{"bounded", 429, "3600", model.MaxRetryAfter, model.MaxRetryAfter},
		{"no header: backoff", 429, "", 0, 10 * time.Millisecond},
		{"unreadable header: backoff", 503, "soon", 0, 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := map[string]string{}
			if tc.header != "" {
				h["Retry-After"] = tc.header
			}
			rec, m, sl := newRecorded(t, answer{status: tc.status, header: h, body: `{"error":{"message":"busy","type":"rate_limit_error"}}`}, answer{status: 200, body: okAnswer})
			if _, err := m.Chat(context.Background(), model.Request{Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, Params: model.Params{Sampling: sampling(1, nil)}}); err != nil {
				t.Fatal(err)
			}
			w := sl.waits()
			if len(w) != 1 || w[0] < tc.min || w[0] > tc.max || len(rec.seen()) != 2 {
				t.Fatalf("waits %v over %d requests, want one in [%v, %v]", w, len(rec.seen()), tc.min, tc.max)
			}
		})
	}
}

// TestContextOverflow: a 400 with vLLM's context-length wording is
// ErrContextOverflow, carries the server's message and is not retried;
// another 400 is not.
func TestContextOverflow(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		overflow  bool
	}{
		// vllm/entrypoints/openai/serving_engine.py (older releases).
		{"maximum context length", "This model's maximum context length is 32768 tokens. However, you requested 33000 tokens (31500 in the messages, 1500 in the completion). Please reduce the length of the messages or completion.", true},
		// vllm/renderers/params.py at 017638d70159114c71e4c28cc95f54c3f7699079.
		{"context length is only", "You passed 31501 input tokens and requested 1500 output tokens. However, the model's context length is only 32768 tokens, resulting in a maximum input length of 31268 tokens. Please reduce the length of the input prompt.", true},
		{"decoder prompt", "The decoder prompt (length 40000) is longer than the maximum model length of 32768. Make sure that `max_model_len` is no smaller than the number of text tokens plus multimodal tokens.", true},
		{"other 400", "top_p must be in (0, 1], got 1.5.", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, _ := json.Marshal(map[string]any{"error": map[string]any{"message": tc.msg, "type": "BadRequestError", "code": 400}})
			rec, m, _ := newRecorded(t, answer{status: 400, body: string(body)})
			_, err := m.Chat(context.Background(), model.Request{Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, Params: model.Params{Sampling: sampling(1, nil)}})
			if errors.Is(err, model.ErrContextOverflow) != tc.overflow {
				t.Fatalf("errors.Is(%v, ErrContextOverflow) = %v", err, !tc.overflow)
			}
			var co *model.ContextOverflowError
			if tc.overflow && (!errors.As(err, &co) || co.Message != tc.msg) {
				t.Errorf("message lost: %v", err)
			}
			var api *openai.APIError
			if !tc.overflow && (!errors.As(err, &api) || api.HTTPStatusCode != 400) {
				t.Errorf("want the 400 APIError: %v", err)
			}
			if n := len(rec.seen()); n != 1 {
				t.Errorf("%d requests, want 1 (never retried)", n)
			}
		})
	}
	t.Run("5xx with an HTML body is a RequestError", func(t *testing.T) {
		_, m, _ := newRecorded(t, answer{status: 502, body: "<html>gateway</html>"})
		_, err := m.Chat(context.Background(), model.Request{Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "hi"}}, Params: model.Params{Sampling: sampling(1, nil)}})
		var re *openai.RequestError
		if !errors.As(err, &re) || re.HTTPStatusCode != 502 {
			t.Fatalf("502: %v", err)
		}
	})
}

// FuzzParseTokenID: ParseTokenID accepts exactly "token_id:" followed by
// the decimal form of a non-negative int32 and never panics.
func FuzzParseTokenID(f *testing.F) {
	for _, s := range []string{"token_id:0", "token_id:151643", "token_id:2147483647", "token_id:2147483648", "token_id:", "token_id:-1", "token_id:1a", "Hello", "token_id:007", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		id, ok := model.ParseTokenID(s)
		if !ok {
			return
		}
		if id < 0 || !strings.HasPrefix(s, "token_id:") {
			t.Fatalf("ParseTokenID(%q) = %d", s, id)
		}
		rest := strings.TrimLeft(strings.TrimPrefix(s, "token_id:"), "0")
		if want := strings.TrimLeft(itoa(id), "0"); rest != want {
			t.Fatalf("ParseTokenID(%q) = %d", s, id)
		}
	})
}

func itoa(n int32) string {
	if n == 0 {
		return "0"
	}
	var b []byte
	for ; n > 0; n /= 10 {
		b = append([]byte{byte('0' + n%10)}, b...)
	}
	return string(b)
}
