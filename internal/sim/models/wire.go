package models

// SIMULATOR: the OpenAI/vLLM chat-completions wire format of the simulated
// model endpoints, written here without any client library.

import (
	"bytes"
	"cmp"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	_ "image/jpeg" // screenshots may be sent as JPEG
	_ "image/png"
	"io"
	"math"
	"math/rand/v2"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/infra/clock"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// ---- request -------------------------------------------------------------

type wireRequest struct {
	Model               string          `json:"model"`
	Messages            rawJSON         `json:"messages"` // parsed by parseMessages`
	N                   *int            `json:"n"`
	Temperature         *float64        `json:"temperature"`
	TopP                *float64        `json:"top_p"`
	MaxTokens           *int            `json:"max_tokens"`
	MaxCompletionTokens *int            `json:"max_completion_tokens"`
	Seed                *int64          `json:"seed"`
	User                string          `json:"user"`
	Logprobs            *bool           `json:"logprobs"`
	TopLogprobs         *int            `json:"top_logprobs"`
	Stop                json.RawMessage `json:"stop"`
	Stream              bool            `json:"stream"`
	// vLLM's sampling extras and token-id options (ChatCompletionRequest
	// in vllm/entrypoints/openai/chat_completion/protocol.py).
	TopK                   *int     `json:"top_k"`
	MinP                   *float64 `json:"min_p"`
	RepetitionPenalty      *float64 `json:"repetition_penalty"`
	PresencePenalty        *float64 `json:"presence_penalty"`
	FrequencyPenalty       *float64 `json:"frequency_penalty"`
	ReturnTokenIDs         *bool    `json:"return_token_ids"`
	ReturnTokensAsTokenIDs *bool    `json:"return_tokens_as_token_ids"`
}

type wireMessage struct {
	Role    string  `json:"role"`
	Content rawJSON `json:"content"`
}

// rawJSON is json.RawMessage without the copy: it keeps a slice of the
// request body, which json.Unmarshal does not reuse and which outlives
// the call's parsing.
type rawJSON []byte

func (r *rawJSON) UnmarshalJSON(b []byte) error {
	*r = b
	return nil
}

// rawURL is a JSON string kept as bytes, a slice of the request body
// when it has no escapes (a base64 data URI never has): screenshots are
// not copied on their way to the base64 decoder.
type rawURL []byte

func (u *rawURL) UnmarshalJSON(b []byte) error {
	if len(b) >= 2 && b[0] == '"' && b[len(b)-1] == '"' && bytes.IndexByte(b, '\\') < 0 {
		*u = b[1 : len(b)-1]
		return nil
	}
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s != nil {
		*u = []byte(*s)
	}
	return nil
}

type wirePart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL rawURL `json:"url"`
	} `json:"image_url"`
}

// ---- response ------------------------------------------------------------

type wireResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	Choices           []wireChoice `json:"choices"`
	Usage             wireUsage    `json:"usage"`
	SystemFingerprint string       `json:"system_fingerprint"`
	// PromptTokenIDs: vLLM's prompt token ids, with return_token_ids.
	PromptTokenIDs []int `json:"prompt_token_ids,omitempty"`
}

type wireChoice struct {
	Index        int           `json:"index"`
	Message      wireAnswer    `json:"message"`
	Logprobs     *wireLogprobs `json:"logprobs"`
	FinishReason string        `json:"finish_reason"`
	// TokenIDs: vLLM's completion token ids, with return_token_ids.
	TokenIDs []int `json:"token_ids,omitempty"`
}

type wireAnswer struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

type wireLogprobs struct {
	Content []wireTokenLogprob `json:"content"`
}

type wireTokenLogprob struct {
	Token       string        `json:"token"`
	Logprob     float64       `json:"logprob"`
	Bytes       []int         `json:"bytes"`
	TopLogprobs []wireTopProb `json:"top_logprobs"`
}

type wireTopProb struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type wireUsage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
}

type wireModelList struct {
	Object string      `json:"object"`
	Data   []wireModel `json:"data"`
}

type wireModel struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	Root    string `json:"root"`
}

type wireError struct {
	Error wireErrorBody `json:"error"`
}

type wireErrorBody struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    string  `json:"code"`
}

// apiError is an error answered in the OpenAI error shape.
type apiError struct {
	status int
	typ    string
	param  string
	code   string
	msg    string
}

func (e *apiError) Error() string { return e.msg }

