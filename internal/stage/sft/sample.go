package sft

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/infra/blob"
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
// image in order (prompt.ImagePlaceholder: prompt.Flatten writes it).
const ImagePlaceholder = prompt.ImagePlaceholder

// Sample is one SFT sample: the planner's messages at one step mapped
// one to one onto the sharegpt layout, the target as the last assistant
// message, and the images in the order of their placeholders.
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

// ShareGPT maps the planner's messages (prompt.Set.RenderPlanner) and
// the target plan onto a sharegpt conversation, one message for one
// message: each message's text parts are concatenated in order, each
// image part becoming an ImagePlaceholder where it stood (images returns
// their URLs in that order), and the target is appended as the last
// assistant message. It has no layout of its own: the renderer decides
// it (prompt.LayoutUserHistory gives system, user), and ShareGPT only
// refuses what is not a valid sample — an optional system message first,
// then user and assistant alternating from a user message, the last one
// a user message — as the planner's messages of a legacy prompt set
// (prompt.LayoutAssistantTurns) past the first step are.
func ShareGPT(msgs []openai.ChatCompletionMessage, target string) (out []Message, images []string, err error) {
	out = make([]Message, 0, len(msgs)+1)
	for i, m := range msgs {
		want := RoleUser
		switch {
		case i == 0 && m.Role == openai.ChatMessageRoleSystem:
			want = RoleSystem
		case len(out) > 0 && out[len(out)-1].Role == RoleUser:
			want = RoleAssistant
		}
		if m.Role != want {
			return nil, nil, fmt.Errorf("the planner's message %d has role %q where a sharegpt sample needs %q (prompt sets stored before layouts were named show the history as assistant turns)", i, m.Role, want)
		}
		parts := []prompt.Part{{Text: m.Content}}
		if len(m.MultiContent) > 0 {
			parts = parts[:0]
		}
		for _, p := range m.MultiContent {
			switch {
			case p.Type == openai.ChatMessagePartTypeText:
				parts = append(parts, prompt.Part{Text: p.Text})
			case p.Type == openai.ChatMessagePartTypeImageURL && p.ImageURL != nil:
				parts = append(parts, prompt.Part{Image: p.ImageURL.URL, IsImage: true})
			default:
				return nil, nil, fmt.Errorf("the planner's %s message %d has a %q part", m.Role, i, p.Type)
			}
		}
		text, imgs, err := prompt.Flatten(parts)
		if err != nil {
			return nil, nil, fmt.Errorf("the planner's %s message %d: %w", m.Role, i, err)
		}
		if want != RoleUser && len(imgs) > 0 {
			return nil, nil, fmt.Errorf("the planner's %s message %d holds %d images: in a sharegpt sample images belong to the user turn", m.Role, i, len(imgs))
		}
		images = append(images, imgs...)
		out = append(out, Message{Role: want, Content: text})
	}
	if len(out) == 0 || out[len(out)-1].Role != RoleUser {
		return nil, nil, fmt.Errorf("the planner's messages do not end with a user message")
	}
	if tag := prompt.ReservedTag(target); tag != "" {
		return nil, nil, fmt.Errorf("the target plan: %w: %s, which trainers read as a media placeholder", prompt.ErrReservedTag, tag)
	}
	return append(out, Message{Role: RoleAssistant, Content: target}), images, nil
}

// PlannerSample is the SFT sample of step i of t, rendered with the
// trajectory's prompt set p: ShareGPT of p.PlannerMessagesAt (images as
// "sha256:<hex>" blob references) with the executed candidate's plan as
// the target. plannerMessages is the renderer's output as it was mapped.
// The builder makes every sample with it.
func PlannerSample(p *prompt.Set, t *traj.Trajectory, i int) (msgs []Message, images []string, plannerMessages []openai.ChatCompletionMessage, err error) {
	if i < 0 || i >= len(t.Steps) {
		return nil, nil, nil, fmt.Errorf("no step %d (%d steps)", i, len(t.Steps))
	}
	s := &t.Steps[i]
	if s.Executed < 0 || s.Executed >= len(s.Candidates) {
		return nil, nil, nil, fmt.Errorf("step %d: no candidate was executed", i)
	}
	plannerMessages, err = p.PlannerMessagesAt(t, i, prompt.RefURL)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("step %d: the planner's messages cannot be rendered: %w", i, err)
	}
	msgs, images, err = ShareGPT(plannerMessages, s.Candidates[s.Executed].Plan)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("step %d: %w", i, err)
	}
	return msgs, images, plannerMessages, nil
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
	if prompt.Unavailable(err) || blob.Damaged(err) {
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
		mm, urls, msgs, err := PlannerSample(p, t, i)
		if err != nil {
			return nil, inputErr("%v", err)
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
