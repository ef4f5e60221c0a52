package sft

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// sharegptRules checks one JSONL record against the rules of the two
// trainers the dataset is for, and returns what breaks them:
//
// LLaMA-Factory (src/llamafactory/data/converter.py,
// SharegptDatasetConverter, with the tags of our dataset_info.json): a
// first message whose role is the system tag is the system prompt; the
// rest must alternate user (odd positions, 1-based) and assistant (even
// positions) — "Invalid role tag" otherwise — and be of even length —
// "Invalid message count" otherwise —, so the sample ends with the
// assistant's turn, the one learned. mm_plugin.py _validate_messages: the
// number of "<image>" in all messages equals len(images) (and of
// "<video>"/"<audio>" the number of videos/audios: none here). Image paths
// are joined to media_dir (default dataset_dir), so a relative path must
// exist under the dataset folder.
//
// ms-swift (swift/dataset/preprocessor/core.py, _check_messages): roles
// are system/user/assistant/..., contents are not null; "<image>" tags
// mark the images in order (docs Custom-dataset.md, "Multimodal").
func sharegptRules(dir string, raw map[string]json.RawMessage) []string {
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	var msgs []map[string]*string
	if err := json.Unmarshal(raw["messages"], &msgs); err != nil {
		return []string{"messages: " + err.Error()}
	}
	var images []string
	if err := json.Unmarshal(raw["images"], &images); err != nil {
		return []string{"images: " + err.Error()}
	}
	if len(msgs) == 0 {
		return []string{"no messages"}
	}
	for i, m := range msgs {
		if len(m) != 2 || m["role"] == nil || m["content"] == nil {
			bad("message %d has keys %v, want role and content (not null)", i, slices.Sorted(maps.Keys(m)))
			return errs
		}
	}
	rest := msgs
	if *msgs[0]["role"] == "system" {
		rest = msgs[1:]
	}
	if len(rest) == 0 || len(rest)%2 != 0 {
		bad("%d messages after the system message, want an even number > 0", len(rest))
	}
	for i, m := range rest {
		want := "user"
		if i%2 == 1 {
			want = "assistant"
		}
		if *m["role"] != want {
			bad("message %d after the system message is %q, want %q", i, *m["role"], want)
		}
	}
	if r := *msgs[len(msgs)-1]["role"]; r != "assistant" {
		bad("the last message is %q, want assistant", r)
	}
	n := 0
	for i, m := range msgs {
		c := *m["content"]
		n += strings.Count(c, "<image>")
		for _, tag := range []string{"<video>", "<audio>"} {
			if strings.Contains(c, tag) {
				bad("message %d holds %s", i, tag)
			}
		}
		if *m["role"] != "user" && strings.Contains(c, "<image>") {
			bad("message %d (%s) holds <image>; images belong to the user turn", i, *m["role"])
		}
	}
	if n != len(images) {
		bad("%d <image> placeholders, %d images", n, len(images))
	}
	for _, p := range images {
		if filepath.IsAbs(p) || strings.Contains(p, "..") || strings.Contains(p, "\\") {
			bad("image path %q is not a clean relative path", p)
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			bad("image %s: %v", p, err)
		} else if !bytes.HasPrefix(b, []byte("\x89PNG\r\n\x1a\n")) {
			bad("image %s is not a PNG", p)
		}
	}
	return errs
}

