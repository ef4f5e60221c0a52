package advantage

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ground"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/contract/trainexport"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/stage/rewardserver"
	"github.com/codapipe/codapipe/internal/testkit/docstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// rewardSet is a step-mode shard set written by advantage from a shared
// simulated corpus, its rows, and the pipeline that made it.
type rewardSet struct {
	pipe   *pipetest.Pipeline
	bucket blob.Bucket
	prefix string
	dir    string // the bucket's folder
	m      shard.Manifest
	rows   []shard.Row
}

func newRewardSet(t testing.TB, spec pipetest.Spec) *rewardSet {
	t.Helper()
	p := pipetest.Shared(t, spec)
	p.RequireCleanSuccesses(t, 1, 1)
	out := filepath.Join(t.TempDir(), "shards")
	advantageCLI(t, p.Dir, "--out", out)
	bucket, err := blob.OpenBucket(context.Background(), out, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	rs := &rewardSet{pipe: p, bucket: bucket, dir: out, m: onlyManifest(t, bucket)}
	rs.prefix = rs.m.Set
	for _, f := range rs.m.Files {
		err := shard.ReadFile(context.Background(), filepath.Join(out, filepath.FromSlash(f.Key)), f.Format, func(r *shard.Row) error {
			rs.rows = append(rs.rows, *r)
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return rs
}

// simExecutor starts the simulated executor the rollout of spec used:
// the same simulator configuration (spec.Sim), seed and executor
// coordinate space, as rollout --sim starts it.
func simExecutor(t testing.TB, spec pipetest.Spec, scale float64) *model.Client {
	t.Helper()
	return simExecutorSeen(t, spec, scale, nil)
}

// simExecutorSeen is simExecutor with onRequest seeing the body of every
// request to the simulated models.
func simExecutorSeen(t testing.TB, spec pipetest.Spec, scale float64, onRequest func(kind string, body []byte)) *model.Client {
	t.Helper()
	wc := sim.DefaultWorldConfig()
	if err := json.Unmarshal([]byte(spec.Sim), &wc); err != nil {
		t.Fatal(err)
	}
	wc.VMs, wc.Seed, wc.Clock = 1, spec.Seed, fault.Clock{Scale: scale}
	wc.Models.Planner.Coords, wc.Models.Executor.Coords = uitars.Grid(), uitars.Resized()
	wc.Models.OnRequest = onRequest
	ctx, cancel := context.WithCancel(context.Background())
	w, err := sim.StartWorld(ctx, wc)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); w.Wait() })
	c, err := model.New(model.Config{BaseURL: w.Models.ExecutorURL, Model: simmodels.DefaultExecutorModel}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// serve opens the reward service on rs with executor and serves it.
func (rs *rewardSet) serve(t testing.TB, executor *model.Client) *httptest.Server {
	t.Helper()
	srv, err := rewardserver.Open(context.Background(), rewardserver.Config{Bucket: rs.bucket, Prefix: rs.prefix,
		Store: rs.pipe.Store(t), Executor: executor, TempDir: t.TempDir(), Timeout: time.Minute, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv.Handler(nil))
	t.Cleanup(hs.Close)
	return hs
}

// sampleRows returns the rows of n groups in set order: the first group
// holding a plan scored above zero and the first holding one scored zero
// (when the set has them), then the first groups, so that the sample has
// both kinds.
func (rs *rewardSet) sampleRows(n int) []shard.Row {
	take := map[string]bool{}
	var pos, zero bool
	for _, r := range rs.rows {
		if (r.Reward > 0 && !pos) || (r.Reward == 0 && !zero) {
			take[r.GroupID] = true
			pos, zero = pos || r.Reward > 0, zero || r.Reward == 0
		}
	}
	for _, r := range rs.rows {
		if len(take) >= n {
			break
		}
		take[r.GroupID] = true
	}
	var out []shard.Row
	for _, r := range rs.rows {
		if take[r.GroupID] {
			out = append(out, r)
		}
	}
	return out
}

func labelOf(m shard.Manifest, r shard.Row) string {
	return trainexport.Label{Set: m.Set, GroupID: r.GroupID, Reference: r.ReferenceText}.String()
}

// Acceptance 4 of issue 35: the reward service, against the set advantage
// wrote and the same simulated executor, answers OpenRLHF's request body
// and the verl module's call with the reward advantage wrote for each
// stored candidate.
func TestAcceptRewardServer(t *testing.T) {
	rs := newRewardSet(t, corpusSpec)
	rows := rs.sampleRows(6)
	if len(rows) < 12 {
		t.Fatalf("%d rows in the sample; the corpus should give more", len(rows))
	}
	var positive int
	for _, r := range rows {
		if r.Reward > 0 {
			positive++
		}
	}
	if positive == 0 || positive == len(rows) {
		t.Fatalf("%d of %d sampled rows have a positive reward: want both kinds", positive, len(rows))
	}
	var mu sync.Mutex
	var sent [][]byte // executor request bodies, in order
	hs := rs.serve(t, simExecutorSeen(t, corpusSpec, 0, func(kind string, body []byte) {
		if kind == "executor" {
			mu.Lock()
			sent = append(sent, bytes.Clone(body))
			mu.Unlock()
		}
	}))
	check := func(t *testing.T, i int, got float64) {
		t.Helper()
		r := rows[i]
		if math.Abs(got-r.Reward) > 1e-12 {
			t.Errorf("row %d (group %s candidate %d): reward %v, advantage wrote %v (action %q)", i, r.GroupID, r.Candidate, got, r.Reward, r.ActionText)
		}
	}

	t.Run("seed", func(t *testing.T) {
		// The executor request of a stored plan carries the seed
		// rollout's request for that candidate carried.
		trajs := map[string]*traj.Trajectory{}
		for _, jd := range rs.pipe.Judged {
			trajs[jd.Trajectory.ID] = &jd.Trajectory
		}
		grounded, own := 0, 0
		for i, r := range rows {
			mu.Lock()
			before := len(sent)
			mu.Unlock()
			var res rewardserver.Result
			if code := post(t, hs.URL+rewardserver.RouteReward, mustJSON(t, rewardserver.RewardRequest{Label: labelOf(rs.m, r), Plan: r.Completion}), &res); code != http.StatusOK {
				t.Fatalf("row %d: status %d", i, code)
			}
			check(t, i, res.Reward)
			mu.Lock()
			bodies := sent[before:]
			mu.Unlock()
			if len(bodies) == 0 {
				continue // an answer: kept as it is, not grounded
			}
			// Rollout's request for the first candidate of the step with
			// this plan (the planner may write the same plan twice; then
			// which one is not known, and a greedy executor answers the
			// same request alike whatever its seed).
			tr := trajs[r.TrajectoryID]
			first := slices.IndexFunc(tr.Steps[r.Step].Candidates, func(c traj.Candidate) bool { return c.Plan == r.Completion })
			want := ground.Seed(tr.Models.Executor.Sampling.Seed, tr.Task.ID, tr.Sample, int(r.Step), ground.CandidateCall(first))
			var req struct {
				Seed *int64 `json:"seed"`
			}
			if err := json.Unmarshal(bodies[len(bodies)-1], &req); err != nil {
				t.Fatal(err)
			}
			if want == nil || req.Seed == nil || *req.Seed != *want {
				t.Errorf("row %d: executor request seed %s, rollout's for candidate %d was %s", i, seedText(req.Seed), first, seedText(want))
			}
			grounded++
			if first == int(r.Candidate) {
				own++
			}
		}
		if own == 0 {
			t.Fatalf("none of the %d grounded plans is its step's first with its text", grounded)
		}
	})

	t.Run("openrlhf", func(t *testing.T) {
		// The body OpenRLHF posts to --reward.remote_url, built as
		// openrlhf/utils/agent.py (SingleTurnAgentExecutor.execute and
		// _fetch_rewards_via_http, OpenRLHF 3c3be6234e0cb353e76bb8019947db9dfe99fca7)
		// builds it: "query" is hf_tokenizer.decode(prompt tokens + response
		// tokens, skip_special_tokens=False) — with a VLM, each image
		// placeholder expanded into one token per patch and the response
		// ending in its special tokens —, "prompts" the prompt text,
		// "labels" the dataset's label. testdata/openrlhf_get_reward.json
		// is such a body for Qwen2.5-VL's chat template with two samples;
		// @@RESPONSEi@@ and @@LABELi@@ are replaced by a stored plan and
		// its group's label.
		tmpl, err := os.ReadFile(filepath.Join("testdata", "openrlhf_get_reward.json"))
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < len(rows); i += 2 {
			j := min(i+1, len(rows)-1)
			body := string(tmpl)
			for k, r := range []shard.Row{rows[i], rows[j]} {
				body = strings.ReplaceAll(body, fmt.Sprintf("@@RESPONSE%d@@", k), jsonText(t, r.Completion))
				body = strings.ReplaceAll(body, fmt.Sprintf("@@LABEL%d@@", k), jsonText(t, labelOf(rs.m, r)))
			}
			var res rewardserver.OpenRLHFResponse
			if code := post(t, hs.URL+rewardserver.RouteOpenRLHF, body, &res); code != http.StatusOK {
				t.Fatalf("rows %d,%d: status %d", i, j, code)
			}
			if len(res.Rewards) != 2 || len(res.Scores) != 2 || len(res.ExtraLogs["dist"]) != 2 {
				t.Fatalf("answer %+v: want two rewards, scores and logs", res)
			}
			check(t, i, res.Rewards[0])
			check(t, j, res.Rewards[1])
			if res.Scores[0] != res.Rewards[0]/2 {
				t.Errorf("score %v for reward %v: want reward/2", res.Scores[0], res.Rewards[0])
			}
		}
	})

	t.Run("verl", func(t *testing.T) {
		py := "/usr/bin/python3"
		if _, err := os.Stat(py); err != nil {
			t.Skipf("%s is missing: the verl module's test needs Debian's python3", py)
		}
		type call struct {
			DataSource  string         `json:"data_source"`
			SolutionStr string         `json:"solution_str"`
			GroundTruth string         `json:"ground_truth"`
			ExtraInfo   map[string]any `json:"extra_info"`
		}
		calls := make([]call, len(rows))
		for i, r := range rows {
			// As verl's NaiveRewardManager calls compute_score: the data
			// source, the decoded response, reward_model.ground_truth and
			// extra_info of the exported row.
			calls[i] = call{DataSource: trainexport.DefaultDataSource + "/" + r.App, SolutionStr: r.Completion,
				GroundTruth: labelOf(rs.m, r), ExtraInfo: map[string]any{"index": i, "group_id": r.GroupID}}
		}
		in, _ := json.Marshal(calls)
		dir, _ := filepath.Abs(filepath.Join("..", "..", "..", "trainer", "codapipe_reward"))
		cmd := exec.Command(py, "-c", verlDriver, dir)
		cmd.Stdin = bytes.NewReader(in)
		cmd.Env = append(os.Environ(), "CODAPIPE_REWARD_URL="+hs.URL)
		out, err := cmd.Output()
		if err != nil {
			var stderr string
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = string(ee.Stderr)
			}
			t.Fatalf("python: %v\n%s", err, stderr)
		}
		var scores []map[string]float64
		if err := json.Unmarshal(out, &scores); err != nil {
			t.Fatalf("python printed %q: %v", out, err)
		}
		if len(scores) != len(rows) {
			t.Fatalf("%d scores for %d calls", len(scores), len(rows))
		}
		for i, s := range scores {
			check(t, i, s["score"])
		}
	})
}

// verlDriver calls the verl module's compute_score as verl does, once per
// call read from stdin (a JSON list), with the URL from the environment,
// and prints the results as a JSON list. argv[1] is the module's folder.
const verlDriver = `
import json, sys
sys.path.insert(0, sys.argv[1])
import verl_reward
calls = json.load(sys.stdin)
out = [verl_reward.compute_score(data_source=c["data_source"], solution_str=c["solution_str"],
       ground_truth=c["ground_truth"], extra_info=c["extra_info"]) for c in calls]
json.dump(out, sys.stdout)
`

// A request the service cannot score gets an error status and a message
// naming the field, never a reward: a bad label or an unknown group is a
// 400, an executor that is down a 502.
func TestRewardServerErrors(t *testing.T) {
	rs := newRewardSet(t, smallSpec)
	r := rs.rows[0]
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	downURL := "http://" + ln.Addr().String() + "/v1"
	ln.Close() // nothing listens there now
	down, err := model.New(model.Config{BaseURL: downURL, Model: simmodels.DefaultExecutorModel, Attempts: 1, AttemptTimeout: 5 * time.Second}, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	hs := rs.serve(t, down)
	// A plan the executor must ground (not an answer).
	click := "Thought: open the File menu at the top left.\nAction: click(start_box='(10,20)')"
	other := r
	other.GroupID = "no-such-trajectory/0"
	cases := []struct {
		name  string
		route string
		body  string
		code  int
		field string
		msg   string
	}{
		{"executor down", rewardserver.RouteReward, mustJSON(t, rewardserver.RewardRequest{Label: labelOf(rs.m, r), Plan: click}), http.StatusBadGateway, "", "executor"},
		{"executor down (openrlhf)", rewardserver.RouteOpenRLHF, mustJSON(t, map[string]any{"query": []string{"p" + click}, "prompts": []string{"p"}, "labels": []string{labelOf(rs.m, r)}}), http.StatusBadGateway, "", "executor"},
		{"label not JSON", rewardserver.RouteReward, mustJSON(t, rewardserver.RewardRequest{Label: "ChimeraX", Plan: r.Completion}), http.StatusBadRequest, "label", "label"},
		{"unknown group", rewardserver.RouteReward, mustJSON(t, rewardserver.RewardRequest{Label: labelOf(rs.m, other), Plan: r.Completion}), http.StatusBadRequest, "label", "is not a group of set"},
		{"other set", rewardserver.RouteReward, mustJSON(t, rewardserver.RewardRequest{Label: trainexport.Label{Set: "other", GroupID: r.GroupID}.String(), Plan: r.Completion}), http.StatusBadRequest, "label", "this server scores"},
		{"wrong reference", rewardserver.RouteReward, mustJSON(t, rewardserver.RewardRequest{Label: trainexport.Label{Set: rs.m.Set, GroupID: r.GroupID, Reference: "wait()x"}.String(), Plan: r.Completion}), http.StatusBadRequest, "label", "differs from the set's"},
		{"lengths differ", rewardserver.RouteOpenRLHF, `{"query": ["a", "b"], "prompts": ["a"], "labels": []}`, http.StatusBadRequest, "labels", "want one of each"},
		{"bad label (openrlhf)", rewardserver.RouteOpenRLHF, `{"query": ["pa"], "prompts": ["p"], "labels": [7]}`, http.StatusBadRequest, "labels[0]", "want a JSON string or object"},
		{"not JSON", rewardserver.RouteReward, `{"label":`, http.StatusBadRequest, "body", "JSON"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var body rewardserver.ErrorBody
			code := post(t, hs.URL+c.route, c.body, &body)
			if code != c.code || body.Field != c.field || !strings.Contains(body.Error, c.msg) {
				t.Errorf("status %d, %+v; want %d, field %q, a message with %q", code, body, c.code, c.field, c.msg)
			}
		})
	}
	var health map[string]any
	if code := get(t, hs.URL+rewardserver.RouteHealth, &health); code != http.StatusOK || health["set"] != rs.m.Set {
		t.Errorf("healthz: %d %v", code, health)
	}
}

func seedText(s *int64) string {
	if s == nil {
		return "none"
	}
	return fmt.Sprint(*s)
}

func jsonText(t testing.TB, s string) string {
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b[1 : len(b)-1])
}

func mustJSON(t testing.TB, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func post(t testing.TB, url, body string, out any) int {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("POST %s: status %d, body not JSON: %v", url, resp.StatusCode, err)
	}
	return resp.StatusCode
}

func get(t testing.TB, url string, out any) int {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode
}

// TestRewardServerCommand runs `advantage reward-server` as the command
// line starts it, against the set and the simulated executor: it prints
// its address, scores a stored plan as advantage did, serves every metric
// docs/operations.md lists for reward-server (and no other), and answers
// /healthz and /readyz on --metrics-addr.
func TestRewardServerCommand(t *testing.T) {
	rs := newRewardSet(t, smallSpec)
	exec := simExecutor(t, smallSpec, 0)
	setDir := filepath.Join(rs.bucketDir(t), filepath.FromSlash(rs.prefix))
	ctx, cancel := context.WithCancel(context.Background())
	var stdout, stderr syncio.Buffer
	code := make(chan int, 1)
	maddr, err := servertest.FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"reward-server", "--data", rs.pipe.Dir, "--log-level", "warn", "--set", setDir, "--addr", "127.0.0.1:0",
		"--executor-url", exec.Config().BaseURL, "--executor-model", exec.Config().Model, "--metrics-addr", maddr[0]}
	go func() { code <- service.MainContext(ctx, Command(), args, &stdout, &stderr) }()
	defer func() {
		cancel()
		if c := <-code; c != 0 {
			t.Errorf("advantage %v: exit %d\n%s", args, c, stderr.String())
		}
	}()
	var url string
	poll.Until(t, "the reward service's address", time.Minute, func() bool {
		out := stdout.String()
		if i := strings.Index(out, "on http://"); i >= 0 && strings.HasSuffix(out, "\n") {
			url = strings.TrimSpace(out[i+len("on "):])
			return true
		}
		return false
	})
	for _, path := range []string{"/healthz", "/readyz"} { // ready once it listens, before it prints its address
		resp, err := (&http.Client{Timeout: 10 * time.Second}).Get("http://" + maddr[0] + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("--metrics-addr %s: %s", path, resp.Status)
		}
	}
	r := rs.rows[0]
	var res rewardserver.Result
	if c := post(t, url+rewardserver.RouteReward, mustJSON(t, rewardserver.RewardRequest{Label: labelOf(rs.m, r), Plan: r.Completion}), &res); c != http.StatusOK || math.Abs(res.Reward-r.Reward) > 1e-12 {
		t.Errorf("status %d, %+v; want the reward advantage wrote, %v", c, res, r.Reward)
	}
	var body rewardserver.ErrorBody
	if c := post(t, url+rewardserver.RouteReward, `{"label": "{}", "plan": "x"}`, &body); c != http.StatusBadRequest {
		t.Errorf("bad label: status %d", c)
	}
	sctx, scancel := context.WithTimeout(ctx, 30*time.Second)
	defer scancel()
	docstest.CheckMetrics(t, docstest.Metrics(t, "../../../docs/operations.md"), docstest.Scrape(t, sctx, url+"/metrics"), "reward-server")
}

// bucketDir is the local folder of the set's bucket.
func (rs *rewardSet) bucketDir(t testing.TB) string {
	t.Helper()
	if rs.dir == "" {
		t.Fatal("the set is not in a local folder")
	}
	return rs.dir
}
