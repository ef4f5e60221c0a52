package advantage

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/grpo"

	"github.com/codapipe/codapipe/internal/testkit/docstest"
)

// TestOperationsDocsMatchHelp: docs/operations.md lists every flag of
// advantage with its environment variable and default, and nothing else.
func TestOperationsDocsMatchHelp(t *testing.T) {
	tables := docstest.Tables(t, "../../../docs/operations.md")
	docstest.CheckFlags(t, tables, Command(), "flags: common", "flags: consumer", "flags: advantage")
	docstest.CheckFlags(t, tables, exportCommand(), "flags: common", "flags: advantage export")
	docstest.CheckFlags(t, tables, rewardServerCommand(), "flags: common", "flags: advantage reward-server")
}

// TestAdvantageMetricsDocumented: a scrape of an advantage drain holds
// every metric docs/operations.md lists for advantage, and the docs list
// every codapipe_* metric of the scrape; the counters agree with the run.
func TestAdvantageMetricsDocumented(t *testing.T) {
	docs := docstest.Metrics(t, "../../../docs/operations.md")
	// The race pass's small corpus (this test runs under the race
	// detector): one clean success is all the metrics need.
	p := pipetest.Shared(t, smallSpec)
	p.RequireCleanSuccesses(t, 1, 1)
	dir, judged := p.Dir, p.Judged
	common := &service.Common{DataDir: dir, Drain: true}
	env := service.NewEnv("advantage", common, quietLog(), io.Discard, io.Discard)
	defer env.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	metricsURL := docstest.ServeMetrics(t, env.Metrics)
	o := Options{Mode: ModeStep, Label: "clean", Method: "grpo", Eps: grpo.DefaultEps, Std: "unbiased", ZeroVar: "keep",
		Reward: grpo.DefaultRewardConfig(), Outcome: grpo.DefaultOutcomeConfig(), Format: "arrow",
		RowsPerShard: 100000, BytesPerShard: 512 << 20, Workers: 8, AckWait: time.Minute, MaxDelay: time.Second, Since: SinceAll}
	st, err := Execute(ctx, env, o)
	if err != nil {
		t.Fatal(err)
	}
	docstest.CheckMetrics(t, docs, docstest.Scrape(t, ctx, metricsURL), "advantage")
	resp, err := (&http.Client{Timeout: 30 * time.Second}).Get(metricsURL)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	scrape := string(body)
	for _, c := range []struct {
		series string
		want   float64
	}{
		{`codapipe_advantage_trajectories_total{result="committed"}`, float64(len(judged))},
		{`codapipe_advantage_rows_total`, float64(st.Counts.Rows)},
		{`codapipe_advantage_shards_total`, float64(st.Files)},
		{`codapipe_advantage_commits_total`, float64(st.Commits)},
	} {
		if !strings.Contains(scrape, fmt.Sprintf("%s %v\n", c.series, c.want)) {
			t.Errorf("the scrape has no %s %v", c.series, c.want)
		}
	}
}
