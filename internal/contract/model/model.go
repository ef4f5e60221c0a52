// Package model is the client of the OpenAI-compatible chat endpoints the
// pipeline calls (planner, executor, judge): one request encoder that
// sends every sampling parameter explicitly (vLLM's extras too), answers
// read per choice with their log-probabilities, token ids, finish reason
// and own token count, retries with backoff on 429, 5xx and transport
// errors (honouring Retry-After), a deadline on every attempt, context
// overflows as ErrContextOverflow, n answers per request with a fallback
// for servers that ignore n, and pre-encoded messages for callers that
// send the same images several times.
package model

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/infra/clock"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/pkg/traj"
	openai "github.com/sashabaranov/go-openai"
)

// Config says how to call one OpenAI-compatible chat endpoint.
type Config struct {
	// BaseURL is the endpoint, e.g. http://planner:8000/v1. A
	// user:password@ in it is sent as HTTP basic authentication in place
	// of the bearer API key, and never recorded: the Client's Config has
	// it as ***@ (redact.URL), which is what trajectories and judgements
	// record as the endpoint.
	BaseURL string
	Model   string
	APIKey  string // sent as a bearer token (unless BaseURL has user:password@); vLLM accepts any value by default
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
	// MaxAnswerBytes bounds one answer's body (default
	// DefaultMaxAnswerBytes); a longer one is an *AnswerTooLargeError,
	// not retried. MaxAnswerFlag names the flag that raises it, for the
	// error.
	MaxAnswerBytes int64
	MaxAnswerFlag  string
	// HTTPClient overrides the transport (tests).
	HTTPClient *http.Client
	// Sleep waits between attempts (nil: clock.Sleep); tests pass one
	// that records the waits.
	Sleep func(ctx context.Context, d time.Duration) error
}

// Client is a chat endpoint with retries and a deadline on every attempt.
type Client struct {
	cfg Config
	log *slog.Logger
	// The endpoint's base URL without a final slash and without user
	// information (its query, if any, goes on every request), the API
	// key or the basic-auth user and password, and the HTTP client.
	base           url.URL
	key            string
	user, password string
	basic          bool
	hc             *http.Client
	// secrets are the key and password, stripped from every error.
	secrets redact.Secrets
}

// at is the URL of the endpoint's route p ("/models"): the base URL's
// path and p, and the base URL's query.
func (m *Client) at(p string) string {
	u := m.base
	u.Path += p
	if u.RawPath != "" {
		u.RawPath += p
	}
	return u.String()
}

// authorize sets the request's credentials: basic authentication with
// the user information of the base URL, else the API key as a bearer
// token.
func (m *Client) authorize(req *http.Request) {
	if m.basic {
		req.SetBasicAuth(m.user, m.password)
		return
	}
	req.Header.Set("Authorization", "Bearer "+m.key)
}

func (m *Client) sleep(ctx context.Context, d time.Duration) error {
	if m.cfg.Sleep != nil {
		return m.cfg.Sleep(ctx, d)
	}
	return clock.Sleep(ctx, d)
}

// CheckBaseURL checks an endpoint's base URL as field (a flag's name)
// gives it: http or https, a host, and nothing that could hide a password
// (redact.ParseURL). Its error names field and shows no credentials.
func CheckBaseURL(field, raw string) (*url.URL, error) {
	u, err := redact.ParseURL(field, raw)
	if err != nil {
		return nil, err
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return nil, fmt.Errorf("%s %s: %w: want http(s)://host[:port]/path, e.g. http://planner:8000/v1", field, redact.Shown(u), redact.ErrBadURL)
	}
	return u, nil
}

