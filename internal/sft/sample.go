package sft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/prompt"
	"github.com/codapipe/codapipe/pkg/grpo"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	openai "github.com/sashabaranov/go-openai"
)

// Message is one chat message of a sample, in the role/content form
// LLaMA-Factory (sharegpt with role/content tags) and ms-swift read.
type Message struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Roles of Message.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// ImagePlaceholder marks where an image goes in a message's text, one per
// image in order (LLaMA-Factory's IMAGE_PLACEHOLDER default, ms-swift's
// tag).
const ImagePlaceholder = "<image>"

// reservedTags are the placeholders LLaMA-Factory and ms-swift replace by
// media: a text holding one would be read as an image (or a video or
// audio clip) that is not there.
var reservedTags = []string{"<image>", "<video>", "<audio>"}

// HistoryIntro starts the folded history in the user turn (see ShareGPT).
const HistoryIntro = "Your previous plans in this task, oldest first:"

// Sample is one SFT sample: the planner's messages at one step mapped
// onto the sharegpt layout, the target as the last assistant message, and
// the images in the order of their placeholders.
type Sample struct {
	ID           string
	Messages     []Message
	Images       []string // SHA-256 of each image, in placeholder order
	App          string
	Task         string
	Run          string
	TrajectoryID string
	Step         int
	JudgeVersion string
	// PlannerMessages is the renderer's messages exactly as the planner
	// was sent them (OpenAI chat JSON, images as "sha256:<hex>" URLs).
	PlannerMessages string
}

// ImagePath is the dataset-relative path of the image with the given
// SHA-256.
func ImagePath(sha string) string { return ImagesDir + "/" + sha + ".png" }

// ShareGPT maps the planner's messages (prompt.Set.RenderPlanner: a
// system message, the previous plans as assistant messages, then one user
// message with the screenshots and the task) and the target plan onto the
// alternating layout sharegpt trainers require: the system message, ONE
// user message, and the target as the one assistant message. The previous
// plans are folded into the user message as text, before its images and
// text and in their order: HistoryIntro, then "Step n:" and the plan for
// each, separated by blank lines. Each image part becomes an
// ImagePlaceholder in the user text where the part stood; images returns
// their URLs in that order. Only the target is learned: no plan is
// trained twice across the samples of one trajectory.
func ShareGPT(msgs []openai.ChatCompletionMessage, target string) (out []Message, images []string, err error) {
	if len(msgs) < 2 || msgs[0].Role != openai.ChatMessageRoleSystem || len(msgs[0].MultiContent) > 0 {
		return nil, nil, fmt.Errorf("the planner's messages do not start with a system message")
	}
	last := msgs[len(msgs)-1]
	if last.Role != openai.ChatMessageRoleUser {
		return nil, nil, fmt.Errorf("the planner's messages do not end with a user message")
	}
	var user strings.Builder
	if hist := msgs[1 : len(msgs)-1]; len(hist) > 0 {
		user.WriteString(HistoryIntro)
		for i, m := range hist {
			if m.Role != openai.ChatMessageRoleAssistant || len(m.MultiContent) > 0 {
				return nil, nil, fmt.Errorf("message %d of the planner's history is a %s message, want an assistant text", i+1, m.Role)
			}
			fmt.Fprintf(&user, "\n\nStep %d:\n%s", i+1, m.Content)
		}
		user.WriteString("\n\n")
	}
	if len(last.MultiContent) == 0 {
		user.WriteString(last.Content)
	}
	for _, p := range last.MultiContent {
		switch {
		case p.Type == openai.ChatMessagePartTypeText:
			user.WriteString(p.Text)
		case p.Type == openai.ChatMessagePartTypeImageURL && p.ImageURL != nil:
			user.WriteString(ImagePlaceholder)
			images = append(images, p.ImageURL.URL)
		default:
			return nil, nil, fmt.Errorf("the planner's user message has a %q part", p.Type)
		}
	}
	out = []Message{
		{Role: RoleSystem, Content: msgs[0].Content},
		{Role: RoleUser, Content: user.String()},
		{Role: RoleAssistant, Content: target},
	}
	return out, images, nil
}

// reservedTag returns the first reserved placeholder in s, or "".
func reservedTag(s string) string {
	for _, tag := range reservedTags {
		if strings.Contains(s, tag) {
			return tag
		}
	}
	return ""
}

// checkSteps reports the first step that cannot give a sample: no
// executed candidate, an executed action that did not parse, an empty
// plan.
func checkSteps(t *traj.Trajectory) error {
	if len(t.Steps) == 0 {
		return inputErr("the trajectory has no steps")
	}
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Executed < 0 || s.Executed >= len(s.Candidates) {
			return inputErr("step %d: no candidate was executed", i)
		}
		c := &s.Candidates[s.Executed]
		if !grpo.Usable(c.Action) {
			why := c.ParseError
			if why == "" && c.Action != nil {
				why = fmt.Sprintf("unknown action type %q", c.Action.Type)
			}
			return inputErr("step %d: the executed action did not parse (%s)", i, why)
		}
		if strings.TrimSpace(c.Plan) == "" {
			return inputErr("step %d: the executed candidate has no plan text", i)
		}
	}
	return nil
}