func badRequest(param, format string, args ...any) *apiError {
	msg := fmt.Sprintf(format, args...)
	if param != "" {
		msg = param + ": " + msg
	}
	return &apiError{status: http.StatusBadRequest, typ: "invalid_request_error", param: param, code: "invalid_value", msg: msg}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	body, err := json.Marshal(v)
	if err != nil { // cannot happen for our wire types
		status, body = http.StatusInternalServerError, []byte(`{"error":{"message":"encoding failed","type":"server_error","param":null,"code":"internal_error"}}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

func writeAPIError(w http.ResponseWriter, e *apiError) {
	var param *string
	if e.param != "" {
		p := e.param
		param = &p
	}
	writeJSON(w, e.status, wireError{Error: wireErrorBody{Message: e.msg, Type: e.typ, Param: param, Code: e.code}})
}

// ---- parsed call ---------------------------------------------------------

// chatCall is a validated request.
type chatCall struct {
	msgs         []callMessage
	n            int
	temp         float64 // 1 when not given (after the generation config)
	topK         int     // 0 or -1: off (after the generation config)
	tempSet      bool    // the request gave temperature
	topKSet      bool    // the request gave top_k
	tokenIDs     bool    // return_token_ids
	tokensAsIDs  bool    // return_tokens_as_token_ids
	maxTokens    int     // 0: unlimited
	seed         *int64
	logprobs     bool
	topLogprobs  int
	stop         []string
	content      [32]byte // hash of the messages (roles, texts, images) and of a model other than the endpoint's first
	model        string   // the model the call asks for
	promptTokens int

	// Per-call memos shared by the choices of one call (a call is served
	// by one goroutine).
	taskDone bool
	task     *tasks.Task
	next     *tasks.OracleStep // planner: the correct next step
	frames   *judgeFrames
}

type callMessage struct {
	role   string
	text   string // the text parts joined by "\n"
	images []callImage
}

type callImage struct {
	data []byte // decoded bytes
	w, h int
	// label is the text part just before the image in its message, if
	// any (a judge request labels each frame with its step there).
	label string
}

// userText joins the text of every user message.
func (c *chatCall) userText() string {
	var b strings.Builder
	for _, m := range c.msgs {
		if m.role == "user" && m.text != "" {
			if b.Len() > 0 {
				b.WriteByte('\n')
			}
			b.WriteString(m.text)
		}
	}
	return b.String()
}

// images returns every image of the request in order.
func (c *chatCall) images() []callImage {
	var out []callImage
	for _, m := range c.msgs {
		out = append(out, m.images...)
	}
	return out
}

var knownRoles = map[string]bool{"system": true, "developer": true, "user": true, "assistant": true, "tool": true}

// imageTokens is a plausible vision-token count for a w×h image: one
// token per 28×28 pixel patch (Qwen2.5-VL after patch merging) plus the
// two vision markers.
func imageTokens(w, h int) int {
	return ((w+27)/28)*((h+27)/28) + 2
}

// textTokens approximates a text's token count at 4 bytes per token.
func textTokens(s string) int { return (len(s) + 3) / 4 }

func parseCall(body []byte, cache *msgCache) (*chatCall, *wireRequest, *apiError) {
	var req wireRequest
	body, urls := liftDataURIs(body)
	if err := json.Unmarshal(body, &req); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			return nil, nil, badRequest(te.Field, "cannot use a JSON %s here (want %s)", te.Value, te.Type)
		}
		return nil, nil, badRequest("", "request body is not valid JSON: %v", err)
	}
	c := &chatCall{n: 1, temp: 1}
	if req.Stream {
		return nil, nil, badRequest("stream", "streaming is not supported by the simulated endpoints")
	}
	if m := bytes.TrimSpace(req.Messages); len(m) == 0 || string(m) == "null" || string(m) == "[]" {
		return nil, nil, badRequest("messages", "at least one message is required")
	}
	if req.N != nil {
		if *req.N < 1 {
			return nil, nil, badRequest("n", "must be at least 1, got %d", *req.N)
		}
		if *req.N > MaxChoices {
			return nil, nil, badRequest("n", "must be at most %d, got %d", MaxChoices, *req.N)
		}
		c.n = *req.N
	}
	if req.Temperature != nil {
		t := *req.Temperature
		if !(t >= 0 && t <= 2) {
			return nil, nil, badRequest("temperature", "must be in [0, 2], got %v", t)
		}
		c.temp, c.tempSet = t, true
	}
	if req.TopK != nil {
		if k := *req.TopK; k < -1 {
			return nil, nil, badRequest("top_k", "must be -1 (disable), 0 (disable) or at least 1, got %d", k)
		}
		c.topK, c.topKSet = *req.TopK, true
	}
	// The float parameters' ranges, lo excluded when open, in the order
	// their errors are reported.
	for _, r := range []struct {
		name   string
		v      *float64
		lo, hi float64
		open   bool
	}{
		{"min_p", req.MinP, 0, 1, false},
		{"repetition_penalty", req.RepetitionPenalty, 0, 2, true},
		{"presence_penalty", req.PresencePenalty, -2, 2, false},
		{"frequency_penalty", req.FrequencyPenalty, -2, 2, false},
		{"top_p", req.TopP, 0, 1, true},
	} {
		if r.v == nil {
			continue
		}
		if p := *r.v; !(p >= r.lo && p <= r.hi) || r.open && p == r.lo {
			bracket := "["
			if r.open {
				bracket = "("
			}
			return nil, nil, badRequest(r.name, "must be in %s%v, %v], got %v", bracket, r.lo, r.hi, p)
		}
	}
	c.tokenIDs = req.ReturnTokenIDs != nil && *req.ReturnTokenIDs
	c.tokensAsIDs = req.ReturnTokensAsTokenIDs != nil && *req.ReturnTokensAsTokenIDs
	for _, mt := range []struct {
		name string
		v    *int
	}{{"max_tokens", req.MaxTokens}, {"max_completion_tokens", req.MaxCompletionTokens}} {
		if mt.v == nil {
			continue
		}
		if *mt.v < 1 {
			return nil, nil, badRequest(mt.name, "must be at least 1, got %d", *mt.v)
		}
		if c.maxTokens == 0 || *mt.v < c.maxTokens {
			c.maxTokens = *mt.v
		}
	}
	c.seed = req.Seed
	c.logprobs = req.Logprobs != nil && *req.Logprobs
	if req.TopLogprobs != nil {
		k := *req.TopLogprobs
		if k < 0 || k > 20 {
			return nil, nil, badRequest("top_logprobs", "must be in [0, 20], got %d", k)
		}
		if k > 0 && !c.logprobs {
			return nil, nil, badRequest("top_logprobs", "requires logprobs to be true")
		}
		c.topLogprobs = k
	}
	if len(req.Stop) > 0 && string(req.Stop) != "null" {
		var one string
		if err := json.Unmarshal(req.Stop, &one); err == nil {
			if one != "" {
				c.stop = []string{one}
			}
		} else if err := json.Unmarshal(req.Stop, &c.stop); err != nil {
			return nil, nil, badRequest("stop", "must be a string or an array of strings")
		}
		if len(c.stop) > 4 {
			return nil, nil, badRequest("stop", "at most 4 stop sequences, got %d", len(c.stop))
		}
		for i, s := range c.stop {
			if s == "" {
				return nil, nil, badRequest(fmt.Sprintf("stop[%d]", i), "must not be empty")
			}
		}
	}

	pm, aerr := cache.parse(req.Messages, urls)
	if aerr != nil {
		return nil, nil, aerr
	}
	c.msgs, c.content, c.promptTokens = pm.msgs, pm.content, pm.tokens
	return c, &req, nil
}

// liftedURL stands, in a request body parsed by parseCall, for the i-th
// data URI lifted out of it (liftDataURIs): liftedURL + i. It starts with
// a NUL and holds a random token drawn when the process starts, so no
// client can send it; liftedJSON is its JSON form in the skeleton.
var liftedURL, liftedJSON = func() (string, string) {
	var b [8]byte
	if _, err := crand.Read(b[:]); err != nil {
		panic(err)
	}
	tok := "lifted-" + hex.EncodeToString(b[:]) + ":"
	return "\x00" + tok, `\u0000` + tok
}()

// uriByte are the bytes of a data URI that JSON carries as they are and
// a base64 image data URI is made of: a string of only these decodes to
// itself.
var uriByte = func() (t [256]bool) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=;:,.-_") {
		t[c] = true
	}
	return t
}()

// liftDataURIs returns body with each image_url's data URI string
// ("url": "data:image/...") that has neither escapes nor other bytes than
// a base64 data URI's replaced by a short JSON string (liftedURL + its
// index), and those URIs in order. The JSON parser then reads kilobytes
// instead of megabytes of base64, once per nesting level: what is lifted
// is exactly what it would have decoded, so the request means the same.
// A body without such a URI comes back as it is.
func liftDataURIs(body []byte) ([]byte, [][]byte) {
	const start = `"data:image/`
	var skel []byte
	var urls [][]byte
	last := 0
	for off := 0; ; {
		i := bytes.Index(body[off:], []byte(start))
		if i < 0 {
			break
		}
		i += off
		off = i + len(start)
		before := bytes.TrimRight(body[last:i], " \t\r\n")
		colon, ok := bytes.CutSuffix(before, []byte(":"))
		if !ok || !bytes.HasSuffix(bytes.TrimRight(colon, " \t\r\n"), []byte(`"url"`)) {
			continue
		}
		j := bytes.IndexByte(body[i+1:], '"')
		if j < 0 {
			break
		}
		uri := body[i+1 : i+1+j]
		plain := true
		for _, c := range uri {
			if !uriByte[c] {
				plain = false
				break
			}
		}
		if !plain {
			continue
		}
		skel = append(skel, body[last:i+1]...)
		skel = append(skel, liftedJSON...)
		skel = strconv.AppendInt(skel, int64(len(urls)), 10)
		urls = append(urls, uri)
		last = i + 1 + j
		off = last
	}
	if urls == nil {
		return body, nil
	}
	return append(skel, body[last:]...), urls
}

// unlift returns the data URI u stands for when it is a liftedURL.
func unlift(u []byte, urls [][]byte) []byte {
	rest, ok := bytes.CutPrefix(u, []byte(liftedURL))
	if !ok {
		return u
	}
	i, err := strconv.Atoi(string(rest))
	if err != nil || i < 0 || i >= len(urls) {
		return u
	}
	return urls[i]
}

// parsedMessages are a request's messages as a call uses them.
type parsedMessages struct {
	msgs    []callMessage
	content [32]byte // hash of the messages (roles, texts, images)
	tokens  int      // prompt tokens
}

// msgCache keeps the last few parsed message lists by the SHA-256 of their
// JSON, so that the same messages sent again with other sampling settings
// (a judge's votes: megabytes of images) are not decoded again. The parsed
// form is read-only once cached.
type msgCache struct {
	mu    sync.Mutex
	order [][32]byte
	byKey map[[32]byte]*parsedMessages
}

// msgCacheSize bounds the cached message lists.
const msgCacheSize = 8

// parse returns the parsed messages of raw (a JSON array; urls the data
// URIs lifted out of it), from the cache when it has them. A nil cache
// parses every time.
func (mc *msgCache) parse(raw []byte, urls [][]byte) (*parsedMessages, *apiError) {
	if mc == nil {
		return parseMessages(raw, urls)
	}
	h := sha256.New()
	var n8 [8]byte
	for _, b := range append([][]byte{raw}, urls...) {
		binary.LittleEndian.PutUint64(n8[:], uint64(len(b)))
		h.Write(n8[:])
		h.Write(b)
	}
	var key [32]byte
	h.Sum(key[:0])
	mc.mu.Lock()
	pm := mc.byKey[key]
	mc.mu.Unlock()
	if pm != nil {
		return pm, nil
	}
	pm, aerr := parseMessages(raw, urls)
	if aerr != nil {
		return nil, aerr
	}
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.byKey == nil {
		mc.byKey = map[[32]byte]*parsedMessages{}
	}
	if _, ok := mc.byKey[key]; !ok {
		if len(mc.order) >= msgCacheSize {
			delete(mc.byKey, mc.order[0])
			mc.order = mc.order[1:]
		}
		mc.order = append(mc.order, key)
		mc.byKey[key] = pm
	}
	return pm, nil
}

// parseMessages validates and decodes the messages of a request; urls
// are the data URIs lifted out of them (liftDataURIs).
func parseMessages(raw []byte, urls [][]byte) (*parsedMessages, *apiError) {
	var wms []wireMessage
	if err := json.Unmarshal(raw, &wms); err != nil {
		return nil, badRequest("messages", "must be an array of messages: %v", err)
	}
	if len(wms) == 0 {
		return nil, badRequest("messages", "at least one message is required")
	}
	pm := &parsedMessages{}
	h := sha256.New()
	field := func(s string) {
		var n [8]byte
		binary.LittleEndian.PutUint64(n[:], uint64(len(s)))
		h.Write(n[:])
		io.WriteString(h, s)
	}
	var n8 [8]byte
	tokens := 2
	for i, wm := range wms {
		if !knownRoles[wm.Role] {
			return nil, badRequest(fmt.Sprintf("messages[%d].role", i), "unknown role %q (want system, user, assistant, tool or developer)", wm.Role)
		}
		m := callMessage{role: wm.Role}
		field("role")
		field(wm.Role)
		tokens += 4
		raw := bytes.TrimSpace(wm.Content)
		switch {
		case len(raw) == 0 || string(raw) == "null":
			// An assistant turn may come without content.
		case raw[0] == '"':
			if err := json.Unmarshal(raw, &m.text); err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "invalid string: %v", err)
			}
			field("text")
			field(m.text)
			tokens += textTokens(m.text)
		case raw[0] == '[':
			var parts []wirePart
			if err := json.Unmarshal(raw, &parts); err != nil {
				return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "must be a string or an array of content parts: %v", err)
			}
			var texts []string
			label := ""
			for j, p := range parts {
				param := fmt.Sprintf("messages[%d].content[%d]", i, j)
				switch p.Type {
				case "text":
					texts = append(texts, p.Text)
					label = p.Text
					field("text")
					field(p.Text)
					tokens += textTokens(p.Text)
				case "image_url":
					if p.ImageURL == nil || len(p.ImageURL.URL) == 0 {
						return nil, badRequest(param+".image_url.url", "an image_url part needs a url")
					}
					u := unlift(p.ImageURL.URL, urls)
					img, err := decodeDataURI(u)
					if err != nil {
						return nil, badRequest(param+".image_url.url", "%v", err)
					}
					img.label, label = label, ""
					m.images = append(m.images, img)
					field("image")
					binary.LittleEndian.PutUint64(n8[:], uint64(len(u)))
					h.Write(n8[:])
					h.Write(u)
					tokens += imageTokens(img.w, img.h)
				default:
					return nil, badRequest(param+".type", "unknown content part type %q (want text or image_url)", p.Type)
				}
			}
			m.text = strings.Join(texts, "\n")
		default:
			return nil, badRequest(fmt.Sprintf("messages[%d].content", i), "must be a string or an array of content parts")
		}
		pm.msgs = append(pm.msgs, m)
	}
	h.Sum(pm.content[:0])
	pm.tokens = tokens
	return pm, nil
}

