package judge

import (
	"context"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/testkit/docstest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestJudgeMetricsDocumented scrapes /metrics after a judge drain (the
// registry the command wires into the bus and the judge): every metric
// docs/operations.md lists for judge is there, and every codapipe_*
// metric there is listed.
func TestJudgeMetricsDocumented(t *testing.T) {
	docs := docstest.Metrics(t, "../../../docs/operations.md")
	c := skillCorpus(t, 0.3, 1, "S01", "S02") // small: this test runs under the race detector
	env, b := drainEnv(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	metricsURL := docstest.ServeMetrics(t, env.Metrics)
	republish(t, b, c.trajs, "metrics-"+traj.NewID(), 2)
	pol := CODAPolicy()
	pol.MaxFrames = testFrames
	st, err := Execute(ctx, env, Options{Sim: true, Policy: pol, Workers: 2, TimeScale: 0.001})
	if err != nil || st.Trajectories() != 2 {
		t.Fatalf("judge: %v (%+v)", err, st)
	}
	docstest.CheckMetrics(t, docs, docstest.Scrape(t, ctx, metricsURL), "judge")
}
