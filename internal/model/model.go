// Package model is the client of the OpenAI-compatible chat endpoints the
// pipeline calls (planner, executor, judge): retries with backoff on 429,
// 5xx and transport errors, a deadline on every attempt, sampling
// parameters, n answers per request with a fallback for servers that
// ignore n, and pre-encoded requests for callers that send the same images
// several times.
package model

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/clock"
	"github.com/codapipe/codapipe/pkg/traj"
	openai "github.com/sashabaranov/go-openai"
)

// Config says how to call one OpenAI-compatible chat endpoint.
type Config struct {
	BaseURL string // e.g. http://planner:8000/v1
	Model   string
	APIKey  string // sent as a bearer token; vLLM accepts any value by default
	// Checkpoint is the policy checkpoint tag recorded in trajectories.
	Checkpoint string
	// AttemptTimeout bounds one HTTP attempt (default 120 s).
	AttemptTimeout time.Duration
	// Attempts is the number of tries for retryable failures: 429, 5xx,
	// transport errors and attempt timeouts (default 4).
	Attempts int
	// Backoff is the first retry's wait; it doubles each retry, with
	// jitter, up to 30 s (default 1 s).
	Backoff time.Duration
	// HTTPClient overrides the transport (tests).
	HTTPClient *http.Client
}

// Client is a chat endpoint with retries and a deadline on every attempt.
type Client struct {
	cfg Config
	c   *openai.Client
	log *slog.Logger
	// For CompleteEncoded: the endpoint's base URL without a final
	// slash, the API key and the HTTP client go-openai uses too.
	base, key string
	hc        *http.Client
}

// New returns a client for cfg.
func New(cfg Config, log *slog.Logger) (*Client, error) {
	if cfg.BaseURL == "" || cfg.Model == "" {
		return nil, fmt.Errorf("model: endpoint needs a base URL and a model name (got %q, %q)", cfg.BaseURL, cfg.Model)
	}
	if cfg.AttemptTimeout <= 0 {
		cfg.AttemptTimeout = 120 * time.Second
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = 4
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = time.Second
	}
	if log == nil {
		log = slog.Default()
	}
	key := cfg.APIKey
	if key == "" {
		key = "EMPTY"
	}
	oc := openai.DefaultConfig(key)
	oc.BaseURL = strings.TrimRight(cfg.BaseURL, "/")
	if cfg.HTTPClient != nil {
		oc.HTTPClient = cfg.HTTPClient
	} else {
		// The per-attempt context is the deadline; the client keeps a
		// generous backstop so no call is unbounded even without one.
		oc.HTTPClient = &http.Client{Timeout: cfg.AttemptTimeout + 10*time.Second}
	}
	return &Client{cfg: cfg, c: openai.NewClientWithConfig(oc), log: log.With("model", cfg.Model, "endpoint", cfg.BaseURL),
		base: oc.BaseURL, key: key, hc: oc.HTTPClient.(*http.Client)}, nil
}

// Name is the model name.
func (m *Client) Name() string { return m.cfg.Model }

// Config returns the model's configuration.
func (m *Client) Config() Config { return m.cfg }

// Params are the decoding parameters of a request: the sampling
// parameters (all sent explicitly) and whether to ask for token-level
// records.
type Params struct {
	traj.Sampling
	// LogProbs asks for each answer's per-token log-probabilities and
	// token ids.
	LogProbs bool
}

// IsZero reports whether p is the zero Params (nothing configured).
func (p Params) IsZero() bool {
	s := p.Sampling
	return s.Temperature == 0 && s.TopP == 0 && s.TopK == 0 && s.MinP == 0 && s.RepetitionPenalty == 0 &&
		s.PresencePenalty == 0 && s.FrequencyPenalty == 0 && s.MaxTokens == 0 && s.Seed == nil && len(s.Stop) == 0 && !p.LogProbs
}

// Choice is one sampled answer.
type Choice struct {
	Content          string
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	LogProbs         []float64
	Latency          time.Duration // of the request that produced it
}

