package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/codapipe/codapipe/internal/blob"
)

// promptSetKind names the format of a prompt set document.
const promptSetKind = "codapipe.prompts/v1"

// promptSetDoc is a prompt set document (Prompts.Document).
type promptSetDoc struct {
	Kind  string            `json:"kind"`
	Files map[string]string `json:"files"`
}

// ErrNoPrompts reports a trajectory that records no prompt set (schema
// version < 4): its prompts cannot be rendered again.
var ErrNoPrompts = errors.New("the trajectory records no prompt set (schema_version < 4)")

// ParsePrompts reads a prompt set document (Prompts.Document). The result
// has the same Hash as the set that wrote it.
func ParsePrompts(doc []byte) (*Prompts, error) {
	var d promptSetDoc
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&d); err != nil {
		return nil, fmt.Errorf("agent: prompt set document: %w", err)
	}
	if d.Kind != promptSetKind {
		return nil, fmt.Errorf("agent: prompt set document: kind %q, want %q", d.Kind, promptSetKind)
	}
	p, err := newPrompts(d.Files)
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

// PromptStore is the part of the blob store prompt sets need.
type PromptStore interface {
	PutBytes(ctx context.Context, b []byte) (blob.Ref, error)
	GetBytes(ctx context.Context, sha256Hex string) ([]byte, error)
}

// StorePrompts stores the prompt set's document in the blob store under its
// hash (a no-op when it is there already).
func StorePrompts(ctx context.Context, s Store, p *Prompts) error {
	ref, err := s.PutBytes(ctx, p.Document())
	if err != nil {
		return fmt.Errorf("agent: store prompt set %s: %w", p.Hash(), err)
	}
	if ref.SHA256 != p.Hash() {
		return fmt.Errorf("agent: store prompt set %s: stored as %s", p.Hash(), ref.SHA256)
	}
	return nil
}

// FetchPrompts loads the prompt set with the given hash from the blob store
// (the store verifies the content against the hash).
func FetchPrompts(ctx context.Context, s PromptStore, hash string) (*Prompts, error) {
	if hash == "" {
		return nil, ErrNoPrompts
	}
	doc, err := s.GetBytes(ctx, hash)
	if err != nil {
		return nil, fmt.Errorf("agent: prompt set %s: %w", hash, err)
	}
	p, err := ParsePrompts(doc)
	if err != nil {
		return nil, fmt.Errorf("agent: prompt set %s: %w", hash, err)
	}
	return p, nil
}
