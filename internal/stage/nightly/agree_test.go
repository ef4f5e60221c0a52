package nightly

import (
	"context"
	"fmt"
	"log/slog"
	"math"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/shard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/runreport"
)

// checkFiguresAgree is acceptance 5 of issue 36: for one app of a night
// run once, the nightly summary's figures, rollout's summary of the run
// (within it) and the run report (rollout report) agree on every figure
// they share — outcomes, success rate, Average@K, Pass@K, environment
// errors, VM utilisation, the judge's precision and recall, and the shard
// rows, groups and zero-variance groups of the run's set in shards (a
// folder or a bucket), which the manifest read from there also gives.
func checkFiguresAgree(t *testing.T, dataDir, shards string, a App) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if a.Rollout == nil || a.Shards == nil || a.Judge == nil {
		t.Fatalf("%s: nightly summary without rollout, shard or judge figures: %+v", a.App, a)
	}
	env := service.NewEnv("test", &service.Common{DataDir: dataDir}, slog.New(slog.DiscardHandler), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	store, err := env.Store(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := runreport.Build(ctx, runreport.Sources{Bus: b, Store: store, ShardsDir: shards}, runreport.Config{Run: a.Run})
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: %s: nightly/rollout summary %v, run report %v", a.App, name, got, want)
		}
	}
	near := func(name string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s: %s: nightly/rollout summary %v, run report %v", a.App, name, got, want)
		}
	}
	s := a.Rollout
	check("outcomes", s.Outcomes, r.Overall.Outcomes)
	check("successes", s.Success, r.Overall.Successes)
	check("environment errors", s.EnvErrors, r.Overall.EnvErrors)
	check("trajectories", s.OnStream, r.Trajectories)
	near("success rate", s.Rate, r.Overall.Rate)
	near("Average@K", s.AverageAtK, r.Overall.AverageAtK)
	near("Pass@K", s.PassAtK, r.Overall.PassAtK)
	near("VM utilisation", s.Utilisation, r.VMs.Utilisation)
	if r.Judge == nil {
		t.Errorf("%s: the run report has no judge figures", a.App)
	} else {
		check("judge precision", deref(a.Judge.Precision), deref(r.Judge.Overall.Precision))
		check("judge recall", deref(a.Judge.Recall), deref(r.Judge.Overall.Recall))
		check("judge calls per trajectory", a.Judge.CallsPerTrajectory, r.Judge.Overall.CallsPerTrajectory)
	}
	if r.Shards == nil {
		t.Fatalf("%s: the run report read no shard set of the run under %s (notes %v)", a.App, shards, r.Notes)
	}
	check("shard rows", a.Shards.Rows, r.Shards.Rows)
	check("shard groups", a.Shards.Groups, r.Shards.Groups)
	check("zero-variance groups", a.Shards.ZeroVariance, r.Shards.ZeroVarianceGroups)
	bk, err := blob.OpenBucket(ctx, shards, blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := shard.ReadManifest(ctx, bk, a.Shards.Set)
	if err != nil {
		t.Fatal(err)
	}
	if a.Shards.Rows == 0 || a.Shards.Rows != m.Counts.Rows || a.Shards.Files != len(m.Files) {
		t.Errorf("%s: nightly summary: %d shard rows in %d files; the manifest at %s: %d rows in %d files", a.App, a.Shards.Rows, a.Shards.Files, shards, m.Counts.Rows, len(m.Files))
	}
	t.Logf("%s: %d trajectories, %d shard rows, utilisation %.3f, agree", a.App, s.OnStream, a.Shards.Rows, s.Utilisation)
}

func deref(p *float64) string {
	if p == nil {
		return "none"
	}
	return fmt.Sprintf("%.12g", *p)
}
