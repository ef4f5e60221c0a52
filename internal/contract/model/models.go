package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// ModelCard is one entry of an endpoint's GET /v1/models answer: the
// OpenAI list format, with the fields vLLM adds (vllm-project/vllm,
// vllm/entrypoints/openai/protocol.py, class ModelCard). vLLM sets Root
// to the path or hub id the served weights were loaded from (for a LoRA
// adapter: the adapter's path) and Parent, for an adapter, to the base
// model's name.
type ModelCard struct {
	ID          string `json:"id"`
	Object      string `json:"object,omitempty"`
	Created     int64  `json:"created,omitempty"`
	OwnedBy     string `json:"owned_by,omitempty"`
	Root        string `json:"root,omitempty"`
	Parent      string `json:"parent,omitempty"`
	MaxModelLen int    `json:"max_model_len,omitempty"`
}

// ModelsTimeout bounds one GET /v1/models (with ctx's own deadline, the
// earlier wins).
const ModelsTimeout = 15 * time.Second

// maxModelsBytes bounds a /v1/models answer.
const maxModelsBytes = 4 << 20

// Models lists the models the endpoint serves (GET <base URL>/models),
// in one attempt bounded by ModelsTimeout.
func (m *Client) Models(ctx context.Context) ([]ModelCard, error) {
	cards, err := m.models(ctx)
	return cards, m.secrets.Error(err) // the URL's query may hold a key
}

func (m *Client) models(ctx context.Context) ([]ModelCard, error) {
	ctx, cancel := context.WithTimeout(ctx, ModelsTimeout)
	defer cancel()
	url := m.at("/models")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, fmt.Errorf("model: GET %s: %w", url, err)
	}
	req.Header.Set("Accept", "application/json")
	m.authorize(req)
	resp, err := m.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("model: GET %s: %w", url, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBytes))
	if err != nil {
		return nil, fmt.Errorf("model: GET %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("model: GET %s: %s: %.200q", url, resp.Status, body)
	}
	var list struct {
		Data []ModelCard `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, fmt.Errorf("model: GET %s: not an OpenAI model list: %w", url, err)
	}
	return list.Data, nil
}

// ErrNoCheckpoint says an endpoint's model list names no checkpoint for
// the configured model.
var ErrNoCheckpoint = errors.New("the endpoint's /v1/models names no checkpoint for the model")

// ServedCheckpoint returns the checkpoint tag of the model the client
// calls, as the endpoint's /v1/models reports it: the Root of the card
// whose id is the configured model name. For vLLM that is the folder or
// hub id the weights were loaded from (a trainer-saved checkpoint's
// folder names its step); the model id itself is not a checkpoint (it
// is the served name, already recorded as the model). An endpoint that
// does not list the model, or lists it without a root, gives an error
// wrapping ErrNoCheckpoint; one that cannot be reached, its own error.
func (m *Client) ServedCheckpoint(ctx context.Context) (string, error) {
	cards, err := m.Models(ctx)
	if err != nil {
		return "", err
	}
	var ids []string
	for _, c := range cards {
		if c.ID != m.cfg.Model {
			ids = append(ids, c.ID)
			continue
		}
		if root := strings.TrimSpace(c.Root); root != "" {
			return root, nil
		}
		return "", fmt.Errorf("%w: %s at %s is listed without a \"root\"", ErrNoCheckpoint, m.cfg.Model, m.cfg.BaseURL)
	}
	return "", fmt.Errorf("%w: %s/models does not list %q (it lists %q)", ErrNoCheckpoint, m.cfg.BaseURL, m.cfg.Model, ids)
}
