package models

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/pkg/traj"
)

// vllmAnswer is a chat completion answer with vLLM's token-level fields
// (ChatCompletionResponse and ChatCompletionResponseChoice of
// vllm/entrypoints/openai/chat_completion/protocol.py, vllm-project/vllm
// commit d5dba2d7b0ab9b98096560c69db7126b54b14d79).
type vllmAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
		FinishReason string `json:"finish_reason"`
		Logprobs     *struct {
			Content []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
		TokenIDs []int `json:"token_ids"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	PromptTokenIDs []int `json:"prompt_token_ids"`
}

// postRaw sends body (a JSON object; "messages" are added) to the
// planner and decodes the answer.
func postRaw(t *testing.T, url string, msgs json.RawMessage, fields map[string]any) (int, http.Header, []byte) {
	t.Helper()
	req := map[string]any{"model": DefaultPlannerModel, "messages": msgs}
	for k, v := range fields {
		req[k] = v
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Post(url+"/chat/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, out
}

func plannerMessages(t *testing.T, tm *testModels) json.RawMessage {
	t.Helper()
	task := mustTask(t, tm.m, anyTask)
	shot := pngWithState(t, desktop.ScreenW, desktop.ScreenH, &desktop.State{App: taskApp(task)})
	b, err := json.Marshal(plannerRequest(taskInstruction(task), nil, shot).Messages)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestModelsGenerationConfig: like vLLM, the simulated planner takes
// what a request leaves out from its model's generation config
// (Qwen2.5-VL's top_k 1 by default), so a client that does not send top_k
// gets identical plans; top_k -1 with temperature 1 samples.
func TestModelsGenerationConfig(t *testing.T) {
	cfg := DefaultConfig()
	cfg.Clock = fault.Clock{Scale: 0}
	tm := startModels(t, cfg)
	noGen := fastConfig() // no generation config
	tmNoGen := startModels(t, noGen)
	msgs := plannerMessages(t, tm)
	for _, tc := range []struct {
		name     string
		tm       *testModels
		fields   map[string]any
		distinct bool // at least two different plans among 8
	}{
		{"temperature and top_p only: top_k 1 from the generation config", tm, map[string]any{"temperature": 1, "top_p": 0.9, "max_tokens": 1500}, false},
		{"nothing sent: greedy from the generation config", tm, map[string]any{}, false},
		{"explicit top_k -1, temperature 1", tm, map[string]any{"temperature": 1, "top_p": 0.9, "top_k": -1, "max_tokens": 1500}, true},
		{"explicit top_k 1", tm, map[string]any{"temperature": 1, "top_p": 0.9, "top_k": 1}, false},
		{"explicit temperature 0", tm, map[string]any{"temperature": 0, "top_p": 1, "top_k": -1}, false},
		{"no generation config, top_k left out", tmNoGen, map[string]any{"temperature": 1, "top_p": 0.9}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.fields["n"] = 8
			st, _, body := postRaw(t, tc.tm.srv.PlannerURL, msgs, tc.fields)
			if st != 200 {
				t.Fatalf("HTTP %d: %s", st, body)
			}
			var a vllmAnswer
			if err := json.Unmarshal(body, &a); err != nil {
				t.Fatal(err)
			}
			plans := map[string]bool{}
			for _, c := range a.Choices {
				plans[c.Message.Content] = true
			}
			if len(a.Choices) != 8 || (len(plans) >= 2) != tc.distinct {
				t.Fatalf("%d choices, %d different plans; want distinct=%v", len(a.Choices), len(plans), tc.distinct)
			}
		})
	}
}

// askPlanner asks the simulated planner for 4 sampled answers (fields
// added to the request) and decodes the answer in vLLM's shape.
func askPlanner(t *testing.T, tm *testModels, msgs json.RawMessage, fields map[string]any) vllmAnswer {
	t.Helper()
	fields["n"], fields["temperature"], fields["top_k"] = 4, 1, -1
	st, _, body := postRaw(t, tm.srv.PlannerURL, msgs, fields)
	if st != 200 {
		t.Fatalf("HTTP %d: %s", st, body)
	}
	var a vllmAnswer
	if err := json.Unmarshal(body, &a); err != nil {
		t.Fatal(err)
	}
	return a
}

// TestModelsEOS: the simulated planner ends its token ids as vLLM does
// (vllm/v1/engine/detokenizer.py keeps the token that stopped a request in
// token_ids, and so in logprobs, but leaves it out of the text): with
// finish_reason "stop" the last id is EOS (SimEOSID, "<|im_end|>"), or the
// last token of the stop string that ended the answer (then no EOS); with
// "length" the ids are max_tokens long and hold no EOS. The text never
// holds EOS, nor a stop string.
func TestModelsEOS(t *testing.T) {
	tm := startModels(t, fastConfig())
	msgs := plannerMessages(t, tm)
	for _, tc := range []struct {
		name   string
		fields map[string]any
		finish string
		eos    bool
	}{
		{"stop by EOS", map[string]any{}, "stop", true},
		{"stop string", map[string]any{"stop": []string{"Action"}}, "stop", false},
		{"length", map[string]any{"max_tokens": 3}, "length", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for k, v := range map[string]any{"logprobs": true, "return_token_ids": true, "return_tokens_as_token_ids": true} {
				tc.fields[k] = v
			}
			a := askPlanner(t, tm, msgs, tc.fields)
			for i, c := range a.Choices {
				ids := c.TokenIDs
				if c.FinishReason != tc.finish || len(ids) == 0 || len(ids) != len(c.Logprobs.Content) {
					t.Fatalf("choice %d: finish %q, %d ids, %d logprobs; want finish %q", i, c.FinishReason, len(ids), len(c.Logprobs.Content), tc.finish)
				}
				last := ids[len(ids)-1]
				if (last == SimEOSID) != tc.eos || slices.Index(ids, SimEOSID) < len(ids)-1 && slices.Contains(ids, SimEOSID) {
					t.Errorf("choice %d: ids end with %d (EOS %d), want EOS last: %v", i, last, SimEOSID, tc.eos)
				}
				if lt := c.Logprobs.Content[len(ids)-1].Token; lt != fmt.Sprintf("token_id:%d", last) {
					t.Errorf("choice %d: the last logprob is for %q, the last id is %d", i, lt, last)
				}
				if strings.Contains(c.Message.Content, SimEOS) || (tc.name == "stop string" && strings.Contains(c.Message.Content, "Action")) {
					t.Errorf("choice %d: the text %q holds the token that stopped it", i, c.Message.Content)
				}
				if tc.finish == "length" && len(ids) != 3 {
					t.Errorf("choice %d: %d ids at max_tokens 3", i, len(ids))
				}
			}
		})
	}
}

// TestModelsTokenIDs: with logprobs, return_token_ids and
// return_tokens_as_token_ids the simulated endpoints answer in vLLM's
// shape: per choice "token_ids" as many as the logprob entries, each
// logprob token "token_id:N" with N its id, finish_reason, usage
// completion tokens the sum of the choices' ids, and the response's
// "prompt_token_ids" as many as the prompt tokens.
func TestModelsTokenIDs(t *testing.T) {
	tm := startModels(t, fastConfig())
	msgs := plannerMessages(t, tm)
	for _, tc := range []struct {
		name          string
		fields        map[string]any
		ids, tokenIDs bool
	}{
		{"ids and tokens as ids", map[string]any{"logprobs": true, "top_logprobs": 0, "return_token_ids": true, "return_tokens_as_token_ids": true}, true, true},
		{"ids only", map[string]any{"logprobs": true, "return_token_ids": true}, true, false},
		{"tokens as ids only (older vLLM)", map[string]any{"logprobs": true, "return_tokens_as_token_ids": true}, false, true},
		{"short answers", map[string]any{"logprobs": true, "return_token_ids": true, "max_tokens": 3}, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := askPlanner(t, tm, msgs, tc.fields)
			sum := 0
			for i, c := range a.Choices {
				if c.Logprobs == nil || len(c.Logprobs.Content) == 0 || c.FinishReason == "" {
					t.Fatalf("choice %d without logprobs or finish_reason: %+v", i, c)
				}
				if tc.ids != (c.TokenIDs != nil) || (tc.ids && len(c.TokenIDs) != len(c.Logprobs.Content)) {
					t.Errorf("choice %d: %d token ids for %d logprobs", i, len(c.TokenIDs), len(c.Logprobs.Content))
				}
				for k, lp := range c.Logprobs.Content {
					id, ok := model.ParseTokenID(lp.Token)
					if ok != tc.tokenIDs || (ok && tc.ids && int(id) != c.TokenIDs[k]) {
						t.Errorf("choice %d token %d: %q (ids %v)", i, k, lp.Token, c.TokenIDs)
					}
				}
				if mt, ok := tc.fields["max_tokens"]; ok && c.FinishReason != "length" && len(c.Logprobs.Content) > mt.(int) {
					t.Errorf("choice %d: %d tokens at max_tokens %v, finish %q", i, len(c.Logprobs.Content), mt, c.FinishReason)
				}
				sum += len(c.Logprobs.Content)
			}
			if a.Usage.CompletionTokens != sum {
				t.Errorf("usage.completion_tokens %d, the choices have %d", a.Usage.CompletionTokens, sum)
			}
			if tc.ids != (len(a.PromptTokenIDs) == a.Usage.PromptTokens) {
				t.Errorf("%d prompt token ids for %d prompt tokens", len(a.PromptTokenIDs), a.Usage.PromptTokens)
			}
		})
	}
}

// TestModelsContextLengthAndRetryAfter: with max_model_len a request that
// does not fit answers 400 with vLLM's context-length message (the client
// reads it as model.ErrContextOverflow, without retrying); the rate-limit
// fault answers 429 with a Retry-After header. OnRequest sees every body.
func TestModelsContextLengthAndRetryAfter(t *testing.T) {
	cfg := fastConfig()
	cfg.Planner.MaxModelLen = 2000
	var mu sync.Mutex
	var seenKinds []string
	cfg.OnRequest = func(kind string, body []byte) {
		mu.Lock()
		seenKinds = append(seenKinds, kind)
		mu.Unlock()
	}
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), seenKinds...)
	}
	tm := startModels(t, cfg)
	msgs := plannerMessages(t, tm)
	st, _, body := postRaw(t, tm.srv.PlannerURL, msgs, map[string]any{"max_tokens": 1500, "top_k": -1})
	if st != 400 || !strings.Contains(string(body), "maximum context length is 2000 tokens") {
		t.Fatalf("HTTP %d: %s", st, body)
	}
	st, _, body = postRaw(t, tm.srv.PlannerURL, json.RawMessage(`[{"role":"user","content":"hi"}]`), map[string]any{"max_tokens": 10})
	if st != 200 {
		t.Fatalf("a short request: HTTP %d: %s", st, body)
	}
	c, err := model.New(model.Config{BaseURL: tm.srv.PlannerURL, Model: DefaultPlannerModel, Attempts: 3}, nil)
	if err != nil {
		t.Fatal(err)
	}
	before := len(seen())
	sp := traj.Sampling{Temperature: 1, TopP: 0.9, TopK: -1, RepetitionPenalty: 1, MaxTokens: 1500}
	_, err = c.Chat(context.Background(), model.Request{Encoded: msgs, Params: model.Params{Sampling: sp}})
	if !errors.Is(err, model.ErrContextOverflow) || len(seen()) != before+1 {
		t.Fatalf("err %v after %d requests, want ErrContextOverflow after 1", err, len(seen())-before)
	}
	if got := fmt.Sprint(seen()); got != "[planner planner planner]" {
		t.Errorf("OnRequest saw %v", got)
	}

	rl := fastConfig()
	rl.Planner.Faults.RateLimitProb = 1
	tmRL := startModels(t, rl)
	st, h, _ := postRaw(t, tmRL.srv.PlannerURL, msgs, map[string]any{})
	if st != 429 || h.Get("Retry-After") == "" {
		t.Fatalf("HTTP %d, Retry-After %q", st, h.Get("Retry-After"))
	}
}
