package rollout

import (
	"fmt"
	"log/slog"
	"testing"
)

// Success semantics: with a perfect simulated planner (skill 1) and an
// exact executor (no grounding noise, no misgrounding) every episode of the
// app succeeds by the task's own evaluator; with skill 0 none does. One
// app, K = 1: a finished() task, a question (ANS) task and an infeasible
// task (the right end is call_user(), i.e. FAIL).
func TestAcceptSkillDecidesSuccess(t *testing.T) {
	taskIDs := []string{"S01", "S05", "S11"}
	tasks := simTaskDir(t, acceptApp, taskIDs...)
	for _, tc := range []struct {
		skill         float64
		rate, passAtK float64
		successes     int
	}{
		{skill: 1, rate: 1, passAtK: 1, successes: len(taskIDs)},
		{skill: 0, rate: 0, passAtK: 0, successes: 0},
	} {
		t.Run(fmt.Sprintf("skill %g", tc.skill), func(t *testing.T) {
			simCfg := writeSimConfig(t, fmt.Sprintf(`{"models": {
  "planner": {"default_skill": %g},
  "executor": {"grounding_noise": 0, "misground_rate": 0}
}}`, tc.skill))
			dir := t.TempDir()
			log, logs := newLogCapture(slog.LevelInfo)
			cfg := acceptConfig(dir, tasks, fmt.Sprintf("accept-skill-%g", tc.skill), log)
			cfg.Group, cfg.Samples, cfg.SimConfig = 1, 1, simCfg
			sum := runOK(t, cfg, logs)
			b := openTestBus(t, dir)
			defer b.Close()
			ps := readPublished(t, b, openStore(t, dir), acceptApp)
			if len(ps) != len(taskIDs) {
				t.Fatalf("%d trajectories, want %d", len(ps), len(taskIDs))
			}
			checkSummaryAgrees(t, sum, ps)
			if sum.EnvErrors != 0 || sum.Episodes != len(taskIDs) {
				t.Fatalf("summary %+v: want %d episodes without environment errors", sum, len(taskIDs))
			}
			if sum.Success != tc.successes || sum.Rate != tc.rate || sum.PassAtK != tc.passAtK || sum.AverageAtK != tc.rate {
				t.Errorf("skill %g: %d successes, rate %v, Average@1 %v, Pass@1 %v; want %d, %v, %v, %v",
					tc.skill, sum.Success, sum.Rate, sum.AverageAtK, sum.PassAtK, tc.successes, tc.rate, tc.rate, tc.passAtK)
			}
			for _, p := range ps {
				tr := p.Traj
				passed := tr.Eval != nil && tr.Eval.Passed
				if passed != (tc.skill == 1) {
					t.Errorf("skill %g: %s ended %s after %d steps, evaluation %+v", tc.skill, tr.Task.ID, tr.Outcome.Kind, len(tr.Steps), tr.Eval)
				}
				if tr.Eval == nil || len(tr.Eval.Unsupported) > 0 || tr.Eval.Error != "" {
					t.Errorf("%s: the evaluator did not run cleanly: %+v", tr.Task.ID, tr.Eval)
				}
			}
			t.Logf("skill %g: outcomes %v, rate %v, mean steps %.2f", tc.skill, sum.Outcomes, sum.Rate, sum.MeanSteps)
		})
	}
}