// decodeDataURI decodes a "data:image/...;base64,..." URL. The simulator
// is offline: it does not fetch http(s) images.
func decodeDataURI(u []byte) (callImage, error) {
	rest, ok := bytes.CutPrefix(u, []byte("data:"))
	if !ok {
		scheme := u
		if i := bytes.IndexByte(scheme, ':'); i >= 0 {
			scheme = scheme[:i]
		}
		if len(scheme) > 16 {
			scheme = append(scheme[:16:16], "..."...)
		}
		return callImage{}, fmt.Errorf("only data: URIs are accepted by the simulated endpoints (got %q)", scheme)
	}
	meta, payload, ok := bytes.Cut(rest, []byte(","))
	if !ok {
		return callImage{}, errors.New("data URI without ','")
	}
	if !bytes.HasPrefix(meta, []byte("image/")) || !bytes.HasSuffix(meta, []byte(";base64")) {
		return callImage{}, fmt.Errorf("want a base64 image data URI (data:image/png;base64,...), got media type %q", meta)
	}
	data := make([]byte, base64.StdEncoding.DecodedLen(len(payload)))
	n, err := base64.StdEncoding.Decode(data, payload)
	if err != nil {
		return callImage{}, fmt.Errorf("invalid base64 image data: %v", err)
	}
	data = data[:n]
	cfg, _, err := image.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return callImage{}, fmt.Errorf("not a decodable PNG or JPEG image: %v", err)
	}
	return callImage{data: data, w: cfg.Width, h: cfg.Height}, nil
}

