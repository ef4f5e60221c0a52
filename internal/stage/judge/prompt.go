package judge

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"text/template"

	openai "github.com/sashabaranov/go-openai"

	"github.com/codapipe/codapipe/pkg/traj"
)

//go:embed prompts
var shipped embed.FS

// PromptFile is the judge's prompt template file, in the embedded
// defaults and in a folder given with --prompts.
const PromptFile = "judge.tmpl"

// The templates a prompt file must define.
var promptParts = []string{"system", "intro", "frame", "outro"}

// Prompt is the judge's prompt template: a system message and a user
// message of an intro, one labelled image per frame and an outro; and how
// its answers are read.
type Prompt struct {
	t *template.Template
	// Answer is how the answers are read (the set's answer.json, or
	// DefaultAnswerFormat).
	Answer AnswerFormat
	// SHA256 is the hex SHA-256 of the template file, followed by the
	// answer.json when the set has one (JudgeVersion).
	SHA256 string
	// Source is where the template came from: its path, or "embedded"
	// or "embedded:<name>" for a set shipped with codapipe.
	Source string
}

// PromptSets are the names of the prompt sets shipped with codapipe
// (--prompts NAME; their files are internal/stage/judge/prompts/<name>/):
// "coda" (the default: frame captions and a result dict), "keypoints"
// (key points of the task, then a "Status:" line), "yesno" (a short
// review ending in a yes/no line) and "score" (a 1-5 score in JSON).
var PromptSets = []string{"coda", "keypoints", "yesno", "score"}

// PromptData is what the "intro" and "outro" templates see.
type PromptData struct {
	App         string
	Instruction string
	Steps       int    // steps in the trajectory
	Frames      int    // frames shown
	Subsampled  bool   // some steps' screenshots are left out
	Outcome     string // how the episode ended: finished, answered, failed, step_limit
	Answered    bool   // the agent gave an answer (a question task)
	Answer      string
}

// FrameData is what the "frame" template sees.
type FrameData struct {
	Frame
	Index         int // 1-based position among the frames shown
	Width, Height int // the image's size as sent
}

// LoadPrompt reads a prompt set: PromptFile and, when there is one,
// AnswerFile from the folder dir, or the shipped set of that name
// (PromptSets; "" is "coda"). The template must define system, intro,
// frame and outro.
func LoadPrompt(dir string) (*Prompt, error) {
	var (
		fsys fs.FS
		src  string
	)
	switch {
	case dir == "" || dir == "coda":
		fsys, src = mustSub(shipped, "prompts"), "embedded"
	case slices.Contains(PromptSets, dir) && !isDir(dir):
		fsys, src = mustSub(shipped, "prompts/"+dir), "embedded:"+dir
	default:
		if !isDir(dir) {
			return nil, fmt.Errorf("judge: prompts %q: not a folder, nor a shipped prompt set (%s)", dir, strings.Join(PromptSets, ", "))
		}
		fsys, src = os.DirFS(dir), filepath.Join(dir, PromptFile)
	}
	b, err := fs.ReadFile(fsys, PromptFile)
	if err != nil {
		return nil, fmt.Errorf("judge: prompt: %w", err)
	}
	name, answerName := src, filepath.Join(filepath.Dir(src), AnswerFile)
	if strings.HasPrefix(src, "embedded") {
		name, answerName = PromptFile+" ("+src+")", AnswerFile+" ("+src+")"
	}
	t, err := template.New(PromptFile).Option("missingkey=error").Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("judge: prompt %s: %w", name, err)
	}
	var missing []string
	for _, part := range promptParts {
		if t.Lookup(part) == nil {
			missing = append(missing, fmt.Sprintf("{{define %q}}", part))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("judge: prompt %s: missing %s", name, strings.Join(missing, ", "))
	}
	h := sha256.New()
	h.Write(b)
	format := DefaultAnswerFormat()
	switch ab, err := fs.ReadFile(fsys, AnswerFile); {
	case err == nil:
		if format, err = ParseAnswerFormat(ab, answerName); err != nil {
			return nil, err
		}
		// The answer format is part of the judge version: the same
		// answers read another way are other judgements.
		h.Write([]byte("\x00" + AnswerFile + "\x00"))
		h.Write(ab)
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("judge: answer format: %w", err)
	}
	p := &Prompt{t: t, Answer: format, SHA256: hex.EncodeToString(h.Sum(nil)), Source: src}
	// Render a sample so that a template error shows at load, not per
	// trajectory.
	if _, err := p.Messages(PromptData{App: "App", Instruction: "Do it.", Steps: 1, Frames: 1, Outcome: "finished"},
		[]FrameData{{Frame: Frame{Step: 1, Final: true}, Index: 1, Width: 1, Height: 1}}, [][]byte{{}}); err != nil {
		return nil, fmt.Errorf("judge: prompt %s: %w", name, err)
	}
	return p, nil
}