// Complete sends one request, retrying retryable failures with backoff.
// Every attempt has its own deadline; ctx bounds the whole call.
func (m *Client) Complete(ctx context.Context, req openai.ChatCompletionRequest) (openai.ChatCompletionResponse, error) {
	req.Model = m.cfg.Model
	return m.retry(ctx, func(actx context.Context) (openai.ChatCompletionResponse, error) {
		return m.c.CreateChatCompletion(actx, req)
	})
}

// CompleteEncoded is Complete for a request whose messages are already
// encoded: messages is their JSON array, spliced into the body as it is;
// req.Messages must be empty. A caller that sends the same megabytes of
// images several times with other sampling settings (the judge's votes)
// encodes them once. Errors are those of Complete (*openai.APIError for
// an error answer), and so are the retries.
func (m *Client) CompleteEncoded(ctx context.Context, req openai.ChatCompletionRequest, messages []byte) (openai.ChatCompletionResponse, error) {
	if len(req.Messages) > 0 {
		return openai.ChatCompletionResponse{}, errors.New("model: CompleteEncoded: req.Messages must be empty")
	}
	req.Model = m.cfg.Model
	// The request without its "messages" key: a nil field at the top
	// level hides the embedded one.
	rest, err := json.Marshal(struct {
		Messages *struct{} `json:"messages,omitempty"`
		openai.ChatCompletionRequest
	}{ChatCompletionRequest: req})
	if err != nil {
		return openai.ChatCompletionResponse{}, fmt.Errorf("%s: encode request: %w", m.cfg.Model, err)
	}
	// {"messages":<messages>,<the other fields>}
	body := make([]byte, 0, len(messages)+len(rest)+16)
	body = append(body, `{"messages":`...)
	body = append(body, messages...)
	if len(rest) > 2 {
		body = append(body, ',')
		body = append(body, rest[1:]...)
	} else {
		body = append(body, '}')
	}
	return m.retry(ctx, func(actx context.Context) (openai.ChatCompletionResponse, error) {
		return m.post(actx, body)
	})
}

// post sends one encoded chat completion request.
func (m *Client) post(ctx context.Context, body []byte) (openai.ChatCompletionResponse, error) {
	var out openai.ChatCompletionResponse
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.base+"/chat/completions", bytes.NewReader(body))
	if err != nil {
		return out, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	hreq.Header.Set("Authorization", "Bearer "+m.key)
	resp, err := m.hc.Do(hreq)
	if err != nil {
		return out, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerBytes))
	if err != nil {
		return out, err
	}
	if resp.StatusCode >= 400 {
		var er openai.ErrorResponse
		if json.Unmarshal(data, &er) == nil && er.Error != nil {
			er.Error.HTTPStatusCode, er.Error.HTTPStatus = resp.StatusCode, resp.Status
			return out, er.Error
		}
		return out, &openai.RequestError{HTTPStatus: resp.Status, HTTPStatusCode: resp.StatusCode, Err: fmt.Errorf("error answer: %.200q", data), Body: data}
	}
	if err := json.Unmarshal(data, &out); err != nil {
		return out, fmt.Errorf("%s: decode answer: %w", m.cfg.Model, err)
	}
	return out, nil
}

// maxAnswerBytes bounds an answer read by post.
const maxAnswerBytes = 64 << 20

// retry runs attempt until it succeeds, fails in a way that retrying
// cannot fix, or Attempts are used up, with a deadline per attempt and
// backoff with jitter between attempts.
func (m *Client) retry(ctx context.Context, attempt func(context.Context) (openai.ChatCompletionResponse, error)) (openai.ChatCompletionResponse, error) {
	var last error
	for n := 1; n <= m.cfg.Attempts; n++ {
		actx, cancel := context.WithTimeout(ctx, m.cfg.AttemptTimeout)
		resp, err := attempt(actx)
		cancel()
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return resp, fmt.Errorf("%s: %w", m.cfg.Model, ctx.Err())
		}
		last = err
		if !retryable(err, actx) || n == m.cfg.Attempts {
			break
		}
		wait := m.backoff(n)
		m.log.Warn("model call failed; retrying", "attempt", n, "wait", wait, "err", err)
		if err := clock.Sleep(ctx, wait); err != nil {
			return openai.ChatCompletionResponse{}, fmt.Errorf("%s: %w", m.cfg.Model, err)
		}
	}
	return openai.ChatCompletionResponse{}, fmt.Errorf("%s at %s: %w", m.cfg.Model, m.cfg.BaseURL, last)
}