// ---- endpoint ------------------------------------------------------------

// answerFunc writes one choice's content. r is the choice's random
// stream; temp the request temperature.
type answerFunc func(c *chatCall, r *rand.Rand, temp float64) string

type endpoint struct {
	m      *Endpoints
	kind   string
	model  string
	others []string // further model ids it serves (the judge's second model)
	root   string   // GET /v1/models "root" (empty: the model id)
	faults fault.Faults
	answer answerFunc
	// ignoreN: one choice whatever n asks (EndpointConfig.IgnoreN).
	ignoreN bool
	// gen fills the sampling parameters a request leaves out
	// (EndpointConfig.Generation); maxModelLen is the context length
	// (EndpointConfig.MaxModelLen, 0: unlimited).
	gen         *GenerationConfig
	maxModelLen int

	msgs msgCache // parsed messages of recent calls

	mu       sync.Mutex
	seen     map[[16]byte]uint64 // calls per (content, seed)
	answered []string            // the "user" field of every call that got an answer, in order
}

// served names the model ids e serves: "a" or "a", "b".
func (e *endpoint) served() string {
	out := strconv.Quote(e.model)
	for _, id := range e.others {
		out += ", " + strconv.Quote(id)
	}
	return out
}

func newEndpoint(m *Endpoints, kind string, ec EndpointConfig, answer answerFunc) *endpoint {
	if replay := ec.Replay; len(replay) > 0 {
		model := answer
		answer = func(c *chatCall, r *rand.Rand, temp float64) string {
			text := c.userText()
			for _, rp := range replay {
				if strings.Contains(text, rp.Match) {
					return rp.Answer
				}
			}
			return model(c, r, temp)
		}
	}
	return &endpoint{m: m, kind: kind, model: ec.Model, root: cmp.Or(ec.Root, ec.Model), faults: ec.Faults, answer: answer, ignoreN: ec.IgnoreN,
		gen: ec.Generation, maxModelLen: ec.MaxModelLen, seen: map[[16]byte]uint64{}}
}

