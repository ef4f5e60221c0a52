package model_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/model"
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
			if _, err := m.Sample(ctx, msgs, 1, model.Params{Sampling: sampling(1, &seed)}); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
	})
	t.Run("always 500", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{ErrorProb: 1}), Model: simmodels.DefaultExecutorModel, Attempts: 3, Backoff: time.Millisecond}, nil)
		_, err := m.Sample(ctx, msgs, 1, model.Params{Sampling: sampling(1, nil)})
		var api *openai.APIError
		if !errors.As(err, &api) || api.HTTPStatusCode != 500 {
			t.Fatalf("want a 500 APIError after the retries, got %v", err)
		}
	})
	t.Run("hang hits the attempt deadline", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{HangProb: 1}), Model: simmodels.DefaultExecutorModel, Attempts: 2, AttemptTimeout: 200 * time.Millisecond, Backoff: time.Millisecond}, nil)
		t0 := time.Now()
		_, err := m.Sample(ctx, msgs, 1, model.Params{Sampling: sampling(1, nil)})
		if err == nil {
			t.Fatal("a hung endpoint answered")
		}
		if el := time.Since(t0); el > 30*time.Second {
			t.Fatalf("a hung endpoint held the call for %v", el)
		}
	})
	t.Run("n is honoured", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{}), Model: simmodels.DefaultExecutorModel}, nil)
		got, err := m.Sample(ctx, msgs, 5, model.Params{Sampling: sampling(1, nil)})
		if err != nil || len(got) != 5 {
			t.Fatalf("%d choices, %v", len(got), err)
		}
	})
	t.Run("bad request is not retried", func(t *testing.T) {
		m, _ := model.New(model.Config{BaseURL: start(fault.Faults{}), Model: simmodels.DefaultExecutorModel, Attempts: 5, Backoff: time.Hour}, nil)
		_, err := m.Sample(ctx, msgs, 1, model.Params{Sampling: sampling(3, nil)}) // temperature above the server's 2: 400
		var api *openai.APIError
		if !errors.As(err, &api) || api.HTTPStatusCode != 400 {
			t.Fatalf("want a 400 at once, got %v", err)
		}
	})
}

// sampling is a complete, valid set of sampling parameters at temperature
// temp.
func sampling(temp float64, seed *int64) traj.Sampling {
	return traj.Sampling{Temperature: temp, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 256, Seed: seed}
}
