// Package prompt holds the prompt templates of the planner and the executor
// and the one renderer of the planner's messages: the agent sends what
// RenderPlanner returns, and the shard writer and the SFT builder store
// what it returns for the same trajectory and step. A prompt set is stored
// in the blob store under its SHA-256, which every trajectory records, so
// a finished trajectory's prompts can be rendered again exactly.
package prompt

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"text/template"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	openai "github.com/sashabaranov/go-openai"
)

//go:embed templates/*.tmpl
var defaults embed.FS

// Prompt template files. A prompt directory given by the user holds any of
// them; the missing ones keep our defaults.
const (
	PlannerSystemFile  = "planner.tmpl"      // system prompt of the planner
	PlannerUserFile    = "planner_user.tmpl" // text of the planner's user turn, with the history
	ExecutorSystemFile = "executor.tmpl"     // system prompt of the executor
)

// Set is a parsed prompt set: the templates (Go text/template) of one
// run's planner and executor prompts.
type Set struct {
	plannerSystem, plannerUser, executorSystem *template.Template
	layout                                     Layout
	hash                                       string
	doc                                        []byte
}

// Data is what the templates see.
type Data struct {
	Instruction   string
	App           string
	Step          int // 1-based
	StepLimit     int
	Width, Height int  // the screenshot's size in pixels
	Previous      bool // the turn carries the previous screenshot too
	// History is the plans of the steps before this one, oldest first
	// (LayoutUserHistory; nil at the first step, and always nil in
	// LayoutAssistantTurns, where the plans are assistant turns).
	// planner_user.tmpl shows them: the wording is the template's.
	History []PastStep
	// Coords says in one sentence how the prompted model must write
	// coordinates (uitars.Describe of its coordinate space on this
	// screenshot); CoordSpace names the space and CoordW, CoordH are its
	// extents (1288 and 812 for pixels-resized on 1280×800, 1000 on the
	// grid). The planner's templates see the planner's space, the
	// executor's the executor's.
	Coords         string
	CoordSpace     string
	CoordW, CoordH float64
}

// PastStep is one earlier step of the episode as the planner is shown it.
type PastStep struct {
	Step int    // 1-based
	Plan string // the planner's output at that step, as it was; may be empty
}

// SetCoords fills the coordinate fields for a model writing in space c on
// a screenshot of size screen.
func (d *Data) SetCoords(c traj.Coords, screen uitars.Screen) error {
	desc, err := uitars.Describe(c, screen)
	if err != nil {
		return err
	}
	w, h, err := uitars.Extent(c, screen)
	if err != nil {
		return err
	}
	d.Coords, d.CoordSpace, d.CoordW, d.CoordH = desc, string(uitars.WithDefaults(c).Space), w, h
	return nil
}

// Load reads the templates from dir, falling back to the embedded
// defaults for files dir does not have ("" → all defaults).
func Load(dir string) (*Set, error) {
	files := make(map[string]string, len(promptFiles))
	for _, name := range promptFiles {
		src, b, err := readPrompt(dir, name)
		if err != nil {
			return nil, fmt.Errorf("prompt: prompt %s: %w", src, err)
		}
		files[name] = string(b)
	}
	return newSet(files, CurrentLayout)
}

// promptFiles are the templates of a prompt set, in the order they are parsed.
var promptFiles = []string{PlannerSystemFile, PlannerUserFile, ExecutorSystemFile}

// readPrompt reads one template from dir, or the embedded default when dir
// is "" or does not have it; src names where it came from.
func readPrompt(dir, name string) (src string, b []byte, err error) {
	if dir != "" {
		p := filepath.Join(dir, name)
		b, err := os.ReadFile(p)
		if err == nil {
			return p, b, nil
		}
		if !os.IsNotExist(err) {
			return p, nil, err
		}
	}
	b, err = defaults.ReadFile("templates/" + name)
	return "(default) " + name, b, err
}

// historyProbe is the plan of the sample history newSet renders
// planner_user.tmpl with: a template of LayoutUserHistory that does not
// show it would never show the planner its earlier steps.
const historyProbe = "Thought: (earlier plan)\nAction: wait()"