// stream derives an independent random stream from the configuration
// seed, the endpoint and the given parts.
func (e *endpoint) stream(parts ...any) *rand.Rand {
	h := sha256.New()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], uint64(e.m.cfg.Seed))
	h.Write(b[:])
	io.WriteString(h, e.kind)
	for _, p := range parts {
		switch v := p.(type) {
		case string:
			binary.LittleEndian.PutUint64(b[:], uint64(len(v)))
			h.Write(b[:])
			io.WriteString(h, v)
		case [32]byte:
			h.Write(v[:])
		case uint64:
			binary.LittleEndian.PutUint64(b[:], v)
			h.Write(b[:])
		case int:
			binary.LittleEndian.PutUint64(b[:], uint64(v))
			h.Write(b[:])
		default:
			panic(fmt.Sprintf("sim: stream part of type %T", p))
		}
	}
	var sum [32]byte
	h.Sum(sum[:0])
	return rand.New(rand.NewPCG(binary.LittleEndian.Uint64(sum[:8]), binary.LittleEndian.Uint64(sum[8:16])))
}

func (e *endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimSuffix(r.URL.Path, "/")
	switch path {
	case "/v1/chat/completions":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			writeAPIError(w, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", code: "method_not_allowed", msg: "use POST for " + path})
			return
		}
		e.serveChat(w, r)
	case "/v1/models":
		if r.Method != http.MethodGet {
			w.Header().Set("Allow", "GET")
			writeAPIError(w, &apiError{status: http.StatusMethodNotAllowed, typ: "invalid_request_error", code: "method_not_allowed", msg: "use GET for " + path})
			return
		}
		list := wireModelList{Object: "list", Data: []wireModel{{
			ID: e.model, Object: "model", Created: e.m.cfg.Created, OwnedBy: "codapipe-simulator", Root: e.root,
		}}}
		for _, id := range e.others {
			list.Data = append(list.Data, wireModel{ID: id, Object: "model", Created: e.m.cfg.Created, OwnedBy: "codapipe-simulator", Root: id})
		}
		writeJSON(w, http.StatusOK, list)
	case "/health":
		w.WriteHeader(http.StatusOK)
	default:
		writeAPIError(w, &apiError{status: http.StatusNotFound, typ: "invalid_request_error", code: "not_found",
			msg: fmt.Sprintf("no route %s %s on the simulated %s endpoint (serves POST /v1/chat/completions, GET /v1/models)", r.Method, r.URL.Path, e.kind)})
	}
}

