package advantage

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/codapipe/codapipe/internal/contract/ground"
	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/rewardserver"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// RewardServerOptions are the settings of advantage reward-server.
type RewardServerOptions struct {
	Set            string // the shard set's folder: a folder or s3://bucket/prefix
	Addr           string // listen address
	Executor       model.Config
	ExecutorCoords string // "": as each trajectory recorded
	Concurrency    int
	Timeout        time.Duration
	Steps          int
}

const rewardServerUsage = `advantage reward-server — codapipe's reward as a service for online trainers

Usage:
  advantage reward-server --set DIR|s3://bucket/prefix --executor-url U --executor-model M
                          [--addr HOST:PORT] [--store URL] [--executor-coords SPACE]

Serves the reward advantage computes for a candidate, for plans an online trainer (verl, OpenRLHF)
generates from an exported row: the label of the row's group names the set and the group; the
frozen executor grounds the plan on the step's screenshot exactly as rollout grounds candidates (the
run's executor prompt set, sampling parameters and request seed), and the action is scored against
the step's reference action with the set's reward configuration. Routes: POST /get_reward (OpenRLHF's
remote reward protocol, --reward.remote_url), POST /v1/reward ({"label", "plan"}; the verl module
trainer/codapipe_reward/verl_reward.py calls it), GET /healthz, GET /metrics. A bad label or an
unknown group is a 400 naming the field; an executor failure a 502, a busy server or a passed
deadline a 503: never a reward. The trajectories, prompt sets and screenshots are read from the blob
store (--store). For the SIMULATOR's executor, start ` + "`codasim --seed S`" + ` with the run's seed
and pass the executor URL and model it prints. See docs/shards.md, "Reward service".`

// rewardServerCommand is advantage reward-server.
func rewardServerCommand() service.Command {
	var o RewardServerOptions
	return service.Command{
		Name: "advantage reward-server", Summary: "serve the executor-grounded reward of plans for online trainers (OpenRLHF, verl)",
		Usage: rewardServerUsage, Common: true,
		Flags: func(fs *service.Flags) {
			fs.String(&o.Set, "set", "CODAPIPE_REWARD_SET", "", "the shard set whose groups are scored: the folder holding its manifest.json (a folder or s3://bucket/prefix)")
			fs.String(&o.Addr, "addr", "CODAPIPE_REWARD_ADDR", "127.0.0.1:8470", "listen address of the reward service")
			ground.ExecutorFlags(fs, &o.Executor, &o.ExecutorCoords, "", "coordinate space of the executor's points (default: the space each trajectory recorded for its executor; docs/actions.md)")
			fs.Int(&o.Concurrency, "concurrency", "CODAPIPE_REWARD_CONCURRENCY", 16, "plans grounded at once (executor calls in flight)")
			fs.Duration(&o.Timeout, "timeout", "CODAPIPE_REWARD_TIMEOUT", 120*time.Second, "deadline of one request, executor calls and their retries included (OpenRLHF's client waits 180 s)")
			fs.Int(&o.Steps, "cache-steps", "CODAPIPE_REWARD_CACHE_STEPS", 256, "steps whose trajectory, prompt set and screenshot are kept in memory")
		},
		Run: func(ctx context.Context, env *service.Env) error { return serveRewards(ctx, env, o) },
	}
}

// serveRewards runs the reward service until ctx ends.
func serveRewards(ctx context.Context, env *service.Env, o RewardServerOptions) error {
	var listening atomic.Bool
	env.Ready("reward service", func(context.Context) error {
		if !listening.Load() {
			return errors.New("loading the shard set")
		}
		return nil
	})
	if o.Set == "" {
		return service.Usage(errors.New("--set is required: the shard set whose groups are scored"))
	}
	if o.Executor.BaseURL == "" || o.Executor.Model == "" {
		return service.Usage(errors.New("configure --executor-url and --executor-model (the run's frozen executor; for the SIMULATOR's, start `codasim --seed S` and pass the executor URL and model it prints)"))
	}
	if _, err := model.CheckBaseURL("--executor-url", o.Executor.BaseURL); err != nil {
		return service.Usage(err)
	}
	var coords *traj.Coords
	if strings.TrimSpace(o.ExecutorCoords) != "" {
		c, err := uitars.ParseCoords(o.ExecutorCoords)
		if err != nil {
			return service.Usage(fmt.Errorf("--executor-coords: %w", err))
		}
		coords = &c
	}
	exec, err := model.New(o.Executor, env.Log)
	if err != nil {
		return service.Usage(fmt.Errorf("executor: %w", err))
	}
	set, err := blob.OpenBucket(ctx, o.Set, blob.Config{Logger: env.Log})
	if err != nil {
		return fmt.Errorf("advantage reward-server: --set %s: %w", o.Set, err)
	}
	store, err := env.Store(ctx)
	if err != nil {
		return err
	}
	tmp := env.Common.DataDir + "/tmp"
	if err := os.MkdirAll(tmp, blob.DirPerm); err != nil {
		return err
	}
	srv, err := rewardserver.Open(ctx, rewardserver.Config{Bucket: set, Store: store, Executor: exec, ExecutorCoords: coords,
		Concurrency: o.Concurrency, Timeout: o.Timeout, Steps: o.Steps, TempDir: tmp,
		Metrics: rewardserver.NewMetrics(env.Metrics), Log: env.Log})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", o.Addr)
	if err != nil {
		return fmt.Errorf("advantage reward-server: --addr: %w", err)
	}
	listening.Store(true)
	hs := &http.Server{Handler: srv.Handler(promhttp.HandlerFor(env.Metrics, promhttp.HandlerOpts{Registry: env.Metrics})),
		ReadHeaderTimeout: 10 * time.Second, ReadTimeout: time.Minute, WriteTimeout: o.Timeout + 30*time.Second}
	sctx, stop := context.WithCancel(ctx)
	stopped := make(chan struct{})
	go func() { // owned by sctx: shuts the server down when ctx ends or Serve fails
		defer close(stopped)
		<-sctx.Done()
		dctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = hs.Shutdown(dctx)
	}()
	fmt.Fprintf(env.Stdout, "advantage reward-server: set %s (%d groups) on http://%s\n", srv.Set(), srv.Groups(), ln.Addr())
	env.Log.Info("reward service listening", "addr", ln.Addr().String(), "set", srv.Set(), "groups", srv.Groups())
	err = hs.Serve(ln)
	stop()
	<-stopped
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}
