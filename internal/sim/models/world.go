package models

// SIMULATOR: what the simulated models know of the simulated world. Every
// use of the world's API by the model endpoints goes through this file.

import (
	"strings"
	"sync"
	"unicode"

	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// TruthFunc decides what truly happened in a trajectory, for the
// simulated judge. task is the task whose instruction the judge request
// quotes (nil when none matched); states are the simulated states read
// from the request's screenshots in order (frame i+1 is states[i]; a
// screenshot without a readable state chunk gives the zero State);
// answer is the agent's final answer ("" when none was given).
//
// It returns whether the task succeeded, the 1-based step number of the
// first wrong step (0: none), the 1-based step numbers of redundant steps,
// and an error when it cannot decide (the judge then treats the
// trajectory as failed).
type TruthFunc func(task *tasks.Task, states []desktop.State, answer string) (success bool, firstError int, redundant []int, err error)

// modelWorld is the world as the simulated models see it. packageWorld is
// the simulator's own world (packages tasks and desktop); tests may
// substitute another.
type modelWorld interface {
	tasks() []*tasks.Task
	apps() []string
	elements(app string) []desktop.Element
	findElement(label string) (desktop.Element, bool)
	readState(png []byte) (desktop.State, error)
}

type packageWorld struct{}

func (packageWorld) tasks() []*tasks.Task                  { return taskList() }
func (packageWorld) apps() []string                        { return apps.Catalog().Names() }
func (packageWorld) elements(app string) []desktop.Element { return apps.Catalog().Elements(app) }
func (packageWorld) findElement(label string) (desktop.Element, bool) {
	return apps.Catalog().FindElement(label)
}
func (packageWorld) readState(png []byte) (desktop.State, error) { return desktop.ReadStateChunk(png) }

var (
	allTasksOnce sync.Once
	allTasks     []*tasks.Task
)

// taskList returns the simulator's tasks (none when they fail to load:
// then the planner answers generic steps and the judge knows no task).
func taskList() []*tasks.Task {
	allTasksOnce.Do(func() {
		ts, err := tasks.All()
		if err != nil {
			return
		}
		for i := range ts {
			allTasks = append(allTasks, &ts[i])
		}
	})
	return allTasks
}

// Accessors of a task's fields, kept here so that the models depend on
// the world's Task type in one place.
func taskApp(t *tasks.Task) string                { return t.App }
func taskInstruction(t *tasks.Task) string        { return t.Instruction }
func taskOracle(t *tasks.Task) []tasks.OracleStep { return t.Oracle }
func taskID(t *tasks.Task) string                 { return t.ID }

// DefaultTruth is the judge's truth when JudgeConfig.Truth is nil.
// It is deliberately simple, for the simulator on its own: the task
// succeeds when the agent's answer equals the oracle's answer (question
// tasks) — otherwise it cannot tell and reports failure. The lead wires
// the task's real evaluator through JudgeConfig.Truth.
func DefaultTruth(task *tasks.Task, states []desktop.State, answer string) (bool, int, []int, error) {
	if task == nil {
		return false, 0, nil, nil
	}
	if want, ok := oracleAnswer(task); ok {
		return sameAnswer(answer, want), 0, nil, nil
	}
	return false, 0, nil, nil
}

// oracleAnswer returns the answer of a question task (its oracle plan's
// last step is "ANS <answer>").
func oracleAnswer(t *tasks.Task) (string, bool) {
	o := taskOracle(t)
	if len(o) == 0 {
		return "", false
	}
	a := strings.TrimSpace(o[len(o)-1].Action)
	if rest, ok := cutANS(a); ok {
		return rest, true
	}
	return "", false
}

// cutANS returns the answer of an "ANS <answer>" / "ANS: <answer>" text.
func cutANS(s string) (string, bool) {
	s = strings.TrimSpace(s)
	if len(s) < 3 || !strings.EqualFold(s[:3], "ANS") {
		return "", false
	}
	rest := s[3:]
	if rest != "" && rest[0] != ' ' && rest[0] != ':' && rest[0] != '\t' {
		return "", false
	}
	rest = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(rest), ":"))
	if i := strings.IndexAny(rest, "\r\n"); i >= 0 {
		rest = strings.TrimSpace(rest[:i])
	}
	return rest, rest != ""
}

// sameAnswer compares answers ignoring case, surrounding space and a
// trailing period.
func sameAnswer(a, b string) bool {
	norm := func(s string) string {
		return strings.TrimSuffix(strings.ToLower(strings.Join(strings.Fields(s), " ")), ".")
	}
	return norm(a) != "" && norm(a) == norm(b)
}

// normSpace collapses runs of white space into one space.
func normSpace(s string) string { return strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ") }

// callTask is findTask on the user text of a call, computed once per call.
func (m *Endpoints) callTask(c *chatCall) *tasks.Task {
	if !c.taskDone {
		c.task, c.taskDone = m.findTask(c.userText()), true
	}
	return c.task
}

// findTask returns the task whose instruction occurs in text (white space
// normalised; the longest instruction wins), or nil.
func (m *Endpoints) findTask(text string) *tasks.Task {
	text = normSpace(text)
	var best *tasks.Task
	bestLen := 0
	for _, t := range m.world.tasks() {
		ins := normSpace(taskInstruction(t))
		if len(ins) > bestLen && strings.Contains(text, ins) {
			best, bestLen = t, len(ins)
		}
	}
	return best
}