func (e *endpoint) serveChat(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	var buf bytes.Buffer
	if n := r.ContentLength; n > 0 && n <= e.m.cfg.MaxRequestBytes {
		buf.Grow(int(n) + bytes.MinRead)
	}
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, e.m.cfg.MaxRequestBytes))
	body := buf.Bytes()
	if err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			writeAPIError(w, &apiError{status: http.StatusRequestEntityTooLarge, typ: "invalid_request_error", code: "request_too_large",
				msg: fmt.Sprintf("request body larger than %d bytes", mb.Limit)})
			return
		}
		writeAPIError(w, badRequest("", "reading the request body: %v", err))
		return
	}
	if f := e.m.cfg.OnRequest; f != nil {
		f(e.kind, body)
	}
	call, req, aerr := parseCall(body, &e.msgs)
	if aerr != nil {
		writeAPIError(w, aerr)
		return
	}
	// What the request left out comes from the model's generation
	// config, as in vLLM.
	if g := e.gen; g != nil {
		if !call.tempSet && g.Temperature != nil {
			call.temp = *g.Temperature
		}
		if !call.topKSet && g.TopK != nil {
			call.topK = *g.TopK
		}
	}
	if n := e.maxModelLen; n > 0 && call.promptTokens+call.maxTokens > n {
		// vLLM's wording (vllm/entrypoints/openai/serving_engine.py).
		writeAPIError(w, &apiError{status: http.StatusBadRequest, typ: "BadRequestError", code: "400",
			msg: fmt.Sprintf("This model's maximum context length is %d tokens. However, you requested %d tokens (%d in the messages, %d in the completion). Please reduce the length of the messages or completion.",
				n, call.promptTokens+call.maxTokens, call.promptTokens, call.maxTokens)})
		return
	}
	if e.ignoreN {
		call.n = 1
	}
	call.model = e.model
	if req.Model != "" && req.Model != e.model {
		if !slices.Contains(e.others, req.Model) {
			writeAPIError(w, &apiError{status: http.StatusNotFound, typ: "NotFoundError", param: "model", code: "model_not_found",
				msg: fmt.Sprintf("model: the model `%s` does not exist (this simulated %s serves %s)", req.Model, e.kind, e.served())})
			return
		}
		// Another model: its draws are its own.
		call.model = req.Model
		h := sha256.New()
		h.Write(call.content[:])
		io.WriteString(h, "\x00model\x00"+req.Model)
		h.Sum(call.content[:0])
	}

	// Which call is this for its (content, seed)? Unseeded requests use
	// the count as their sample index; every request uses it for faults,
	// so that a retried call may succeed.
	seedTag := "none"
	if call.seed != nil {
		seedTag = fmt.Sprintf("seed:%d", *call.seed)
	}
	var ck [16]byte
	{
		h := sha256.New()
		h.Write(call.content[:])
		io.WriteString(h, seedTag)
		copy(ck[:], h.Sum(nil))
	}
	e.mu.Lock()
	nth := e.seen[ck]
	e.seen[ck] = nth + 1
	e.mu.Unlock()

	outcome, lat := e.faults.Draw(e.stream("fault", call.content, seedTag, nth))
	ctx := r.Context()
	// The latency runs from the call's arrival: reading and parsing the
	// request (megabytes of images for a judge) are part of it.
	if err := clock.Sleep(ctx, time.Until(arrived.Add(e.m.cfg.Clock.Real(lat)))); err != nil {
		return // the client is gone
	}
	switch outcome {
	case fault.Hang:
		e.faults.Hang(ctx, e.m.cfg.Clock)
		if ctx.Err() != nil {
			return
		}
	case fault.Error:
		writeAPIError(w, &apiError{status: http.StatusInternalServerError, typ: "server_error", code: "internal_error",
			msg: fmt.Sprintf("simulated %s failure (injected fault)", e.kind)})
		return
	case fault.RateLimit:
		// One simulated second, in whole wall seconds (0 on a fast
		// clock: the client retries at once, as the simulated time says).
		w.Header().Set("Retry-After", fmt.Sprint(int(math.Round(e.m.cfg.Clock.Real(time.Second).Seconds()))))
		writeAPIError(w, &apiError{status: http.StatusTooManyRequests, typ: "rate_limit_error", code: "rate_limit_exceeded",
			msg: fmt.Sprintf("simulated %s rate limit (injected fault)", e.kind)})
		return
	}

	// Greedy decoding: a temperature of (about) 0 or top_k 1; then every
	// choice is the same and the answer is the likeliest one.
	greedy := call.temp <= GreedyTemperature || call.topK == 1
	temp := call.temp
	if greedy {
		temp = 0
	}
	var base []any
	switch {
	case greedy:
		base = []any{"greedy", call.content}
	case call.seed != nil:
		base = []any{"seeded", call.content, uint64(*call.seed)}
	default:
		base = []any{"sampled", call.content, nth}
	}
	resp := wireResponse{
		Object:            "chat.completion",
		Created:           e.m.cfg.Created,
		Model:             e.model,
		SystemFingerprint: "codapipe-sim",
	}
	idh := sha256.New()
	io.WriteString(idh, e.model)
	io.WriteString(idh, seedTag)
	idh.Write(call.content[:])
	fmt.Fprintf(idh, "/%d/%d", nth, call.n)
	resp.ID = "chatcmpl-sim-" + hex.EncodeToString(idh.Sum(nil)[:12])

	completion := 0
	for i := 0; i < call.n; i++ {
		choiceIdx := i
		cbase := base
		switch {
		case greedy:
			choiceIdx = 0 // greedy decoding: every choice is the same
		case call.seed != nil:
			// vLLM runs choice i of a seeded request as a request of its
			// own with seed + i (ParentRequest._get_child_sampling_params
			// in vllm/v1/engine/parallel_sampling.py): the same answer as
			// choice 0 of a request with that seed.
			choiceIdx = 0
			cbase = []any{"seeded", call.content, uint64(*call.seed + int64(i))}
		}
		parts := append(append([]any{}, cbase...), "choice", choiceIdx)
		text := e.answer(call, e.stream(parts...), temp)
		toks, text, finish := generated(text, call.stop, call.maxTokens)
		ch := wireChoice{Index: i, Message: wireAnswer{Role: "assistant", Content: text}, FinishReason: finish}
		if call.logprobs {
			ch.Logprobs = fakeLogprobs(toks, call.topLogprobs, call.tokensAsIDs, e.stream(append(parts, "logprobs")...))
		}
		if call.tokenIDs {
			ch.TokenIDs = make([]int, len(toks))
			for k, t := range toks {
				ch.TokenIDs[k] = tokenID(t)
			}
		}
		resp.Choices = append(resp.Choices, ch)
		completion += len(toks)
	}
	resp.Usage = wireUsage{PromptTokens: call.promptTokens, CompletionTokens: completion, TotalTokens: call.promptTokens + completion}
	if call.tokenIDs {
		resp.PromptTokenIDs = promptTokenIDs(call.content, call.promptTokens)
	}
	if ctx.Err() != nil {
		return
	}
	e.mu.Lock()
	e.answered = append(e.answered, req.User)
	e.mu.Unlock()
	writeJSON(w, http.StatusOK, resp)
}

