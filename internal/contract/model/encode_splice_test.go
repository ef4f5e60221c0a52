package model

import (
	"bytes"
	"encoding/json"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/codapipe/codapipe/pkg/traj"
)

// TestEncodeSplicesMessages: the body Encode writes with the messages
// spliced in is byte for byte the body encoding them as a RawMessage
// field gives, whatever the model name and the messages hold.
func TestEncodeSplicesMessages(t *testing.T) {
	img := DataURI(bytes.Repeat([]byte{0x89, 'P', 'N', 'G', 0, 1, 2}, 1000))
	cases := []struct {
		name, model string
		msgs        []openai.ChatCompletionMessage
	}{
		{"text", "m", []openai.ChatCompletionMessage{{Role: "user", Content: "click <OK> & \"go\"\n\u2028"}}},
		{"image", `odd,"messages":0,"name`, []openai.ChatCompletionMessage{{Role: "system", Content: "s"}, {Role: "user", MultiContent: []openai.ChatMessagePart{
			{Type: openai.ChatMessagePartTypeText, Text: `,"messages":0,`},
			{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: img}}}}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cl, err := New(Config{BaseURL: "http://127.0.0.1:1/v1", Model: c.model}, nil)
			if err != nil {
				t.Fatal(err)
			}
			seed := int64(7)
			p := Params{Sampling: traj.Sampling{Temperature: 0.5, TopP: 1, TopK: -1, RepetitionPenalty: 1, MaxTokens: 9, Seed: &seed}}
			got, err := cl.Encode(Request{Messages: c.msgs, N: 2, Params: p})
			if err != nil {
				t.Fatal(err)
			}
			raw, err := json.Marshal(c.msgs)
			if err != nil {
				t.Fatal(err)
			}
			want, err := cl.Encode(Request{Encoded: raw, N: 2, Params: p})
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Errorf("spliced body differs:\n%.300s\nwant\n%.300s", got, want)
			}
		})
	}
}
