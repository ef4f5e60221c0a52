package rewardserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/ground"
	"github.com/codapipe/codapipe/internal/contract/prompt"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// Routes of the server.
const (
	// RouteOpenRLHF takes OpenRLHF's remote reward request
	// (OpenRLHFRequest) and answers OpenRLHFResponse.
	RouteOpenRLHF = "/get_reward"
	// RouteReward takes one plan (RewardRequest) and answers Result.
	RouteReward = "/v1/reward"
	// RouteHealth answers 200 with the set's name and group count.
	RouteHealth = "/healthz"
)

// maxBody bounds a request body.
const maxBody = 32 << 20

// OpenRLHFRequest is the body OpenRLHF posts to --reward.remote_url
// (openrlhf/utils/agent.py, SingleTurnAgentExecutor._fetch_rewards_via_http,
// at OpenRLHF 3c3be62): per sample, Query is the prompt and the generated
// response decoded together with the special tokens kept, Prompts the
// prompt text, Labels the dataset's label (--data.label_key), all of the
// same length.
type OpenRLHFRequest struct {
	Query   []string          `json:"query"`
	Prompts []string          `json:"prompts"`
	Labels  []json.RawMessage `json:"labels"`
}

// OpenRLHFResponse is the answer OpenRLHF reads (rewards_info.get
// ("rewards"), .get("scores"), .get("extra_logs")): one reward per query;
// Scores are the rewards scaled to [0,1] (r/2), which OpenRLHF's dynamic
// filtering expects; ExtraLogs hold the reward's parts per query, logged
// by OpenRLHF as they are.
type OpenRLHFResponse struct {
	Rewards   []float64            `json:"rewards"`
	Scores    []float64            `json:"scores"`
	ExtraLogs map[string][]float64 `json:"extra_logs"`
}

// RewardRequest is the body of RouteReward: a label and a generated plan.
type RewardRequest struct {
	Label string `json:"label"`
	Plan  string `json:"plan"`
}

// ErrorBody is every error answer: the reason and, for a bad request, the
// request field it is about.
type ErrorBody struct {
	Error string `json:"error"`
	Field string `json:"field,omitempty"`
}

// Handler serves the routes; metrics, when not nil, is served at /metrics.
func (s *Server) Handler(metrics http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+RouteOpenRLHF, s.counted(RouteOpenRLHF, s.serveOpenRLHF))
	mux.HandleFunc("POST "+RouteReward, s.counted(RouteReward, s.serveReward))
	mux.HandleFunc("GET "+RouteHealth, func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "set": s.set, "groups": len(s.groups)})
	})
	if metrics != nil {
		mux.Handle("GET /metrics", metrics)
	}
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusNotFound, ErrorBody{Error: fmt.Sprintf("no route %s %s (POST %s, POST %s, GET %s)", r.Method, r.URL.Path, RouteOpenRLHF, RouteReward, RouteHealth)})
	})
	return mux
}

// counted runs h under the request deadline and counts its answer.
func (s *Server) counted(route string, h func(context.Context, http.ResponseWriter, *http.Request) int) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), s.cfg.Timeout)
		defer cancel()
		r.Body = http.MaxBytesReader(w, r.Body, maxBody)
		code := h(ctx, w, r)
		s.cfg.Metrics.requests.WithLabelValues(route, strconv.Itoa(code)).Inc()
	}
}

func (s *Server) serveReward(ctx context.Context, w http.ResponseWriter, r *http.Request) int {
	var req RewardRequest
	if err := decode(r, &req); err != nil {
		return writeErr(w, err)
	}
	res, err := s.timed(ctx, "label", req.Label, req.Plan)
	if err != nil {
		return writeErr(w, err)
	}
	return writeJSON(w, http.StatusOK, res)
}

func (s *Server) serveOpenRLHF(ctx context.Context, w http.ResponseWriter, r *http.Request) int {
	var req OpenRLHFRequest
	if err := decode(r, &req); err != nil {
		return writeErr(w, err)
	}
	n := len(req.Query)
	if len(req.Labels) != n || len(req.Prompts) != n {
		return writeErr(w, badRequest("labels", "%d queries, %d prompts and %d labels: want one of each per sample", n, len(req.Prompts), len(req.Labels)))
	}
	out := OpenRLHFResponse{Rewards: make([]float64, n), Scores: make([]float64, n),
		ExtraLogs: map[string][]float64{"type_match": make([]float64, n), "dist": make([]float64, n), "unparsed": make([]float64, n)}}
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() { // owned: waited for below
			defer wg.Done()
			label, err := labelText(req.Labels[i])
			if err != nil {
				errs[i] = badRequest(fmt.Sprintf("labels[%d]", i), "%v", err)
				return
			}
			plan, err := Response(req.Query[i], req.Prompts[i])
			if err != nil {
				errs[i] = badRequest(fmt.Sprintf("query[%d]", i), "%v", err)
				return
			}
			res, err := s.timed(ctx, fmt.Sprintf("labels[%d]", i), label, plan)
			if err != nil {
				errs[i] = err
				return
			}
			out.Rewards[i], out.Scores[i] = res.Reward, res.Reward/2
			out.ExtraLogs["type_match"][i], out.ExtraLogs["dist"][i] = res.TypeMatch, res.Dist
			if res.Unparsed {
				out.ExtraLogs["unparsed"][i] = 1
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return writeErr(w, err)
		}
	}
	return writeJSON(w, http.StatusOK, out)
}