func (m *Client) backoff(attempt int) time.Duration {
	d := m.cfg.Backoff << (attempt - 1)
	if d > 30*time.Second || d <= 0 {
		d = 30 * time.Second
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// retryable reports whether a failed attempt may succeed when repeated.
func retryable(err error, attemptCtx context.Context) bool {
	var api *openai.APIError
	if errors.As(err, &api) {
		return api.HTTPStatusCode == http.StatusTooManyRequests || api.HTTPStatusCode >= 500
	}
	var re *openai.RequestError
	if errors.As(err, &re) {
		return re.HTTPStatusCode == http.StatusTooManyRequests || re.HTTPStatusCode >= 500 || re.HTTPStatusCode == 0
	}
	if errors.Is(attemptCtx.Err(), context.DeadlineExceeded) {
		return true // the attempt timed out
	}
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF)
}

// Sample asks for n answers to msgs in one request; when the server
// returns fewer (some ignore n), the rest are requested concurrently, one
// per request.
func (m *Client) Sample(ctx context.Context, msgs []openai.ChatCompletionMessage, n int, p Params) ([]Choice, error) {
	if n < 1 {
		n = 1
	}
	req := request(msgs, n, p)
	start := time.Now()
	resp, err := m.Complete(ctx, req)
	if err != nil {
		return nil, err
	}
	out := choices(resp, time.Since(start))
	if len(out) >= n {
		return out[:n], nil
	}
	// Fallback: the missing answers as concurrent single requests.
	missing := n - len(out)
	extra := make([][]Choice, missing)
	errs := make([]error, missing)
	var wg sync.WaitGroup
	for i := range missing {
		wg.Add(1)
		go func() { // owned: waited for below
			defer wg.Done()
			r := request(msgs, 1, p)
			if p.Seed != nil {
				s := int(*p.Seed) + len(out) + i
				r.Seed = &s
			}
			t0 := time.Now()
			resp, err := m.Complete(ctx, r)
			if err != nil {
				errs[i] = err
				return
			}
			extra[i] = choices(resp, time.Since(t0))
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, e := range extra {
		if len(e) == 0 {
			return nil, fmt.Errorf("%s: a request for one answer returned none", m.cfg.Model)
		}
		out = append(out, e[0])
	}
	return out, nil
}

func request(msgs []openai.ChatCompletionMessage, n int, p Params) openai.ChatCompletionRequest {
	r := openai.ChatCompletionRequest{
		Messages:    msgs,
		N:           n,
		Temperature: float32(p.Temperature),
		TopP:        float32(p.TopP),
		MaxTokens:   p.MaxTokens,
		LogProbs:    p.LogProbs,
		Stop:        p.Stop,
	}
	if p.Seed != nil {
		s := int(*p.Seed)
		r.Seed = &s
	}
	return r
}

func choices(resp openai.ChatCompletionResponse, lat time.Duration) []Choice {
	out := make([]Choice, 0, len(resp.Choices))
	n := max(len(resp.Choices), 1)
	for _, c := range resp.Choices {
		ch := Choice{
			Content:      c.Message.Content,
			FinishReason: string(c.FinishReason),
			// Usage covers the whole request: the prompt is shared, the
			// completion tokens are split evenly when not reported per choice.
			PromptTokens:     resp.Usage.PromptTokens,
			CompletionTokens: resp.Usage.CompletionTokens / n,
			Latency:          lat,
		}
		if c.LogProbs != nil {
			for _, lp := range c.LogProbs.Content {
				ch.LogProbs = append(ch.LogProbs, lp.LogProb)
			}
		}
		out = append(out, ch)
	}
	return out
}

// DataURI encodes a PNG as a data URI, the way chat messages carry images.
func DataURI(png []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
}