// TestAcceptShareGPTRules: every sample of a build (both splits) keeps the
// rules of LLaMA-Factory's sharegpt converter and multimodal plugin and of
// ms-swift's messages format; every record has the same columns (the
// JSON loader infers one schema); dataset_info.json names each split
// with samples, in the sharegpt formatting with role/content tags.
func TestAcceptShareGPTRules(t *testing.T) {
	c := sharedCorpus(t)
	out := filepath.Join(t.TempDir(), "sft")
	buildCLI(t, c.StoreDir(), out, "--val-fraction", "0.5")
	m := readManifest(t, out)
	total := 0
	var cols []string
	for _, split := range []string{SplitTrain, SplitVal} {
		if _, ok := m.Splits[split]; !ok {
			t.Fatalf("split %s has no samples: the test needs both", split)
		}
		for i, raw := range readJSONL(t, filepath.Join(out, split+".jsonl")) {
			total++
			for _, e := range sharegptRules(out, raw) {
				t.Errorf("%s line %d: %s", split, i+1, e)
			}
			var ks []string
			for k := range raw {
				ks = append(ks, k)
			}
			slices.Sort(ks)
			if cols == nil {
				cols = ks
			} else if !slices.Equal(cols, ks) {
				t.Errorf("%s line %d has columns %v, the first record %v", split, i+1, ks, cols)
			}
		}
	}
	if total == 0 || total != m.Counts.Samples {
		t.Fatalf("%d records checked, the manifest counts %d samples", total, m.Counts.Samples)
	}

	info := readDatasetInfo(t, out)
	for _, split := range []string{SplitTrain, SplitVal} {
		d, ok := info[DatasetName(split)]
		if (m.Splits[split].Samples > 0) != ok {
			t.Errorf("dataset_info.json names %s: %v; the split has %d samples", split, ok, m.Splits[split].Samples)
			continue
		}
		if !ok {
			continue
		}
		if d.FileName != split+".jsonl" || d.Formatting != "sharegpt" ||
			d.Columns["messages"] != "messages" || d.Columns["images"] != "images" ||
			d.Tags["role_tag"] != "role" || d.Tags["content_tag"] != "content" || d.Tags["user_tag"] != "user" ||
			d.Tags["assistant_tag"] != "assistant" || d.Tags["system_tag"] != "system" {
			t.Errorf("dataset_info.json %s: %+v", split, d)
		}
		if _, err := os.Stat(filepath.Join(out, d.FileName)); err != nil {
			t.Error(err)
		}
	}
}