// New returns a client for cfg.
func New(cfg Config, log *slog.Logger) (*Client, error) {
	if cfg.BaseURL == "" || cfg.Model == "" {
		return nil, fmt.Errorf("model: endpoint needs a base URL and a model name (got %q, %q)", redact.URL(cfg.BaseURL), cfg.Model)
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
	hc := cfg.HTTPClient
	if hc == nil {
		// The per-attempt context is the deadline; the client keeps a
		// generous backstop so no call is unbounded even without one.
		hc = &http.Client{Timeout: cfg.AttemptTimeout + 10*time.Second}
	}
	u, err := CheckBaseURL("model: base URL", cfg.BaseURL)
	if err != nil {
		return nil, err
	}
	if cfg.MaxAnswerBytes < 0 {
		return nil, fmt.Errorf("model: the answer limit %d is negative (%s)", cfg.MaxAnswerBytes, cmp.Or(cfg.MaxAnswerFlag, "MaxAnswerBytes"))
	}
	var user, password string
	basic := u.User != nil
	if basic {
		user = u.User.Username()
		password, _ = u.User.Password()
	}
	cfg.BaseURL = redact.Shown(u)
	base := *u
	base.User = nil
	if base.RawPath != "" { // an encoded path ("/v1%2F"): trim what was written
		base.RawPath = strings.TrimRight(base.RawPath, "/")
		if p, err := url.PathUnescape(base.RawPath); err == nil {
			base.Path = p
		}
	} else {
		base.Path = strings.TrimRight(base.Path, "/")
	}
	m := &Client{cfg: cfg, log: log.With("model", cfg.Model, "endpoint", cfg.BaseURL),
		base: base, key: key, user: user, password: password, basic: basic, hc: hc}
	m.secrets.Add(cfg.APIKey)
	m.secrets.AddUserinfo(user, password)
	m.secrets.AddQuery(u.Query())
	return m, nil
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
	Content      string
	FinishReason string // "stop", "length", ...; empty when the server gave none
	PromptTokens int
	// CompletionTokens is this answer's own token count: the number of its
	// token ids or log-probabilities when the server gave them; else the
	// request's completion tokens divided by its answers, and then
	// CompletionTokensEstimated is set.
	CompletionTokens          int
	CompletionTokensEstimated bool
	// LogProbs are the answer's per-token log-probabilities and TokenIDs
	// the ids of those tokens (same length); nil when not asked for or
	// when the server could not give them.
	LogProbs []float64
	TokenIDs []int32
	// PromptTokenIDs are the ids of the request's prompt tokens, as the
	// server tokenized it (vLLM's top-level prompt_token_ids, answered with
	// return_token_ids); shared by every answer of the request, nil when
	// the server gave none.
	PromptTokenIDs []int32
	Latency        time.Duration // of the request that produced it
}

// Request is one chat completion request.
type Request struct {
	// Messages are the chat messages; or Encoded is their JSON array as
	// json.Marshal writes it (compact, HTML-escaped), spliced into the
	// body as it is (a caller that sends the same megabytes of images
	// several times, the judge's votes, encodes them once). Exactly one
	// of the two is set.
	Messages []openai.ChatCompletionMessage
	Encoded  []byte
	// N is the number of answers asked for (0 means 1).
	N int
	// Params are the decoding parameters; every sampling parameter is
	// sent, whatever its value.
	Params Params
	// User is the OpenAI "user" field (a tag for the server's logs);
	// empty sends none.
	User string
}

// chatBody is the JSON body of a chat completion request as this client
// sends it. No sampling field has omitempty: a zero temperature, a
// top_k of -1 or an empty stop list is sent as it is, so the server's
// generation defaults never fill a gap.
//
// The vLLM names are those of ChatCompletionRequest in vLLM's
// vllm/entrypoints/openai/chat_completion/protocol.py (vllm-project/vllm
// at commit d5dba2d7b0ab9b98096560c69db7126b54b14d79): top_k, min_p and
// repetition_penalty are its sampling extras; with logprobs true,
// return_token_ids makes each choice carry "token_ids" (the completion's
// token ids) and return_tokens_as_token_ids writes every logprob entry's
// token as "token_id:N", which older servers without return_token_ids
// also understand.
type chatBody struct {
	Model             string          `json:"model"`
	Messages          json.RawMessage `json:"messages"`
	N                 int             `json:"n"`
	Temperature       float64         `json:"temperature"`
	TopP              float64         `json:"top_p"`
	TopK              int             `json:"top_k"`
	MinP              float64         `json:"min_p"`
	RepetitionPenalty float64         `json:"repetition_penalty"`
	PresencePenalty   float64         `json:"presence_penalty"`
	FrequencyPenalty  float64         `json:"frequency_penalty"`
	MaxTokens         int             `json:"max_tokens"`
	Seed              *int64          `json:"seed,omitempty"`
	Stop              []string        `json:"stop"`
	LogProbs          bool            `json:"logprobs"`
	TopLogProbs       *int            `json:"top_logprobs,omitempty"`
	ReturnTokenIDs    *bool           `json:"return_token_ids,omitempty"`
	TokensAsIDs       *bool           `json:"return_tokens_as_token_ids,omitempty"`
	User              string          `json:"user,omitempty"`
}

// SamplingKeys are the JSON keys of the sampling parameters every request
// carries (seed only when one is set).
var SamplingKeys = []string{"temperature", "top_p", "top_k", "min_p", "repetition_penalty",
	"presence_penalty", "frequency_penalty", "max_tokens", "stop", "logprobs"}

// Encode returns the JSON body of r for the model m serves.
func (m *Client) Encode(r Request) ([]byte, error) {
	if (len(r.Messages) > 0) == (len(r.Encoded) > 0) {
		return nil, fmt.Errorf("%s: a request needs its messages, either as Messages or as Encoded (got %d messages and %d encoded bytes)", m.cfg.Model, len(r.Messages), len(r.Encoded))
	}
	if err := r.Params.Check(); err != nil {
		return nil, fmt.Errorf("%s: %w", m.cfg.Model, err)
	}
	msgs := r.Encoded
	if len(r.Messages) > 0 {
		b, err := marshalMessages(r.Messages)
		if err != nil {
			return nil, fmt.Errorf("%s: encode messages: %w", m.cfg.Model, err)
		}
		msgs = b
	} else if msgs[0] != '[' || msgs[len(msgs)-1] != ']' {
		return nil, fmt.Errorf("%s: the encoded messages are not a JSON array", m.cfg.Model)
	}
	// msgs is compact, valid and HTML-escaped (json.Marshal's output),
	// which is what encoding it again as a RawMessage would make of it:
	// it is spliced into the body instead, without that second pass over
	// megabytes of images.
	p := r.Params
	b := chatBody{
		Model: m.cfg.Model, Messages: json.RawMessage(messagesHole), N: max(r.N, 1),
		Temperature: p.Temperature, TopP: p.TopP, TopK: p.TopK, MinP: p.MinP,
		RepetitionPenalty: p.RepetitionPenalty, PresencePenalty: p.PresencePenalty, FrequencyPenalty: p.FrequencyPenalty,
		MaxTokens: p.MaxTokens, Seed: p.Seed, Stop: p.Stop, LogProbs: p.LogProbs, User: r.User,
	}
	if b.Stop == nil {
		b.Stop = []string{}
	}
	if p.LogProbs {
		zero, yes := 0, true
		b.TopLogProbs, b.ReturnTokenIDs, b.TokensAsIDs = &zero, &yes, &yes
	}
	out, err := json.Marshal(b)
	if err != nil {
		return nil, fmt.Errorf("%s: encode request: %w", m.cfg.Model, err)
	}
	// The hole is the first `,"messages":0,`: inside a JSON string a
	// quote is always escaped, so `,"` cannot stand in the model name
	// before it.
	i := bytes.Index(out, []byte(`,"messages":`+messagesHole+`,`)) + len(`,"messages":`)
	return slices.Concat(out[:i], msgs, out[i+len(messagesHole):]), nil
}

// marshalMessages is json.Marshal(msgs) without encoding/json's second
// and third pass over each message's MarshalJSON output (validation and
// compaction of what json.Marshal already wrote compact and HTML-escaped):
// the same bytes.
func marshalMessages(msgs []openai.ChatCompletionMessage) ([]byte, error) {
	out := []byte{'['}
	for i, m := range msgs {
		b, err := m.MarshalJSON()
		if err != nil {
			return nil, err
		}
		if i > 0 {
			out = append(out, ',')
		}
		out = append(out, b...)
	}
	return append(out, ']'), nil
}

// messagesHole stands for the messages in a body they are spliced into.
const messagesHole = "0"

// Chat sends r, retrying retryable failures, and returns its answers as
// the server gave them, in the order of their index field when it numbers
// them 0..n-1 (Sample also makes up for servers that ignore n).
// Every attempt has its own deadline; ctx bounds the whole call. A 400
// saying the context length was exceeded is an error that Is
// ErrContextOverflow and is not retried; other error answers come back as
// *openai.APIError (or *openai.RequestError for a body that is not an
// OpenAI error).
func (m *Client) Chat(ctx context.Context, r Request) ([]Choice, error) {
	body, err := m.Encode(r)
	if err != nil {
		return nil, err
	}
	start := time.Now()
	resp, err := m.retry(ctx, func(actx context.Context) (*chatResponse, error) { return m.post(actx, body) })
	if err != nil {
		return nil, err
	}
	return resp.choices(time.Since(start)), nil
}

// chatResponse is the part of a chat completion answer this client reads.
type chatResponse struct {
	Choices []struct {
		Index   int `json:"index"`
		Message struct {
			Content *string `json:"content"`
		} `json:"message"`
		FinishReason *string `json:"finish_reason"`
		Logprobs     *struct {
			Content []struct {
				Token   string  `json:"token"`
				Logprob float64 `json:"logprob"`
			} `json:"content"`
		} `json:"logprobs"`
		// TokenIDs are vLLM's completion token ids (return_token_ids).
		TokenIDs []int64 `json:"token_ids"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
	// PromptTokenIDs are vLLM's prompt token ids (return_token_ids), at the
	// top level of the response.
	PromptTokenIDs []int64 `json:"prompt_token_ids"`
}

// choices turns the answer into Choices, in the order of their index
// field (the OpenAI contract; a server may list them in another order)
// when the indexes are 0..n-1, else as listed; lat is the request's
// latency.
func (r *chatResponse) choices(lat time.Duration) []Choice {
	order := make([]int, len(r.Choices))
	seen := make([]bool, len(r.Choices))
	for i, c := range r.Choices {
		if c.Index < 0 || c.Index >= len(r.Choices) || seen[c.Index] {
			for i := range order {
				order[i] = i
			}
			break
		}
		seen[c.Index], order[c.Index] = true, i
	}
	out := make([]Choice, 0, len(r.Choices))
	promptIDs := tokenIDs(r.PromptTokenIDs, nil)
	for _, i := range order {
		c := r.Choices[i]
		ch := Choice{PromptTokens: r.Usage.PromptTokens, PromptTokenIDs: promptIDs, Latency: lat}
		if c.Message.Content != nil {
			ch.Content = *c.Message.Content
		}
		if c.FinishReason != nil {
			ch.FinishReason = *c.FinishReason
		}
		var toks []string
		if c.Logprobs != nil {
			ch.LogProbs = make([]float64, len(c.Logprobs.Content))
			toks = make([]string, len(c.Logprobs.Content))
			for i, lp := range c.Logprobs.Content {
				ch.LogProbs[i], toks[i] = lp.Logprob, lp.Token
			}
		}
		ch.TokenIDs = tokenIDs(c.TokenIDs, toks)
		switch {
		case ch.TokenIDs != nil:
			ch.CompletionTokens = len(ch.TokenIDs)
		case len(ch.LogProbs) > 0:
			ch.CompletionTokens = len(ch.LogProbs)
		default:
			// The usage covers the whole request: without per-choice
			// tokens the completion is split evenly, and marked so.
			ch.CompletionTokens = r.Usage.CompletionTokens / max(len(r.Choices), 1)
			ch.CompletionTokensEstimated = true
		}
		if len(ch.LogProbs) == 0 {
			ch.LogProbs = nil
		}
		out = append(out, ch)
	}
	return out
}

// tokenIDs returns a choice's completion token ids: the server's
// token_ids when they fit int32 and, with log-probabilities, are as many
// as those; else the ids written into the logprob tokens ("token_id:N",
// return_tokens_as_token_ids); else nil.
func tokenIDs(ids []int64, toks []string) []int32 {
	if len(ids) > 0 && (len(toks) == 0 || len(toks) == len(ids)) {
		out := make([]int32, len(ids))
		ok := true
		for i, id := range ids {
			if id < 0 || id > math.MaxInt32 {
				ok = false
				break
			}
			out[i] = int32(id)
		}
		if ok {
			return out
		}
	}
	if len(toks) == 0 {
		return nil
	}
	out := make([]int32, len(toks))
	for i, t := range toks {
		id, ok := ParseTokenID(t)
		if !ok {
			return nil
		}
		out[i] = id
	}
	return out
}

// ParseTokenID reads a logprob token written as "token_id:N" (vLLM's
// return_tokens_as_token_ids), N a non-negative decimal that fits int32.
func ParseTokenID(tok string) (int32, bool) {
	s, ok := strings.CutPrefix(tok, "token_id:")
	if !ok || s == "" || len(s) > 10 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	if n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// ErrContextOverflow is what a request that outgrew the model's context
// length fails with (test with errors.Is); retrying cannot help.
var ErrContextOverflow = errors.New("the request exceeds the model's context length")

// ContextOverflowError is a 400 answer saying the context length was
// exceeded; it Is ErrContextOverflow. Message is the server's.
type ContextOverflowError struct {
	Message string
}

func (e *ContextOverflowError) Error() string {
	return "context length exceeded (HTTP 400): " + e.Message
}

// Is reports whether target is ErrContextOverflow.
func (e *ContextOverflowError) Is(target error) bool { return target == ErrContextOverflow }

// contextOverflow reports whether a 400's message says the prompt and
// completion do not fit the model's context. vLLM's wordings: "This
// model's maximum context length is N tokens. However, you requested ..."
// (vllm/entrypoints/openai/serving_engine.py, older releases); "You passed
// N input tokens and requested M output tokens. However, the model's
// context length is only T tokens, ..." (vllm/renderers/params.py at
// commit 017638d70159114c71e4c28cc95f54c3f7699079); "The decoder prompt
// (length N) is longer than the maximum model length of M"
// (vllm/v1/engine).
func contextOverflow(msg string) bool {
	m := strings.ToLower(msg)
	for _, s := range []string{"maximum context length", "context length is only", "longer than the maximum model length", "context_length_exceeded"} {
		if strings.Contains(m, s) {
			return true
		}
	}
	return false
}

// retryAfterError is a 429 or 503 answer with a Retry-After header.
type retryAfterError struct {
	err  error
	wait time.Duration
}

func (e *retryAfterError) Error() string { return e.err.Error() }
func (e *retryAfterError) Unwrap() error { return e.err }

// MaxRetryAfter bounds the wait a Retry-After header can ask for.
const MaxRetryAfter = 60 * time.Second

// parseRetryAfter reads a Retry-After value: seconds or an HTTP date.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return 0, false
		}
		if s > int64(MaxRetryAfter/time.Second) {
			return MaxRetryAfter, true
		}
		return time.Duration(s) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	return max(t.Sub(now), 0), true
}

// post sends one encoded chat completion request.
func (m *Client) post(ctx context.Context, body []byte) (*chatResponse, error) {
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, m.at("/chat/completions"), bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	m.authorize(hreq)
	resp, err := m.hc.Do(hreq)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	limit := cmp.Or(m.cfg.MaxAnswerBytes, DefaultMaxAnswerBytes)
	data, err := io.ReadAll(io.LimitReader(resp.Body, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, &AnswerTooLargeError{Limit: limit, Flag: m.cfg.MaxAnswerFlag}
	}
	if resp.StatusCode >= 400 {
		var answer error
		var er openai.ErrorResponse
		if json.Unmarshal(data, &er) == nil && er.Error != nil {
			er.Error.HTTPStatusCode, er.Error.HTTPStatus = resp.StatusCode, resp.Status
			answer = er.Error
			if resp.StatusCode == http.StatusBadRequest && contextOverflow(er.Error.Message) {
				return nil, &ContextOverflowError{Message: er.Error.Message}
			}
		} else {
			if resp.StatusCode == http.StatusBadRequest && contextOverflow(string(data)) {
				return nil, &ContextOverflowError{Message: strings.TrimSpace(string(data))}
			}
			answer = &openai.RequestError{HTTPStatus: resp.Status, HTTPStatusCode: resp.StatusCode, Err: fmt.Errorf("error answer: %.200q", data), Body: data}
		}
		if resp.StatusCode == http.StatusTooManyRequests || resp.StatusCode == http.StatusServiceUnavailable {
			if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
				return nil, &retryAfterError{err: answer, wait: d}
			}
		}
		return nil, answer
	}
	var out chatResponse
	if err := json.Unmarshal(data, &out); err != nil {
		return nil, fmt.Errorf("%s: decode answer: %w", m.cfg.Model, err)
	}
	return &out, nil
}

// DefaultMaxAnswerBytes bounds an answer's body by default: 16 MiB, room
// for n = 9 answers of 1,500 tokens each (the planner's default
// max_tokens) with their log-probabilities and token ids (about 1.4 MB),
// ten times over.
const DefaultMaxAnswerBytes = 16 << 20

// AnswerTooLargeError is the error of an answer longer than the client's
// limit: read no further, not retried (the endpoint would answer alike).
type AnswerTooLargeError struct {
	Limit int64
	Flag  string // the flag that raises the limit, if any
}

func (e *AnswerTooLargeError) Error() string {
	msg := fmt.Sprintf("the answer is longer than the limit of %d bytes (%.1f MiB)", e.Limit, float64(e.Limit)/(1<<20))
	if e.Flag != "" {
		msg += "; " + e.Flag + " raises it"
	}
	return msg
}

// retry runs attempt until it succeeds, fails in a way that retrying
// cannot fix, or Attempts are used up, with a deadline per attempt and
// backoff with jitter between attempts.
func (m *Client) retry(ctx context.Context, attempt func(context.Context) (*chatResponse, error)) (*chatResponse, error) {
	var last error
	for n := 1; n <= m.cfg.Attempts; n++ {
		actx, cancel := context.WithTimeout(ctx, m.cfg.AttemptTimeout)
		resp, err := attempt(actx)
		cancel()
		if err == nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			return nil, fmt.Errorf("%s: %w", m.cfg.Model, ctx.Err())
		}
		last = err
		if !retryable(err, actx) {
			break
		}
		if n == m.cfg.Attempts {
			return nil, m.secrets.Error(fmt.Errorf("%s at %s: %w", m.cfg.Model, m.cfg.BaseURL, &UnavailableError{Endpoint: m.cfg.BaseURL, Err: last}))
		}
		wait := m.backoff(n)
		var ra *retryAfterError
		if errors.As(err, &ra) {
			// The server said when to come back: its wait, bounded by
			// MaxRetryAfter and by what is left of ctx.
			wait = min(ra.wait, MaxRetryAfter)
			if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
				wait = max(time.Until(dl), 0)
			}
		}
		// At debug: an endpoint that is down fails every call in flight;
		// its user (rollout's outage breaker, the judge) says so once.
		m.log.Debug("model call failed; retrying", "attempt", n, "wait", wait, "err", m.secrets.Error(err))
		if err := m.sleep(ctx, wait); err != nil {
			return nil, fmt.Errorf("%s: %w", m.cfg.Model, err)
		}
	}
	return nil, m.secrets.Error(fmt.Errorf("%s at %s: %w", m.cfg.Model, m.cfg.BaseURL, last))
}

func (m *Client) backoff(attempt int) time.Duration {
	d := m.cfg.Backoff << (attempt - 1)
	if d > 30*time.Second || d <= 0 {
		d = 30 * time.Second
	}
	return d/2 + time.Duration(rand.Int64N(int64(d/2)+1))
}

// RefusesEveryRequest reports whether err is an endpoint's answer that
// every request will get alike, whatever its content: 401 or 403 (a wrong
// key), 404 or 405 (a wrong URL or route). Not an outage (the endpoint
// answers) and not an episode's outcome: a run that meets it stops.
func RefusesEveryRequest(err error) bool {
	code := 0
	var api *openai.APIError
	var re *openai.RequestError
	switch {
	case errors.As(err, &api):
		code = api.HTTPStatusCode
	case errors.As(err, &re):
		code = re.HTTPStatusCode
	}
	switch code {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusMethodNotAllowed:
		return true
	}
	return false
}

// retryable reports whether a failed attempt may succeed when repeated.
func retryable(err error, attemptCtx context.Context) bool {
	var big *AnswerTooLargeError
	if errors.Is(err, ErrContextOverflow) || errors.As(err, &big) {
		return false
	}
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
// per request (each with its own seed when p has one).
func (m *Client) Sample(ctx context.Context, msgs []openai.ChatCompletionMessage, n int, p Params) ([]Choice, error) {
	if n < 1 {
		n = 1
	}
	out, err := m.Chat(ctx, Request{Messages: msgs, N: n, Params: p})
	if err != nil {
		return nil, err
	}
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
			q := p
			if p.Seed != nil {
				s := *p.Seed + int64(len(out)+i)
				q.Seed = &s
			}
			extra[i], errs[i] = m.Chat(ctx, Request{Messages: msgs, N: 1, Params: q})
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

// DataURI encodes a PNG as a data URI, the way chat messages carry images.
func DataURI(png []byte) string {
	return "data:image/png;base64," + base64.StdEncoding.EncodeToString(png)
}
