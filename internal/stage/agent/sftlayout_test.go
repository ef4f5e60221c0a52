package agent_test

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/stage/sft"
	openai "github.com/sashabaranov/go-openai"
)

// Acceptance (issue 22, item 6): what the agent sends the planner at step
// t and the SFT sample of step t are the same message sequence — same
// roles, same texts, the images in the same order — the target aside.
// The planner requests are captured on the wire in front of the simulated
// planner endpoint during real simulated episodes; the samples are made
// by sft.PlannerSample, the function the SFT builder makes every sample
// with, from the finished trajectory and its prompt set fetched from the
// blob store. The wire messages are mapped here on their own terms (text
// parts concatenated, each image an <image> and its SHA-256), so the test
// does not lean on sft.ShareGPT to check sft.ShareGPT.
func TestAcceptServedLayoutIsTheSFTLayout(t *testing.T) {
	eps, _ := runCaptured(t, 2, 0.8, 3, 1)
	withHistory := 0
	for _, ep := range eps {
		tr, sent, prompts := ep.tr, ep.sent, ep.prompts
		for i := range tr.Steps {
			s := &tr.Steps[i]
			if s.Executed < 0 {
				continue // no sample for a step that executed nothing
			}
			wireMsgs, wireImgs := wireSample(t, sent[i])
			msgs, imgs, _, err := sft.PlannerSample(prompts, tr, i)
			if err != nil {
				t.Fatalf("%s step %d: %v", tr.ID, i, err)
			}
			if len(msgs) == 0 || msgs[len(msgs)-1] != (sft.Message{Role: sft.RoleAssistant, Content: s.Candidates[s.Executed].Plan}) {
				t.Fatalf("%s step %d: the sample does not end with the executed plan: %q", tr.ID, i, msgs)
			}
			if got := msgs[:len(msgs)-1]; !slices.Equal(got, wireMsgs) {
				t.Fatalf("%s step %d: the SFT sample differs from what the planner was sent:\nsample %q\nsent   %q", tr.ID, i, got, wireMsgs)
			}
			if !slices.Equal(imgs, wireImgs) {
				t.Fatalf("%s step %d: images %v, the planner was sent %v", tr.ID, i, imgs, wireImgs)
			}
			if i > 0 {
				withHistory++
				prev := &tr.Steps[i-1]
				if prev.Executed < 0 {
					continue
				}
				plan := prev.Candidates[prev.Executed].Plan
				if plan != "" && !strings.Contains(wireMsgs[len(wireMsgs)-1].Content, plan) {
					t.Errorf("%s step %d: the user turn sent does not show the previous plan %q", tr.ID, i, plan)
				}
			}
		}
	}
	if withHistory == 0 {
		t.Fatal("no step with a history: the test needs multi-step episodes")
	}
	t.Logf("%d steps with a history sent as the SFT sample lays them out", withHistory)
}

// wireSample maps messages as the planner endpoint received them onto
// sharegpt messages: each message's text parts concatenated, each image
// part an <image>, the images as "sha256:<hex>" of their decoded bytes.
func wireSample(t *testing.T, msgs []openai.ChatCompletionMessage) ([]sft.Message, []string) {
	t.Helper()
	var out []sft.Message
	var images []string
	for _, m := range msgs {
		text := m.Content
		for _, p := range m.MultiContent {
			if p.ImageURL == nil {
				text += p.Text
				continue
			}
			b64, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,")
			if !ok {
				t.Fatalf("an image sent is not a PNG data URI: %.40q", p.ImageURL.URL)
			}
			png, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(png)
			images = append(images, prompt.RefScheme+hex.EncodeToString(sum[:]))
			text += sft.ImagePlaceholder
		}
		out = append(out, sft.Message{Role: m.Role, Content: text})
	}
	return out, images
}
