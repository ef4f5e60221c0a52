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

	"github.com/codapipe/codapipe/internal/model"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/pkg/traj"
	openai "github.com/sashabaranov/go-openai"
)

func TestModelRetriesAndDeadlines(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	msgs := []openai.ChatCompletionMessage{{Role: "user", Content: "Thought: Click the 'ChimeraX command line' field."}}
	start := func(f fault.Faults) string {
		mc := simmodels.DefaultConfig()
		mc.Clock = fault.Clock{Scale: 0}
		mc.Executor.Faults = f
		var s *simmodels.Servers
		m, err := simmodels.New(mc)
		if err == nil {
			s, err = m.Start(ctx)
		}
		if err != nil {
			t.Fatal(err)
		}
		return s.ExecutorURL
	}
	t.Run("5xx then success", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{ErrorProb: 0.5}), Model: simmodels.DefaultExecutorModel, Attempts: 12, Backoff: time.Millisecond}, nil)
		for i := range 10 {
			seed := int64(i)
			if _, err := m.Sample(ctx, msgs, 1, model.Params{Sampling: traj.Sampling{Temperature: 1, Seed: &seed}}); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
	})
	t.Run("always 500", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{ErrorProb: 1}), Model: simmodels.DefaultExecutorModel, Attempts: 3, Backoff: time.Millisecond}, nil)
		_, err := m.Sample(ctx, msgs, 1, model.Params{Sampling: traj.Sampling{Temperature: 1}})
		var api *openai.APIError
		if !errors.As(err, &api) || api.HTTPStatusCode != 500 {
			t.Fatalf("want a 500 APIError after the retries, got %v", err)
		}
	})
	t.Run("hang hits the attempt deadline", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{HangProb: 1}), Model: simmodels.DefaultExecutorModel, Attempts: 2, AttemptTimeout: 200 * time.Millisecond, Backoff: time.Millisecond}, nil)
		t0 := time.Now()
		_, err := m.Sample(ctx, msgs, 1, model.Params{Sampling: traj.Sampling{Temperature: 1}})
		if err == nil {
			t.Fatal("a hung endpoint answered")
		}
		if el := time.Since(t0); el > 30*time.Second {
			t.Fatalf("a hung endpoint held the call for %v", el)
		}
	})
	t.Run("n is honoured", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{}), Model: simmodels.DefaultExecutorModel}, nil)
		got, err := m.Sample(ctx, msgs, 5, model.Params{Sampling: traj.Sampling{Temperature: 1}})
		if err != nil || len(got) != 5 {
			t.Fatalf("%d choices, %v", len(got), err)
		}
	})
	t.Run("bad request is not retried", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{}), Model: simmodels.DefaultExecutorModel, Attempts: 5, Backoff: time.Hour}, nil)
		_, err := m.Sample(ctx, nil, 1, model.Params{Sampling: traj.Sampling{Temperature: 1}}) // no messages: 400
		var api *openai.APIError
		if !errors.As(err, &api) || api.HTTPStatusCode != 400 {
			t.Fatalf("want a 400 at once, got %v", err)
		}
	})
}

// TestCompleteEncoded: a request with pre-encoded messages carries them
// once, with the other fields as Complete sends them; 429 is retried;
// error answers come back as *openai.APIError with their status, and a
// non-JSON error body as *openai.RequestError.
func TestCompleteEncoded(t *testing.T) {
	var mu sync.Mutex
	var bodies [][]byte
	status := []int{429, 200}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, b)
		st := 200
		if len(status) > 0 {
			st, status = status[0], status[1:]
		}
		mu.Unlock()
		if r.URL.Path != "/v1/chat/completions" || r.Header.Get("Authorization") != "Bearer k" {
			http.Error(w, "wrong path or key", 404)
			return
		}
		switch st {
		case 200:
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"x","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}]}`)
		case 429:
			w.WriteHeader(429)
			io.WriteString(w, `{"error":{"message":"slow down","type":"rate_limit_error","code":"rate_limit_exceeded"}}`)
		case 400:
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"bad","type":"invalid_request_error"}}`)
		default:
			w.WriteHeader(st)
			io.WriteString(w, "<html>gateway</html>")
		}
	}))
	defer srv.Close()
	m, err := model.New(model.Config{BaseURL: srv.URL + "/v1/", Model: "judge-m", APIKey: "k", Attempts: 3, Backoff: time.Millisecond}, nil)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	msgs := `[{"role":"user","content":[{"type":"text","text":"hi"}]}]`
	seed := 7
	resp, err := m.CompleteEncoded(ctx, openai.ChatCompletionRequest{Temperature: 1, TopP: 0.6, Seed: &seed, User: "t/v1"}, []byte(msgs))
	if err != nil || len(resp.Choices) != 1 || resp.Choices[0].Message.Content != "ok" {
		t.Fatalf("%+v %v", resp, err)
	}
	mu.Lock()
	seen := append([][]byte(nil), bodies...)
	mu.Unlock()
	if len(seen) != 2 {
		t.Fatalf("%d requests, want 2 (a 429, then the answer)", len(seen))
	}
	var got map[string]json.RawMessage
	if err := json.Unmarshal(seen[1], &got); err != nil {
		t.Fatalf("body is not JSON: %v\n%s", err, seen[1])
	}
	if string(got["messages"]) != msgs || string(got["model"]) != `"judge-m"` || string(got["seed"]) != "7" ||
		string(got["user"]) != `"t/v1"` || string(got["top_p"]) != "0.6" || string(got["temperature"]) != "1" {
		t.Fatalf("body %s", seen[1])
	}
	if n := strings.Count(string(seen[1]), `"messages"`); n != 1 {
		t.Fatalf("messages appear %d times: %s", n, seen[1])
	}
	if _, err := m.CompleteEncoded(ctx, openai.ChatCompletionRequest{Messages: []openai.ChatCompletionMessage{{Role: "user"}}}, []byte(msgs)); err == nil {
		t.Fatal("messages given twice must be refused")
	}

	setStatus := func(st ...int) {
		mu.Lock()
		status = st
		mu.Unlock()
	}
	setStatus(400)
	_, err = m.CompleteEncoded(ctx, openai.ChatCompletionRequest{}, []byte(msgs))
	var api *openai.APIError
	if !errors.As(err, &api) || api.HTTPStatusCode != 400 || api.Message != "bad" {
		t.Fatalf("400: %v", err)
	}
	setStatus(502, 502, 502)
	_, err = m.CompleteEncoded(ctx, openai.ChatCompletionRequest{}, []byte(msgs))
	var re *openai.RequestError
	if !errors.As(err, &re) || re.HTTPStatusCode != 502 {
		t.Fatalf("502 with an HTML body: %v", err)
	}
}
