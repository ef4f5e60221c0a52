package advantage

import (
	"reflect"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestMessages converts the renderer's OpenAI messages to the nested
// messages column.
func TestMessages(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   []openai.ChatCompletionMessage
		want []shard.Message
		bad  bool
	}{
		{name: "layout", in: []openai.ChatCompletionMessage{
			{Role: "system", Content: "sys"},
			{Role: "assistant", Content: "Thought: a\nAction: click(start_box='(1,2)')"},
			{Role: "user", MultiContent: []openai.ChatMessagePart{
				{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "sha256:aa"}},
				{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: "sha256:bb"}},
				{Type: openai.ChatMessagePartTypeText, Text: "task"},
			}},
		}, want: []shard.Message{
			{Role: "system", Content: []shard.Part{{Type: "text", Text: "sys"}}},
			{Role: "assistant", Content: []shard.Part{{Type: "text", Text: "Thought: a\nAction: click(start_box='(1,2)')"}}},
			{Role: "user", Content: []shard.Part{{Type: "image", Image: "sha256:aa"}, {Type: "image", Image: "sha256:bb"}, {Type: "text", Text: "task"}}},
		}},
		{name: "empty-content", in: []openai.ChatCompletionMessage{{Role: "user"}},
			want: []shard.Message{{Role: "user", Content: []shard.Part{{Type: "text"}}}}},
		{name: "image-without-url", in: []openai.ChatCompletionMessage{{Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeImageURL}}}}, bad: true},
		{name: "both-forms", in: []openai.ChatCompletionMessage{{Role: "user", Content: "x", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: "y"}}}}, bad: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := messages(tc.in)
			if tc.bad {
				if err == nil {
					t.Fatalf("no error for %+v", tc.in)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// TestBaseTokenColumns fills a row from a candidate with token-level data
// (as the agent records it) and from one without.
func TestBaseTokenColumns(t *testing.T) {
	seed := int64(7)
	tr := &traj.Trajectory{ID: "t", Run: "r", Task: traj.TaskRef{ID: "k", App: "A"},
		Models: traj.Models{Planner: traj.ModelRef{Model: "m", Checkpoint: "c", Sampling: &traj.Sampling{
			Temperature: 1, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 512, Seed: &seed, Stop: []string{}}}},
		Steps: []traj.Step{{Candidates: []traj.Candidate{
			{Plan: "p", FinishReason: "stop", PlanTokens: traj.Tokens{Prompt: 900, Completion: 3},
				PlanLogProbs: []float64{-0.1, -0.2, -0.3}, PlanTokenIDs: []int32{5, 6, 7}},
			{Plan: "q"},
		}}}}
	j := &traj.Judgement{}
	r := base(tr, j, 0, 0)
	want := `{"temperature":1,"top_p":1,"top_k":-1,"min_p":0,"repetition_penalty":1,"presence_penalty":0,"frequency_penalty":0,"max_tokens":512,"seed":7,"stop":[]}`
	if r.Sampling == nil || *r.Sampling != want {
		t.Errorf("sampling %v, want %s", r.Sampling, want)
	}
	if !reflect.DeepEqual(r.CompletionTokenIDs, []int32{5, 6, 7}) || len(r.LogProbs) != 3 || r.FinishReason != "stop" ||
		r.CompletionTokens == nil || *r.CompletionTokens != 3 || r.PromptTokens == nil || *r.PromptTokens != 900 {
		t.Errorf("row %+v", r)
	}
	r = base(tr, j, 0, 1)
	if r.CompletionTokenIDs != nil || r.LogProbs != nil || r.CompletionTokens != nil || r.FinishReason != "" {
		t.Errorf("a candidate without token data: row %+v", r)
	}
	tr.Models.Planner.Sampling = nil
	if r := base(tr, j, 0, 0); r.Sampling != nil {
		t.Errorf("sampling %q for a trajectory that recorded none", *r.Sampling)
	}
}