// TestShareGPTMapping: the renderer's messages map one to one (text
// parts concatenated, each image part an <image> where it stood, the
// target appended); what is not a sharegpt conversation — several
// assistant turns in a row (the legacy layout), no user turn last — is
// refused.
func TestShareGPTMapping(t *testing.T) {
	img := func(u string) openai.ChatMessagePart {
		return openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: u}}
	}
	text := func(s string) openai.ChatMessagePart {
		return openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: s}
	}
	sys := openai.ChatCompletionMessage{Role: "system", Content: "S"}
	asst := func(s string) openai.ChatCompletionMessage {
		return openai.ChatCompletionMessage{Role: "assistant", Content: s}
	}
	user := func(parts ...openai.ChatMessagePart) openai.ChatCompletionMessage {
		return openai.ChatCompletionMessage{Role: "user", MultiContent: parts}
	}
	cases := []struct {
		name   string
		msgs   []openai.ChatCompletionMessage
		want   []Message // without the target
		images []string
		bad    bool
	}{
		{"first step", []openai.ChatCompletionMessage{sys, user(img("sha256:a"), text("T"))}, []Message{{"system", "S"}, {"user", "<image>T"}}, []string{"sha256:a"}, false},
		{"history in the user turn", []openai.ChatCompletionMessage{sys, user(img("sha256:a"), img("sha256:b"), text("Step 1:\nP1\n\nT"))},
			[]Message{{"system", "S"}, {"user", "<image><image>Step 1:\nP1\n\nT"}}, []string{"sha256:a", "sha256:b"}, false},
		{"parts in their order", []openai.ChatCompletionMessage{sys, user(text("A"), img("sha256:a"), text("B"))}, []Message{{"system", "S"}, {"user", "A<image>B"}}, []string{"sha256:a"}, false},
		{"plain user text", []openai.ChatCompletionMessage{sys, {Role: "user", Content: "T"}}, []Message{{"system", "S"}, {"user", "T"}}, nil, false},
		{"no system", []openai.ChatCompletionMessage{user(text("T"))}, []Message{{"user", "T"}}, nil, false},
		{"alternating turns", []openai.ChatCompletionMessage{sys, user(img("sha256:a")), asst("P"), user(img("sha256:b"), text("T"))},
			[]Message{{"system", "S"}, {"user", "<image>"}, {"assistant", "P"}, {"user", "<image>T"}}, []string{"sha256:a", "sha256:b"}, false},
		{"legacy: plans as assistant turns", []openai.ChatCompletionMessage{sys, asst("P1"), asst("P2"), user(img("sha256:a"), text("T"))}, nil, nil, true},
		{"ends with assistant", []openai.ChatCompletionMessage{sys, user(text("T")), asst("P")}, nil, nil, true},
		{"two user turns", []openai.ChatCompletionMessage{sys, {Role: "user", Content: "x"}, user(text("T"))}, nil, nil, true},
		{"system later", []openai.ChatCompletionMessage{user(text("T")), sys}, nil, nil, true},
		{"empty", nil, nil, nil, true},
		{"unknown part", []openai.ChatCompletionMessage{sys, user(openai.ChatMessagePart{Type: "audio"})}, nil, nil, true},
		// Images belong to the user turn; no text may hold a media tag
		// (prompt.Flatten), the target plan included.
		{"image in the system message", []openai.ChatCompletionMessage{{Role: "system", MultiContent: []openai.ChatMessagePart{img("sha256:a")}}, user(text("T"))}, nil, nil, true},
		{"image in an assistant turn", []openai.ChatCompletionMessage{sys, user(text("T")), {Role: "assistant", MultiContent: []openai.ChatMessagePart{img("sha256:a")}}, user(text("U"))}, nil, nil, true},
		{"<image> in the system text", []openai.ChatCompletionMessage{{Role: "system", Content: "S <image>"}, user(text("T"))}, nil, nil, true},
		{"<image> in a plain user text", []openai.ChatCompletionMessage{sys, {Role: "user", Content: "see <image>"}}, nil, nil, true},
		{"<audio> in an assistant turn", []openai.ChatCompletionMessage{sys, user(text("T")), asst("<audio>"), user(text("U"))}, nil, nil, true},
		{"a tag across two texts", []openai.ChatCompletionMessage{sys, user(text("<vid"), text("eo>"))}, nil, nil, true},
	}
	t.Run("<video> in the target", func(t *testing.T) {
		if got, _, err := ShareGPT([]openai.ChatCompletionMessage{sys, user(text("T"))}, "click <video>"); err == nil {
			t.Fatalf("accepted: %q", got)
		}
	})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, imgs, err := ShareGPT(c.msgs, "TARGET")
			if c.bad {
				if err == nil {
					t.Fatalf("accepted: %q", got)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			want := append(slices.Clone(c.want), Message{"assistant", "TARGET"})
			if !slices.Equal(got, want) || !slices.Equal(imgs, c.images) {
				t.Fatalf("got %q %q, want %q %q", got, imgs, want, c.images)
			}
		})
	}
}

// datasetInfoEntry is one dataset of dataset_info.json as LLaMA-Factory
// reads it.
type datasetInfoEntry struct {
	FileName   string            `json:"file_name"`
	Formatting string            `json:"formatting"`
	Columns    map[string]string `json:"columns"`
	Tags       map[string]string `json:"tags"`
}

// readDatasetInfo reads the dataset_info.json of the dataset in out.
func readDatasetInfo(t *testing.T, out string) map[string]datasetInfoEntry {
	t.Helper()
	body, err := os.ReadFile(filepath.Join(out, DatasetInfoName))
	if err != nil {
		t.Fatal(err)
	}
	var info map[string]datasetInfoEntry
	if err := json.Unmarshal(body, &info); err != nil {
		t.Fatal(err)
	}
	return info
}