// calls returns the "user" field of every call answered so far.
func (e *endpoint) calls() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]string(nil), e.answered...)
}

// applyStop cuts text before the first stop sequence, and returns the
// sequence that stopped it ("" when none did).
func applyStop(text string, stop []string) (string, string) {
	cut, by := len(text), ""
	for _, s := range stop {
		if i := strings.Index(text, s); s != "" && i >= 0 && i < cut {
			cut, by = i, s
		}
	}
	return text[:cut], by
}

// SimEOS is the simulated planner's end-of-sequence token and SimEOSID its
// id: Qwen2's "<|im_end|>", the end of an assistant turn, which ends the
// generation of the Qwen2.5-VL chat models.
const (
	SimEOS   = "<|im_end|>"
	SimEOSID = 151645
)

// generated is what the simulated server generates for an answer text as
// vLLM reports it: the generated tokens, the answer's text and the finish
// reason. The generation ends with SimEOS after the text, or after a stop
// sequence's tokens; vLLM keeps that last token in token_ids and
// logprobs but not in the text (the detokenizer skips the token that
// stopped the request; include_stop_str_in_output is false), finish_reason
// "stop". When the generation would be longer than maxTokens (> 0) it is
// cut at maxTokens tokens, without EOS, and the finish reason is "length".
func generated(answer string, stop []string, maxTokens int) (toks []string, text, finish string) {
	text, by := applyStop(answer, stop)
	toks = splitTokens(text)
	if by != "" {
		toks = append(toks, splitTokens(by)...)
	} else {
		toks = append(toks, SimEOS)
	}
	finish = "stop"
	if maxTokens > 0 && len(toks) > maxTokens {
		toks, finish = toks[:maxTokens], "length"
		var b strings.Builder
		for _, t := range toks {
			if t != SimEOS {
				b.WriteString(t)
			}
		}
		text = b.String()[:min(b.Len(), len(text))]
	}
	return toks, text, finish
}

