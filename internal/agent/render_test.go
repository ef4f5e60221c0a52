package agent_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/agent"
	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/model"
	"github.com/codapipe/codapipe/internal/prompt"
	"github.com/codapipe/codapipe/internal/sim"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
	openai "github.com/sashabaranov/go-openai"
)

// capture is a reverse proxy in front of a model endpoint that records
// the messages of every chat request it forwards.
type capture struct {
	mu   sync.Mutex
	reqs [][]openai.ChatCompletionMessage
}

func startCapture(t *testing.T, target string) (*capture, string) {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	c := &capture{}
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if strings.HasSuffix(r.URL.Path, "/chat/completions") {
			var req openai.ChatCompletionRequest
			if err := json.Unmarshal(body, &req); err != nil {
				t.Errorf("capture: %v", err)
			}
			c.mu.Lock()
			c.reqs = append(c.reqs, req.Messages)
			c.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return c, srv.URL + u.Path
}

func (c *capture) take() [][]openai.ChatCompletionMessage {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.reqs
	c.reqs = nil
	return r
}

// normalized is the JSON of messages with every data-URI image replaced
// by "sha256:<hash of its bytes>", so images compare by hash.
func normalized(t *testing.T, msgs []openai.ChatCompletionMessage) string {
	t.Helper()
	out := make([]openai.ChatCompletionMessage, len(msgs))
	copy(out, msgs)
	for i := range out {
		parts := make([]openai.ChatMessagePart, len(out[i].MultiContent))
		copy(parts, out[i].MultiContent)
		for j, p := range parts {
			if p.ImageURL == nil {
				continue
			}
			b64, ok := strings.CutPrefix(p.ImageURL.URL, "data:image/png;base64,")
			if !ok {
				t.Fatalf("message %d part %d: image is not a PNG data URI: %.40q", i, j, p.ImageURL.URL)
			}
			png, err := base64.StdEncoding.DecodeString(b64)
			if err != nil {
				t.Fatal(err)
			}
			sum := sha256.Sum256(png)
			parts[j].ImageURL = &openai.ChatMessageImageURL{URL: "sha256:" + hex.EncodeToString(sum[:])}
		}
		if out[i].MultiContent != nil {
			out[i].MultiContent = parts
		}
	}
	b, err := json.Marshal(out)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// Acceptance (advantage issue, item 2): a simulated rollout records the
// hash of its prompt set, and for every step of every trajectory the
// planner's messages rendered again from the trajectory, the prompt set
// fetched by that hash and the screenshots in the blob store are
// identical to what the planner endpoint received (images by hash).
func TestRebuiltPlannerMessagesAreWhatThePlannerReceived(t *testing.T) {
	var capt *capture
	var store *blob.Store
	w := startWorldWith(t, 1, 3, func(wc *sim.WorldConfig) {
		wc.Models.Planner.DefaultSkill, wc.Models.Planner.Skill = 0.6, nil
	}, func(c *agent.Config) {
		var u string
		capt, u = startCapture(t, c.Planner.Config().BaseURL)
		mc := c.Planner.Config()
		mc.BaseURL = u
		p, err := model.New(mc, nil)
		if err != nil {
			t.Fatal(err)
		}
		c.Planner = p
		store = c.Store.(*blob.Store)
		if err := prompt.Store(context.Background(), store, c.Prompts); err != nil {
			t.Fatal(err)
		}
	})
	tasks, err := simtasks.All()
	if err != nil {
		t.Fatal(err)
	}
	n := 5
	if raceEnabled {
		n = 2
	}
	steps := 0
	for _, tk := range tasks[:n] {
		tr := w.runOne(t, tk.ID)
		sent := capt.take()
		if tr.Prompts == "" {
			t.Fatal("the trajectory records no prompt set")
		}
		if err := tr.Validate(); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		prompts, err := prompt.Fetch(ctx, store, tr.Prompts)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if len(sent) != len(tr.Steps) {
			t.Fatalf("%s: the planner received %d requests for %d steps", tr.ID, len(sent), len(tr.Steps))
		}
		fromStore := func(r traj.ImageRef) (string, error) {
			png, err := store.GetBytes(context.Background(), r.SHA256)
			return model.DataURI(png), err
		}
		for i := range tr.Steps {
			got, err := prompts.PlannerMessagesAt(tr, i, fromStore)
			if err != nil {
				t.Fatal(err)
			}
			if g, s := normalized(t, got), normalized(t, sent[i]); g != s {
				t.Fatalf("%s step %d: rebuilt messages differ from what the planner received:\nrebuilt  %s\nreceived %s", tr.ID, i, g, s)
			}
			refs, err := prompts.PlannerMessagesAt(tr, i, prompt.RefURL)
			if err != nil {
				t.Fatal(err)
			}
			if i > 0 && len(refs) != i+2 {
				t.Errorf("%s step %d: %d messages, want system + %d plans + user", tr.ID, i, len(refs), i)
			}
			steps++
		}
	}
	if steps < 2*n {
		t.Fatalf("only %d steps over %d trajectories: the test needs multi-step trajectories", steps, n)
	}
	t.Logf("%d steps of %d trajectories rebuilt identically", steps, n)
}