// timed scores one plan and records its result and duration.
func (s *Server) timed(ctx context.Context, field, label, plan string) (Result, error) {
	t0 := time.Now()
	s.cfg.Metrics.inFlight.Inc()
	res, err := s.Score(ctx, field, label, plan)
	s.cfg.Metrics.inFlight.Dec()
	s.cfg.Metrics.plan(resultOf(err), time.Since(t0))
	return res, err
}

// labelText is a label as OpenRLHF sends it: the dataset's label field, a
// JSON string holding trainexport.Label's JSON, or that object itself.
func labelText(raw json.RawMessage) (string, error) {
	t := strings.TrimSpace(string(raw))
	if strings.HasPrefix(t, `"`) {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", err
		}
		return s, nil
	}
	if !strings.HasPrefix(t, "{") {
		return "", fmt.Errorf("label %.80s: want a JSON string or object", t)
	}
	return t, nil
}

// specialTail matches the special tokens a decoded response ends with when
// decoded with skip_special_tokens=False (<|im_end|>, <|endoftext|>,
// </s>, ...) and the white space between and after them; white space
// before them is the response's.
var specialTail = regexp.MustCompile(`(?:<\|[^<>|\s]*\|>|</s>)(?:\s*(?:<\|[^<>|\s]*\|>|</s>))*\s*$`)

// Response returns the generated text of an OpenRLHF query: what follows
// the prompt, without the special tokens that end it. The query is the
// prompt's tokens and the response's decoded together, so it starts with
// the prompt unless decoding changed the prompt's text (a multimodal
// processor expands each image placeholder into one token per patch):
// then the response follows the last occurrence of the prompt's longest
// tail (512 bytes, halved down to 16) found in the query, which for a chat
// template is the generation prompt after the last image. An empty prompt
// makes the whole query the response.
func Response(query, prompt string) (string, error) {
	resp, found := "", false
	if strings.HasPrefix(query, prompt) {
		resp, found = query[len(prompt):], true
	} else {
		for n := min(len(prompt), 512); n >= 16; n /= 2 {
			if i := strings.LastIndex(query, prompt[len(prompt)-n:]); i >= 0 {
				resp, found = query[i+n:], true
				break
			}
		}
	}
	if !found {
		return "", errors.New("the query does not hold its prompt (neither as a prefix nor its last 16 bytes)")
	}
	return specialTail.ReplaceAllString(resp, ""), nil
}

// decode reads a JSON request body.
func decode(r *http.Request, v any) error {
	dec := json.NewDecoder(r.Body)
	if err := dec.Decode(v); err != nil {
		var mb *http.MaxBytesError
		if errors.As(err, &mb) {
			return badRequest("body", "larger than %d bytes", mb.Limit)
		}
		return badRequest("body", "not the JSON this route takes: %v", err)
	}
	return nil
}

// result names for the metrics.
const (
	resultScored     = "scored"
	resultBadRequest = "bad_request"
	resultExecutor   = "executor_error"
	resultBusy       = "busy"
	resultError      = "error"
)

func resultOf(err error) string {
	var br *BadRequestError
	var ge *ground.Error
	switch {
	case err == nil:
		return resultScored
	case errors.As(err, &br):
		return resultBadRequest
	case errors.As(err, &ge):
		return resultExecutor
	case errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded):
		return resultBusy
	}
	return resultError
}

// statusOf is the HTTP status of an error: 400 for the request's fault;
// 502 when the executor failed; 503 when the server was busy or the
// request's deadline passed, or the blob store failed; 500 when the
// server's own data (archive, prompt set, screenshot) is missing or
// damaged. Never a reward.
func statusOf(err error) int {
	var br *BadRequestError
	var ge *ground.Error
	switch {
	case errors.As(err, &br):
		return http.StatusBadRequest
	case errors.As(err, &ge) && ge.Op == "executor":
		return http.StatusBadGateway
	case errors.Is(err, ErrBusy), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	case errors.As(err, &ge), errors.Is(err, blob.ErrNotFound), blob.Damaged(err), errors.Is(err, archive.ErrDamaged), prompt.Unavailable(err):
		return http.StatusInternalServerError
	}
	return http.StatusServiceUnavailable
}

func writeErr(w http.ResponseWriter, err error) int {
	body := ErrorBody{Error: err.Error()}
	var br *BadRequestError
	if errors.As(err, &br) {
		body.Field = br.Field
	}
	return writeJSON(w, statusOf(err), body)
}

func writeJSON(w http.ResponseWriter, code int, v any) int {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(v) // the client may be gone
	return code
}
