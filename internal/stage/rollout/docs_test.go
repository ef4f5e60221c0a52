package rollout

import (
	"context"
	"flag"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/sim/serve"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/testkit/docstest"
)

const operationsDoc = "../../../docs/operations.md"

// TestOperationsDocsMatchHelp: the flag tables of docs/operations.md are
// each command's flags — every flag with its environment variable and
// default, nothing more, nothing less.
func TestOperationsDocsMatchHelp(t *testing.T) {
	tables := docstest.Tables(t, operationsDoc)
	cases := []struct {
		cmd    service.Command
		tables []string
	}{
		{Command(), []string{"flags: common", "flags: rollout"}},
		{tasksCommand(), []string{"flags: rollout tasks"}},
		{serve.Command(), []string{"flags: codasim"}},
		{reportCommand(), []string{"flags: common", "flags: rollout report"}},
		{judge.Command(), []string{"flags: common", "flags: consumer", "flags: judge"}},
		{judge.Command().Sub[0], []string{"flags: common", "flags: judge report"}},
	}
	for _, c := range cases {
		t.Run(c.cmd.Name, func(t *testing.T) {
			docstest.CheckFlags(t, tables, c.cmd, c.tables...)
		})
	}
}

// TestMetricsDocumented scrapes /metrics after a one-episode simulated run
// (the registry the command wires into the bus, the pool, the agent and
// the scheduler): every metric the docs list for rollout is there, and the
// docs list every codapipe_* metric there.
func TestMetricsDocumented(t *testing.T) {
	docs := docstest.Metrics(t, operationsDoc)

	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg := acceptConfig(dir, simTaskDir(t, acceptApp, "S01"), "metrics", log)
	cfg.Group = 1
	env := service.NewEnv("rollout", cfg.Common, log, nil, nil)
	defer env.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	metricsURL := docstest.ServeMetrics(t, env.Metrics)
	sum, err := Execute(ctx, env, cfg.Options)
	if err != nil || sum.Episodes != 1 {
		t.Fatalf("Execute: %v (summary %+v)", err, sum)
	}

	docstest.CheckMetrics(t, docs, docstest.Scrape(t, ctx, metricsURL), "rollout")
}

// TestSharedFlagsAgree: flags that rollout and codasim share under one
// environment variable have one default (--time-scale once differed: 0.01
// and 1 under CODAPIPE_TIME_SCALE), and rollout, a batch job, has no
// --drain.
func TestSharedFlagsAgree(t *testing.T) {
	main, simc := Command().FlagSet(), serve.Command().FlagSet()
	simc.VisitAll(func(f *flag.Flag) {
		g := main.Lookup(f.Name)
		if g == nil || service.EnvOf(g.Usage) != service.EnvOf(f.Usage) {
			return
		}
		if f.Name == "seed" {
			return // rollout's seeds the model requests too (0: none); documented apart
		}
		if g.DefValue != f.DefValue {
			t.Errorf("--%s (env %s): rollout defaults to %q, codasim to %q", f.Name, service.EnvOf(f.Usage), g.DefValue, f.DefValue)
		}
	})
	if main.Lookup("drain") != nil {
		t.Error("rollout advertises --drain, which a batch job does not honour")
	}
}