// splitTokens splits text into simulated tokens of at most 4 bytes that
// never split a UTF-8 sequence; joined they give text back.
func splitTokens(text string) []string {
	var toks []string
	for len(text) > 0 {
		n := 0
		for n < len(text) {
			_, size := utf8.DecodeRuneInString(text[n:])
			if n > 0 && n+size > 4 {
				break
			}
			n += size
		}
		toks = append(toks, text[:n])
		text = text[n:]
	}
	return toks
}

func byteInts(s string) []int {
	out := make([]int, len(s))
	for i := 0; i < len(s); i++ {
		out[i] = int(s[i])
	}
	return out
}

// SimVocab is the size of the simulated tokenizer's vocabulary (Qwen2's
// regular tokens): simulated token ids are below it.
const SimVocab = 151643

// tokenID is the simulated id of a simulated token: the same text has
// the same id.
func tokenID(tok string) int {
	if tok == SimEOS {
		return SimEOSID
	}
	h := sha256.Sum256([]byte(tok))
	return int(binary.LittleEndian.Uint64(h[:8]) % SimVocab)
}

// promptTokenIDs are n plausible prompt token ids derived from the
// messages' hash.
func promptTokenIDs(content [32]byte, n int) []int {
	r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(content[:8]), binary.LittleEndian.Uint64(content[8:16])))
	out := make([]int, n)
	for i := range out {
		out[i] = r.IntN(SimVocab)
	}
	return out
}

// fakeLogprobs returns deterministic, plausible log-probabilities (all
// ≤ 0; the sampled token is the most likely one). With asIDs each token
// is written "token_id:N", as vLLM's return_tokens_as_token_ids does.
func fakeLogprobs(toks []string, top int, asIDs bool, r *rand.Rand) *wireLogprobs {
	lp := &wireLogprobs{Content: make([]wireTokenLogprob, 0, len(toks))}
	for _, t := range toks {
		u := r.Float64()
		v := -u * u * u * 3 // mostly confident, sometimes not
		bs := byteInts(t)   // the token's own bytes, whatever it is written as
		if asIDs {
			t = fmt.Sprintf("token_id:%d", tokenID(t))
		}
		e := wireTokenLogprob{Token: t, Logprob: v, Bytes: bs, TopLogprobs: []wireTopProb{}}
		if top > 0 {
			e.TopLogprobs = append(e.TopLogprobs, wireTopProb{Token: t, Logprob: v, Bytes: bs})
			last := v
			for k := 1; k < top; k++ {
				last -= 0.5 + 3*r.Float64()
				alt := fmt.Sprintf("<alt%d>", k)
				e.TopLogprobs = append(e.TopLogprobs, wireTopProb{Token: alt, Logprob: last, Bytes: byteInts(alt)})
			}
		}
		lp.Content = append(lp.Content, e)
	}
	return lp
}

// temper returns the probability of the more-or-less likely outcome of a
// two-way choice at temperature t: the softmax of the logits (ln p,
// ln(1−p)) divided by t. t = 1 keeps p; greedy picks the likelier outcome
// (ties stay at 0.5); large t approaches 0.5.
func temper(p, t float64) float64 {
	if p <= 0 || p >= 1 || t == 1 {
		return p
	}
	if t <= GreedyTemperature {
		switch {
		case p > 0.5:
			return 1
		case p < 0.5:
			return 0
		}
		return 0.5
	}
	d := (math.Log(1-p) - math.Log(p)) / t
	return 1 / (1 + math.Exp(d))
}
