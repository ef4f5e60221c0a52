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
	"strings"
	"text/template"

	openai "github.com/sashabaranov/go-openai"

	"github.com/codapipe/codapipe/pkg/traj"
)

//go:embed prompts/judge.tmpl
var defaultPrompt embed.FS

// PromptFile is the judge's prompt template file, in the embedded
// defaults and in a folder given with --prompts.
const PromptFile = "judge.tmpl"

// The templates a prompt file must define.
var promptParts = []string{"system", "intro", "frame", "outro"}

// Prompt is the judge's prompt template: a system message and a user
// message of an intro, one labelled image per frame and an outro.
type Prompt struct {
	t *template.Template
	// SHA256 is the hex SHA-256 of the template file (JudgeVersion).
	SHA256 string
	// Source is where the template came from: a path, or "embedded".
	Source string
}

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

// LoadPrompt reads PromptFile from dir, or the embedded default when dir
// is empty. The file must define the templates system, intro, frame and
// outro.
func LoadPrompt(dir string) (*Prompt, error) {
	var (
		b   []byte
		err error
		src = "embedded"
	)
	if dir == "" {
		b, err = fs.ReadFile(defaultPrompt, "prompts/"+PromptFile)
	} else {
		src = filepath.Join(dir, PromptFile)
		b, err = os.ReadFile(src)
	}
	if err != nil {
		return nil, fmt.Errorf("judge: prompt: %w", err)
	}
	t, err := template.New(PromptFile).Option("missingkey=error").Parse(string(b))
	if err != nil {
		return nil, fmt.Errorf("judge: prompt %s: %w", src, err)
	}
	var missing []string
	for _, name := range promptParts {
		if t.Lookup(name) == nil {
			missing = append(missing, fmt.Sprintf("{{define %q}}", name))
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("judge: prompt %s: missing %s", src, strings.Join(missing, ", "))
	}
	sum := sha256.Sum256(b)
	p := &Prompt{t: t, SHA256: hex.EncodeToString(sum[:]), Source: src}
	// Render a sample so that a template error shows at load, not per
	// trajectory.
	if _, err := p.Messages(PromptData{App: "App", Instruction: "Do it.", Steps: 1, Frames: 1, Outcome: "finished"},
		[]FrameData{{Frame: Frame{Step: 1, Final: true}, Index: 1, Width: 1, Height: 1}}, [][]byte{{}}); err != nil {
		return nil, fmt.Errorf("judge: prompt %s: %w", src, err)
	}
	return p, nil
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