func isDir(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.IsDir()
}

func mustSub(f fs.FS, dir string) fs.FS {
	sub, err := fs.Sub(f, dir)
	if err != nil {
		panic(err)
	}
	return sub
}

// Data is the prompt data of trajectory t shown in frames.
func Data(t *traj.Trajectory, frames []Frame) PromptData {
	shown := 0
	for _, f := range frames {
		if !f.Final {
			shown++
		}
	}
	d := PromptData{
		App: t.Task.App, Instruction: t.Task.Instruction, Steps: len(t.Steps), Frames: len(frames),
		Subsampled: shown < len(t.Steps), Outcome: string(t.Outcome.Kind),
	}
	if t.Outcome.Kind == traj.OutcomeAnswered {
		d.Answered, d.Answer = true, singleLine(t.Outcome.Answer)
	}
	return d
}

// singleLine keeps an answer on the one line the prompt gives it.
func singleLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Messages renders the chat messages of one judge call: the system
// message, and a user message with the intro, then each frame's label
// followed by its image (PNG bytes, sent as a data URI), then the outro.
func (p *Prompt) Messages(d PromptData, frames []FrameData, images [][]byte) ([]openai.ChatCompletionMessage, error) {
	if len(frames) != len(images) {
		return nil, fmt.Errorf("judge: %d frames but %d images", len(frames), len(images))
	}
	sys, err := p.exec("system", d)
	if err != nil {
		return nil, err
	}
	intro, err := p.exec("intro", d)
	if err != nil {
		return nil, err
	}
	parts := []openai.ChatMessagePart{{Type: openai.ChatMessagePartTypeText, Text: intro}}
	for i, f := range frames {
		label, err := p.exec("frame", f)
		if err != nil {
			return nil, err
		}
		parts = append(parts,
			openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: label},
			openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{
				URL: "data:image/png;base64," + base64.StdEncoding.EncodeToString(images[i]), Detail: openai.ImageURLDetailHigh,
			}})
	}
	outro, err := p.exec("outro", d)
	if err != nil {
		return nil, err
	}
	if outro != "" {
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: outro})
	}
	return []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: sys},
		{Role: openai.ChatMessageRoleUser, MultiContent: parts},
	}, nil
}

func (p *Prompt) exec(name string, data any) (string, error) {
	var b bytes.Buffer
	if err := p.t.ExecuteTemplate(&b, name, data); err != nil {
		return "", fmt.Errorf("judge: prompt template %q: %w", name, err)
	}
	s := strings.TrimSpace(b.String())
	if s == "" && name != "outro" {
		return "", fmt.Errorf("judge: prompt template %q renders nothing", name)
	}
	return s, nil
}

// wireMessage and wirePart are the OpenAI chat message format as plain
// structs: encoding them costs one pass over the image data, where
// go-openai's own MarshalJSON encodes and then re-scans every message.
type wireMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"` // a string or []wirePart
}

type wirePart struct {
	Type     openai.ChatMessagePartType  `json:"type"`
	Text     string                      `json:"text,omitempty"`
	ImageURL *openai.ChatMessageImageURL `json:"image_url,omitempty"`
}

// EncodeMessages encodes chat messages (text content, or text and image
// parts) as the JSON array of a chat completion request.
func EncodeMessages(msgs []openai.ChatCompletionMessage) ([]byte, error) {
	out := make([]wireMessage, len(msgs))
	for i, m := range msgs {
		out[i].Role = m.Role
		if len(m.MultiContent) == 0 {
			out[i].Content = m.Content
			continue
		}
		parts := make([]wirePart, len(m.MultiContent))
		for j, p := range m.MultiContent {
			if p.Type == openai.ChatMessagePartTypeText && p.Text == "" {
				return nil, fmt.Errorf("judge: message %d, part %d: empty text", i, j)
			}
			parts[j] = wirePart{Type: p.Type, Text: p.Text, ImageURL: p.ImageURL}
		}
		out[i].Content = parts
	}
	return json.Marshal(out)
}

var errNoFrames = errors.New("the trajectory has no screenshot to show the judge")
