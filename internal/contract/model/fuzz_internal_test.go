package model

import (
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"
)

// FuzzChatAnswer feeds arbitrary bytes as a chat completion answer to the
// decoding post and Chat do (chatResponse, then choices): an answer
// decodes or fails without panicking, and every accepted choice keeps the
// invariants the trajectory's token columns rely on: token ids are
// non-negative int32, as many as the log-probabilities when both are
// present, and they are the completion token count when present.
func FuzzChatAnswer(f *testing.F) {
	f.Add([]byte(`{"choices":[{"index":0,"message":{"content":"click(start_box='(1,2)')"},"finish_reason":"stop",` +
		`"logprobs":{"content":[{"token":"click","logprob":-0.1},{"token":"(","logprob":-0.01}]},"token_ids":[4281,7]}],` +
		`"usage":{"prompt_tokens":1200,"completion_tokens":2}}`))
	f.Add([]byte(`{"choices":[{"message":{"content":"a"},"logprobs":{"content":[{"token":"token_id:12","logprob":-1},{"token":"token_id:2147483647","logprob":0}]}}],"usage":{"completion_tokens":2}}`))
	f.Add([]byte(`{"choices":[{"message":{"content":null},"token_ids":[-1,4294967296]},{"message":{"content":"b"}}],"usage":{"prompt_tokens":3,"completion_tokens":7}}`))
	f.Add([]byte(`{"choices":[{"logprobs":{"content":[{"token":"token_id:x","logprob":-1}]},"token_ids":[1,2]}]}`))
	f.Add([]byte(`{"choices":null,"usage":null}`))
	f.Add([]byte(`{"choices":[{"token_ids":[1e400]}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var r chatResponse
		if err := json.Unmarshal(data, &r); err != nil {
			return
		}
		out := r.choices(time.Second)
		if len(out) != len(r.Choices) {
			t.Fatalf("%d choices from %d", len(out), len(r.Choices))
		}
		for i, c := range out {
			for _, id := range c.TokenIDs {
				if id < 0 || id > math.MaxInt32 {
					t.Fatalf("choice %d: token id %d", i, id)
				}
			}
			if c.TokenIDs != nil && c.LogProbs != nil && len(c.TokenIDs) != len(c.LogProbs) {
				t.Fatalf("choice %d: %d token ids, %d logprobs", i, len(c.TokenIDs), len(c.LogProbs))
			}
			if c.TokenIDs != nil && (c.CompletionTokens != len(c.TokenIDs) || c.CompletionTokensEstimated) {
				t.Fatalf("choice %d: %d completion tokens (estimated %v) for %d token ids", i, c.CompletionTokens, c.CompletionTokensEstimated, len(c.TokenIDs))
			}
			if c.PromptTokens != r.Usage.PromptTokens || c.Latency != time.Second {
				t.Fatalf("choice %d: prompt tokens %d, latency %v", i, c.PromptTokens, c.Latency)
			}
		}
	})
}

// FuzzParseRetryAfter feeds arbitrary Retry-After header values (an
// answer's header) to parseRetryAfter: an accepted value is never a
// negative wait, and a number of seconds is bounded by MaxRetryAfter.
func FuzzParseRetryAfter(f *testing.F) {
	for _, v := range []string{"0", "7", " 120 ", "-1", "9223372036854775808", "Wed, 21 Oct 2015 07:28:00 GMT", "Fri, 31 Dec 9999 23:59:59 GMT", "soon", ""} {
		f.Add(v)
	}
	now := time.Date(2026, 11, 26, 6, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, v string) {
		d, ok := parseRetryAfter(v, now)
		if !ok {
			if d != 0 {
				t.Fatalf("%q: refused with wait %v", v, d)
			}
			return
		}
		if d < 0 {
			t.Fatalf("%q: wait %v", v, d)
		}
		if _, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64); err == nil && d > MaxRetryAfter {
			t.Fatalf("%q: %v, over MaxRetryAfter", v, d)
		}
	})
}