// newSet parses a prompt set of the given layout, given as template
// texts by file name.
func newSet(files map[string]string, layout Layout) (*Set, error) {
	p := &Set{layout: layout}
	for _, f := range []struct {
		name string
		dst  **template.Template
	}{{PlannerSystemFile, &p.plannerSystem}, {PlannerUserFile, &p.plannerUser}, {ExecutorSystemFile, &p.executorSystem}} {
		text, ok := files[f.name]
		if !ok {
			return nil, fmt.Errorf("prompt: prompt set has no %s", f.name)
		}
		t, err := template.New(f.name).Option("missingkey=error").Parse(text)
		if err != nil {
			return nil, fmt.Errorf("prompt: prompt %s: %w", f.name, err)
		}
		// Execute once with sample data so field typos fail at load time.
		sample := Data{Instruction: "x", Step: 1, StepLimit: 1, Width: 1280, Height: 800}
		if err := sample.SetCoords(uitars.Grid(), uitars.DefaultScreen); err != nil {
			return nil, err
		}
		if err := t.Execute(&bytes.Buffer{}, sample); err != nil {
			return nil, fmt.Errorf("prompt: prompt %s: %w", f.name, err)
		}
		if f.name == PlannerUserFile && layout == LayoutUserHistory {
			sample.Step, sample.Previous = 2, true
			sample.History = []PastStep{{Step: 1, Plan: historyProbe}}
			var b bytes.Buffer
			if err := t.Execute(&b, sample); err != nil {
				return nil, fmt.Errorf("prompt: prompt %s: %w", f.name, err)
			}
			if !strings.Contains(b.String(), historyProbe) {
				return nil, fmt.Errorf("prompt: prompt %s does not show .History: the planner would never see its earlier steps (range over .History and write each .Plan; see the default template)", f.name)
			}
		}
		*f.dst = t
	}
	if len(files) != len(promptFiles) {
		return nil, fmt.Errorf("prompt: prompt set has %d files, want %v", len(files), promptFiles)
	}
	doc, err := json.Marshal(promptSetDoc{Kind: promptSetKind, Layout: layout, Files: files})
	if err != nil {
		return nil, fmt.Errorf("prompt: prompt set: %w", err)
	}
	p.doc = doc
	sum := sha256.Sum256(doc)
	p.hash = hex.EncodeToString(sum[:])
	return p, nil
}

// Hash identifies the prompt set: the SHA-256 of its Document, which is
// also its name in the blob store and what a trajectory records.
func (p *Set) Hash() string { return p.hash }

// Document is the prompt set as stored in the blob store: JSON
// {"kind":"codapipe.prompts/v1","layout":"user-history","files":{"<file>":"<template text>",...}}
// with the files sorted by name (deterministic bytes); "layout" is
// absent for LayoutAssistantTurns.
func (p *Set) Document() []byte { return p.doc }

// Layout is how RenderPlanner lays out this set's planner requests.
func (p *Set) Layout() Layout { return p.layout }

func render(t *template.Template, d Data) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("prompt: prompt %s: %w", t.Name(), err)
	}
	return strings.TrimSpace(b.String()), nil
}

// PlannerTurn is what the planner is shown at one step: the prompt data,
// the plans of the steps before it (oldest first), and the previous and
// current screenshots. RenderPlanner places the plans as its set's
// layout says.
type PlannerTurn struct {
	Data    Data
	History []string
	Prev    *traj.ImageRef // nil at the first step
	Cur     traj.ImageRef
}

// PlannerTurnAt derives the planner's turn at step i of t from the
// trajectory alone: t.Steps[:i] give the history (each step's executed
// plan, or candidate 0's when none was executed) and the previous
// screenshot; cur is step i's screenshot. The agent calls it while step i
// is being made (t.Steps holds the steps before it), and every consumer of
// a finished trajectory calls it with t.Steps[i].Screenshot: one
// derivation, so what is rendered later is what the planner was sent.
func PlannerTurnAt(t *traj.Trajectory, i int, cur traj.ImageRef) (PlannerTurn, error) {
	if i < 0 || i > len(t.Steps) {
		return PlannerTurn{}, fmt.Errorf("prompt: trajectory %s: no step %d (%d steps)", t.ID, i, len(t.Steps))
	}
	d := Data{Instruction: t.Task.Instruction, App: t.Task.App, Step: i + 1, StepLimit: t.Task.StepLimit,
		Width: cur.Width, Height: cur.Height}
	if err := d.SetCoords(t.Models.Planner.Space(), uitars.Screen{W: cur.Width, H: cur.Height}); err != nil {
		return PlannerTurn{}, fmt.Errorf("prompt: trajectory %s step %d: %w", t.ID, i, err)
	}
	turn := PlannerTurn{Data: d, Cur: cur}
	for j := range t.Steps[:i] {
		s := &t.Steps[j]
		switch {
		case s.Executed >= 0 && s.Executed < len(s.Candidates):
			turn.History = append(turn.History, s.Candidates[s.Executed].Plan)
		case len(s.Candidates) > 0:
			turn.History = append(turn.History, s.Candidates[0].Plan)
		}
	}
	if i > 0 {
		prev := t.Steps[i-1].Screenshot
		turn.Prev = &prev
	}
	return turn, nil
}

