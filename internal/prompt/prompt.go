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

	"github.com/codapipe/codapipe/internal/model"
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
	PlannerUserFile    = "planner_user.tmpl" // text of the planner's last user turn
	ExecutorSystemFile = "executor.tmpl"     // system prompt of the executor
)

// Set is a parsed prompt set: the templates (Go text/template) of one
// run's planner and executor prompts.
type Set struct {
	plannerSystem, plannerUser, executorSystem *template.Template
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
	return newSet(files)
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

// newSet parses a prompt set given as template texts by file name.
func newSet(files map[string]string) (*Set, error) {
	p := &Set{}
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
		*f.dst = t
	}
	if len(files) != len(promptFiles) {
		return nil, fmt.Errorf("prompt: prompt set has %d files, want %v", len(files), promptFiles)
	}
	doc, err := json.Marshal(promptSetDoc{Kind: promptSetKind, Files: files})
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
// {"kind":"codapipe.prompts/v1","files":{"<file>":"<template text>",...}}
// with the files sorted by name (deterministic bytes).
func (p *Set) Document() []byte { return p.doc }

func render(t *template.Template, d Data) (string, error) {
	var b strings.Builder
	if err := t.Execute(&b, d); err != nil {
		return "", fmt.Errorf("prompt: prompt %s: %w", t.Name(), err)
	}
	return strings.TrimSpace(b.String()), nil
}

// PlannerTurn is what the planner is shown at one step: the prompt data,
// the plans of the steps before it (as assistant turns), and the previous
// and current screenshots.
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

// RenderPlanner lays out one planner request as CODA's inference code
// does: the system prompt, every previous plan as an assistant turn, then
// one user turn with the last two screenshots (previous and current) and
// the task. It is the one renderer of the planner's messages: the agent
// sends what it returns, and the shard writer and the SFT builder store
// what it returns for the same trajectory and step.
func (p *Set) RenderPlanner(turn PlannerTurn, url ImageURL) ([]openai.ChatCompletionMessage, error) {
	d := turn.Data
	sys, err := render(p.plannerSystem, d)
	if err != nil {
		return nil, err
	}
	d.Previous = turn.Prev != nil
	user, err := render(p.plannerUser, d)
	if err != nil {
		return nil, err
	}
	msgs := make([]openai.ChatCompletionMessage, 0, len(turn.History)+2)
	msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleSystem, Content: sys})
	for _, h := range turn.History {
		msgs = append(msgs, openai.ChatCompletionMessage{Role: openai.ChatMessageRoleAssistant, Content: h})
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