// actionSequence is the trajectory's executed actions as canonical text
// (uitars.Format on the 0–1000 grid, as the shards' action_text), one per
// line: trajectories of one task with the same sequence are duplicates.
func actionSequence(t *traj.Trajectory) string {
	lines := make([]string, len(t.Steps))
	for i := range t.Steps {
		a := grpo.ExecutedAction(&t.Steps[i])
		if a != nil {
			lines[i] = uitars.Format(*a, uitars.DefaultOptions())
		}
	}
	return strings.Join(lines, "\n")
}

// renderer renders samples, keeping the prompt sets it loaded and the
// screenshots it found in the store.
type renderer struct {
	store *blob.Store

	prompts *prompt.Cache

	mu    sync.Mutex
	stats map[string]bool // sha → in the store
}

func newRenderer(store *blob.Store) *renderer {
	return &renderer{store: store, prompts: prompt.NewCache(store), stats: map[string]bool{}}
}

// promptSet returns the prompt set t records; one it cannot have is bad
// input.
func (r *renderer) promptSet(ctx context.Context, t *traj.Trajectory) (*prompt.Set, error) {
	p, err := r.prompts.Of(ctx, t)
	if prompt.Unavailable(err) || errors.Is(err, blob.ErrChecksumMismatch) {
		return nil, inputErr("%v", err)
	}
	if err != nil {
		return nil, fmt.Errorf("sft: trajectory %s: %w", t.ID, err)
	}
	return p, nil
}

// exists reports whether the store holds the screenshot (cached).
func (r *renderer) exists(ctx context.Context, sha string) (bool, error) {
	r.mu.Lock()
	ok, known := r.stats[sha]
	r.mu.Unlock()
	if known {
		return ok, nil
	}
	_, err := r.store.Stat(ctx, sha)
	switch {
	case errors.Is(err, blob.ErrNotFound):
		ok = false
	case err != nil:
		return false, fmt.Errorf("sft: screenshot %s: %w", sha, err)
	default:
		ok = true
	}
	r.mu.Lock()
	r.stats[sha] = ok
	r.mu.Unlock()
	return ok, nil
}

// samples renders one sample per step of the judged trajectory jd and
// checks that every screenshot they show is in the store. Anything that
// keeps a step from becoming a sample is an *inputError: the trajectory
// is skipped whole.
func (r *renderer) samples(ctx context.Context, jd *traj.Judged) ([]Sample, error) {
	t := &jd.Trajectory
	if err := checkSteps(t); err != nil {
		return nil, err
	}
	p, err := r.promptSet(ctx, t)
	if err != nil {
		return nil, err
	}
	out := make([]Sample, 0, len(t.Steps))
	for i := range t.Steps {
		msgs, err := p.PlannerMessagesAt(t, i, prompt.RefURL)
		if err != nil {
			return nil, inputErr("step %d: the planner's messages cannot be rendered: %v", i, err)
		}
		s := &t.Steps[i]
		target := s.Candidates[s.Executed].Plan
		mm, urls, err := ShareGPT(msgs, target)
		if err != nil {
			return nil, inputErr("step %d: %v", i, err)
		}
		for _, m := range mm {
			text := m.Content
			if m.Role == RoleUser {
				text = strings.ReplaceAll(text, ImagePlaceholder, "")
			}
			if tag := reservedTag(text); tag != "" {
				return nil, inputErr("step %d: the %s text holds %s, which trainers read as a media placeholder", i, m.Role, tag)
			}
		}
		if strings.Count(mm[1].Content, ImagePlaceholder) != len(urls) {
			return nil, inputErr("step %d: the task or prompt text holds %s", i, ImagePlaceholder)
		}
		shas := make([]string, len(urls))
		for k, u := range urls {
			sha, ok := strings.CutPrefix(u, prompt.RefScheme)
			if !ok {
				return nil, inputErr("step %d: image URL %q is not a blob reference", i, u)
			}
			found, err := r.exists(ctx, sha)
			if err != nil {
				return nil, err
			}
			if !found {
				return nil, inputErr("step %d: screenshot %s is missing from the blob store", i, sha)
			}
			shas[k] = sha
		}
		raw, err := traj.MarshalCompact(msgs)
		if err != nil {
			return nil, fmt.Errorf("sft: trajectory %s step %d: %w", t.ID, i, err)
		}
		out = append(out, Sample{
			ID: fmt.Sprintf("%s/%d", t.ID, i), Messages: mm, Images: shas,
			App: t.Task.App, Task: t.Task.ID, Run: t.Run, TrajectoryID: t.ID, Step: i,
			JudgeVersion: jd.Judgement.Judge.ID(), PlannerMessages: string(raw),
		})
	}
	return out, nil
}