// ImageURL gives the URL an image is sent as in a chat message.
type ImageURL func(traj.ImageRef) (string, error)

// RefScheme starts an image reference URL ("sha256:<hex>"): the image is
// the blob store object with that SHA-256 (blob.Key).
const RefScheme = "sha256:"

// RefURL is the ImageURL of stored messages: a reference to the blob store.
func RefURL(r traj.ImageRef) (string, error) { return RefScheme + r.SHA256, nil }

// RenderPlanner lays out one planner request. It is the one renderer of
// the planner's messages: the agent sends what it returns, and the shard
// writer and the SFT builder store what it returns for the same
// trajectory and step. In the set's layout:
//
//   - LayoutUserHistory (every set Load makes): the system prompt, then
//     one user turn with the previous screenshot (from the second step),
//     the current one, and planner_user.tmpl's text, which shows the
//     previous plans (Data.History) — [system, user]; appending the
//     target plan as an assistant turn makes it a sharegpt sample as it
//     is;
//   - LayoutAssistantTurns (prompt sets stored before layouts were
//     named): the system prompt, every previous plan as an assistant
//     turn, then the same user turn without Data.History.
func (p *Set) RenderPlanner(turn PlannerTurn, url ImageURL) ([]openai.ChatCompletionMessage, error) {
	d := turn.Data
	sys, err := render(p.plannerSystem, d)
	if err != nil {
		return nil, err
	}
	msgs := make([]openai.ChatCompletionMessage, 0, len(turn.History)+2)
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: sys})
	d.Previous = turn.Prev != nil
	d.History = nil
	switch p.layout {
	case LayoutAssistantTurns:
		for _, h := range turn.History {
			msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: h})
		}
	case LayoutUserHistory:
		for i, h := range turn.History {
			d.History = append(d.History, PastStep{Step: i + 1, Plan: h})
		}
	default:
		return nil, fmt.Errorf("prompt: prompt set %s: unknown layout %q", p.hash, p.layout)
	}
	user, err := render(p.plannerUser, d)
	if err != nil {
		return nil, err
	}
	var parts []openai.ChatMessagePart
	for _, ref := range []*traj.ImageRef{turn.Prev, &turn.Cur} {
		if ref == nil {
			continue
		}
		u, err := url(*ref)
		if err != nil {
			return nil, fmt.Errorf("prompt: planner image %s: %w", ref.SHA256, err)
		}
		parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: u}})
	}
	parts = append(parts, openai.ChatMessagePart{Type: openai.ChatMessagePartTypeText, Text: user})
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleUser, MultiContent: parts})
	return msgs, nil
}

// PlannerMessagesAt renders the planner's messages at step i of a finished
// trajectory: RenderPlanner of PlannerTurnAt(t, i, t.Steps[i].Screenshot).
func (p *Set) PlannerMessagesAt(t *traj.Trajectory, i int, url ImageURL) ([]openai.ChatCompletionMessage, error) {
	if i < 0 || i >= len(t.Steps) {
		return nil, fmt.Errorf("prompt: trajectory %s: no step %d (%d steps)", t.ID, i, len(t.Steps))
	}
	turn, err := PlannerTurnAt(t, i, t.Steps[i].Screenshot)
	if err != nil {
		return nil, err
	}
	return p.RenderPlanner(turn, url)
}

// ExecutorMessages lays out one executor request: the system prompt, then
// the planner's thought and the current screenshot.
func (p *Set) ExecutorMessages(d Data, thought string, cur []byte) ([]openai.ChatCompletionMessage, error) {
	sys, err := render(p.executorSystem, d)
	if err != nil {
		return nil, err
	}
	return []openai.ChatCompletionMessage{
		{Role: openai.ChatMessageRoleSystem, Content: sys},
		{Role: openai.ChatMessageRoleUser, MultiContent: []openai.ChatMessagePart{
			imagePart(cur),
			{Type: openai.ChatMessagePartTypeText, Text: thought},
		}},
	}, nil
}

func imagePart(png []byte) openai.ChatMessagePart {
	return openai.ChatMessagePart{Type: openai.ChatMessagePartTypeImageURL, ImageURL: &openai.ChatMessageImageURL{URL: model.DataURI(png)}}
}
