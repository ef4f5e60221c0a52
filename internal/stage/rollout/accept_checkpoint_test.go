package rollout

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/sim"
	"github.com/codapipe/codapipe/internal/sim/fault"
	simmodels "github.com/codapipe/codapipe/internal/sim/models"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
)

// modelsEndpoint stands in for a remote model server: GET /v1/models
// answers list (a JSON body, or a 404 when empty), everything else goes
// to upstream (nil: 404).
func modelsEndpoint(t *testing.T, list string, upstream string) string {
	t.Helper()
	var proxy http.Handler = http.NotFoundHandler()
	if upstream != "" {
		u, err := url.Parse(upstream)
		if err != nil {
			t.Fatal(err)
		}
		proxy = httputil.NewSingleHostReverseProxy(&url.URL{Scheme: u.Scheme, Host: u.Host})
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/models" {
			proxy.ServeHTTP(w, r)
			return
		}
		if list == "" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(list))
	}))
	t.Cleanup(srv.Close)
	return srv.URL + "/v1"
}

// writePool writes a pool file of the sim backend over guests.
func writePool(t *testing.T, guests []string) string {
	t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "backend: sim\nid: checkpoint-test\nidle_check: -1s\nlock_dir: %s\nsim:\n  vms:\n", filepath.Join(t.TempDir(), "locks"))
	for _, g := range guests {
		fmt.Fprintf(&b, "    - url: %s\n", g)
	}
	p := filepath.Join(t.TempDir(), "pool.yaml")
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Acceptance 3 (rollout): outside --sim a run needs a planner checkpoint.
// With no --planner-checkpoint and an endpoint whose /v1/models gives
// nothing usable, the run fails at start, naming --planner-checkpoint,
// before the data directory is touched.
func TestAcceptNoCheckpointSource(t *testing.T) {
	clearRolloutEnv(t)
	pool := writePool(t, []string{"http://127.0.0.1:9"}) // never contacted
	tasks := simTaskDir(t, acceptApp, "S01")
	cases := []struct {
		name     string
		list     string // the endpoint's /v1/models ("": 404)
		usage    bool   // ErrNotConfigured (the endpoint answered, without a checkpoint)
		mentions []string
	}{
		{"card without a root", `{"object":"list","data":[{"id":"planner","object":"model"}]}`, true, []string{"--planner-checkpoint", `without a "root"`}},
		{"model not listed", `{"object":"list","data":[{"id":"other","root":"/ckpt/other"}]}`, true, []string{"--planner-checkpoint", `does not list "planner"`}},
		{"empty list", `{"object":"list","data":[]}`, true, []string{"--planner-checkpoint"}},
		{"no /v1/models route", "", false, []string{"--planner-checkpoint", "404"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			ep := modelsEndpoint(t, tc.list, "")
			o := Options{App: acceptApp, Group: 1, Samples: 1, Tasks: tasks, Pool: pool, Schedule: sched.Dynamic,
				Planner:  model.Config{BaseURL: ep, Model: "planner"},
				Executor: model.Config{BaseURL: ep, Model: "executor"}}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			sum, err := execute(ctx, acceptCfg{Common: &service.Common{DataDir: dir}, Options: o, Log: slog.New(slog.DiscardHandler)})
			if err == nil || sum != nil {
				t.Fatalf("Execute = %v, %v; want a failure at start", sum, err)
			}
			if errors.Is(err, ErrNotConfigured) != tc.usage {
				t.Errorf("error %v: ErrNotConfigured = %v, want %v", err, !tc.usage, tc.usage)
			}
			for _, w := range tc.mentions {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the data directory was touched (%v) before the checkpoint was known", err)
			}
		})
	}
}

// Acceptance 3 (rollout): outside --sim, with no --planner-checkpoint, the
// root the planner endpoint's /v1/models reports is the run's checkpoint:
// every trajectory records it (and the executor's root for the
// executor). The run is bound to it: the same --run with another
// checkpoint is refused before anything runs.
func TestAcceptCheckpointFromModelsList(t *testing.T) {
	clearRolloutEnv(t)
	wc := sim.DefaultWorldConfig()
	wc.VMs, wc.Seed, wc.Clock = 1, 1, fault.Clock{Scale: 0.001}
	world := servertest.Serve(t, "the simulated world", func(ctx context.Context) (*sim.World, error) { return sim.StartWorld(ctx, wc) })

	const root = "/ckpt/grpo-chimerax/global_step_7/actor/huggingface"
	planner := modelsEndpoint(t, `{"object":"list","data":[{"id":"`+simmodels.DefaultPlannerModel+`","object":"model","owned_by":"vllm","root":"`+root+`","parent":null,"max_model_len":32768}]}`,
		world.Models.PlannerURL)
	dir := filepath.Join(t.TempDir(), "data")
	seed := int64(1)
	o := Options{App: acceptApp, Group: 1, Samples: 1, Tasks: simTaskDir(t, acceptApp, "S01"), Pool: writePool(t, world.GuestURLs),
		Schedule: sched.Dynamic, Run: "non-sim", Seed: &seed, EnvRetries: 1,
		Planner:  model.Config{BaseURL: planner, Model: simmodels.DefaultPlannerModel},
		Executor: model.Config{BaseURL: world.Models.ExecutorURL, Model: simmodels.DefaultExecutorModel}}
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptCfg{Common: &service.Common{DataDir: dir}, Options: o, Log: log}
	runOK(t, cfg, logs)

	b := openTestBus(t, dir)
	ps := readPublished(t, b, openStore(t, dir), acceptApp)
	if len(ps) != 1 {
		t.Fatalf("%d trajectories published, want 1", len(ps))
	}
	if m := ps[0].Traj.Models; m.Planner.Checkpoint != root || m.Executor.Checkpoint != simmodels.DefaultExecutorModel {
		t.Errorf("trajectory records planner checkpoint %q, executor %q; want %q, %q", m.Planner.Checkpoint, m.Executor.Checkpoint, root, simmodels.DefaultExecutorModel)
	}
	b.Close()

	cfg.Planner.Checkpoint = "global_step_8"
	_, err := runWithin(t, time.Minute, cfg)
	if !errors.Is(err, ledger.ErrCheckpointChanged) || !strings.Contains(err.Error(), root) {
		t.Fatalf("the same --run with another checkpoint: %v; want ErrCheckpointChanged naming %s", err, root)
	}
}
