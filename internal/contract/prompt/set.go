package prompt

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/codapipe/codapipe/internal/infra/blob"
)

// promptSetKind names the format of a prompt set document.
const promptSetKind = "codapipe.prompts/v1"

// promptSetDoc is a prompt set document (Set.Document). Layout is
// omitted for LayoutAssistantTurns, so the documents stored before the
// field existed keep their bytes, their hash and their layout.
type promptSetDoc struct {
	Kind   string            `json:"kind"`
	Layout Layout            `json:"layout,omitempty"`
	Files  map[string]string `json:"files"`
}

// Layout names how RenderPlanner lays out the planner's request. It is
// part of the prompt set document, so a finished trajectory is rendered
// again in the layout its planner was sent.
type Layout string

// Layouts of the planner's request.
const (
	// LayoutAssistantTurns is the layout of the prompt sets stored before
	// layouts were named (no "layout" in the document): the system
	// prompt, every previous plan as an assistant turn of its own, then
	// one user turn with the screenshots and planner_user.tmpl's text.
	// Several assistant turns in a row are not a valid sharegpt sample,
	// so trajectories of this layout are rendered again only to read
	// what their planner was sent (shards), never for SFT.
	LayoutAssistantTurns Layout = ""
	// LayoutUserHistory is the layout of every prompt set Load makes: the
	// system prompt, then one user turn with the screenshots and
	// planner_user.tmpl's text, which shows the previous plans
	// (Data.History). Two messages, so the request the agent sends is
	// also a sharegpt sample once the target is appended.
	LayoutUserHistory Layout = "user-history"
)

// CurrentLayout is the layout of the prompt sets Load makes.
const CurrentLayout = LayoutUserHistory

// ErrInvalid reports a stored prompt set that is not a valid prompt set
// document (Parse fails on it).
var ErrInvalid = errors.New("not a valid prompt set")

// ErrNotRecorded reports a trajectory that records no prompt set (schema
// version < 4): its prompts cannot be rendered again.
var ErrNotRecorded = errors.New("the trajectory records no prompt set (schema_version < 4)")

// Parse reads a prompt set document (Set.Document). The result
// has the same Hash as the set that wrote it.
func Parse(doc []byte) (*Set, error) {
	var d promptSetDoc
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("prompt: prompt set document: %w", err)
	}
	if d.Kind != promptSetKind {
		return nil, fmt.Errorf("prompt: prompt set document: kind %q, want %q", d.Kind, promptSetKind)
	}
	if d.Layout != LayoutAssistantTurns && d.Layout != LayoutUserHistory {
		return nil, fmt.Errorf("prompt: prompt set document: unknown layout %q (want %q or none)", d.Layout, LayoutUserHistory)
	}
	p, err := newSet(d.Files, d.Layout)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(p.doc, doc) {
		// Not our canonical encoding: the hash a trajectory records is of
		// the stored bytes, so keep those.
		sum := sha256.Sum256(doc)
		p.doc, p.hash = bytes.Clone(doc), hex.EncodeToString(sum[:])
	}
	return p, nil
}

// Blobs is the part of the blob store prompt sets need; *blob.Store
// implements it.
type Blobs interface {
	PutBytes(ctx context.Context, b []byte) (blob.Ref, error)
	GetBytes(ctx context.Context, sha256Hex string) ([]byte, error)
}

// Store stores the prompt set's document in the blob store under its
// hash (a no-op when it is there already).
func Store(ctx context.Context, s Blobs, p *Set) error {
	ref, err := s.PutBytes(ctx, p.Document())
	if err != nil {
		return fmt.Errorf("prompt: store prompt set %s: %w", p.Hash(), err)
	}
	if ref.SHA256 != p.Hash() {
		return fmt.Errorf("prompt: store prompt set %s: stored as %s", p.Hash(), ref.SHA256)
	}
	return nil
}

// Fetch loads the prompt set with the given hash from the blob store
// (the store verifies the content against the hash).
func Fetch(ctx context.Context, s Blobs, hash string) (*Set, error) {
	if hash == "" {
		return nil, ErrNotRecorded
	}
	doc, err := s.GetBytes(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("prompt: prompt set %s: %w", hash, err)
	}
	p, err := Parse(doc)
	if err != nil {
		return nil, fmt.Errorf("prompt: prompt set %s: %w: %w", hash, ErrInvalid, err)
	}
	return p, nil
}
