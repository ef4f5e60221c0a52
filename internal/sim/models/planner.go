package models

// SIMULATOR: the planner endpoint. It knows every task's hidden oracle plan
// and answers its next step with the configured skill.

import (
	"fmt"
	"image"
	"math/rand/v2"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// finishStep is the step after the last oracle step of a task that is
// not a question.
var finishStep = tasks.OracleStep{Thought: "The task is complete.", Action: "finished()"}

// plannerHistory returns the previous plans, oldest first: the text of
// every assistant message (the layout of prompt sets stored before
// layouts were named) or, when there is none, the history the user text
// shows as our default planner_user.tmpl words it (historyFromText).
func plannerHistory(c *chatCall) []string {
	var h []string
	for _, m := range c.msgs {
		if m.role == "assistant" {
			h = append(h, m.text)
		}
	}
	if h != nil {
		return h
	}
	return historyFromText(c.userText())
}

// historyFromText reads the earlier plans out of a planner's user text
// as the default planner_user.tmpl lays them out: entries "Step n:" on a
// line of their own (n = 1, 2, …), each followed by its plan, up to the
// next entry or the blank line before "Task: "; "(no output)" is an empty
// plan. A prompt of other wording shows the simulated planner no history
// (docs/simulator.md).
func historyFromText(text string) []string {
	var h []string
	rest := text
	for n := 1; ; n++ {
		hdr := "Step " + strconv.Itoa(n) + ":\n"
		i := strings.Index(rest, hdr)
		for i > 0 && rest[i-1] != '\n' {
			j := strings.Index(rest[i+1:], hdr)
			if j < 0 {
				i = -1
				break
			}
			i += 1 + j
		}
		if i < 0 {
			return h
		}
		rest = rest[i+len(hdr):]
		end := len(rest)
		for _, stop := range []string{"\n\nStep " + strconv.Itoa(n+1) + ":\n", "\n\nTask: "} {
			if k := strings.Index(rest, stop); k >= 0 && k < end {
				end = k
			}
		}
		plan := rest[:end]
		if plan == "(no output)" {
			plan = ""
		}
		h = append(h, plan)
	}
}

// skill returns the planner's skill for app.
func (m *Endpoints) skill(app string) float64 {
	if s, ok := m.cfg.Planner.Skill[app]; ok {
		return s
	}
	return m.cfg.Planner.DefaultSkill
}

// OracleProgress returns how many steps of the task's oracle plan the
// given history of plans (assistant turns, in order) has taken: the
// oracle steps are matched in order, a plan that does not match the next
// oracle step is skipped (a wrong step does not undo progress). It is the
// index k of the oracle step the simulated planner answers next.
func (m *Endpoints) OracleProgress(task *tasks.Task, history []string) int {
	oracle := taskOracle(task)
	k := 0
	for _, h := range history {
		if k < len(oracle) && m.planMatches(h, oracle[k]) {
			k++
		}
	}
	return k
}

// NextOracleStep returns the step the simulated planner gives as its
// correct answer after history: oracle step OracleProgress(task,
// history), or, when the oracle plan is exhausted, its last step again if
// that ends the episode (an answer "ANS ...", finished() or call_user()),
// else "finished()".
func (m *Endpoints) NextOracleStep(task *tasks.Task, history []string) tasks.OracleStep {
	oracle := taskOracle(task)
	k := m.OracleProgress(task, history)
	if k < len(oracle) {
		return oracle[k]
	}
	if len(oracle) > 0 {
		last := oracle[len(oracle)-1]
		if p, err := uitars.Parse(last.Action, uitars.DefaultOptions()); err == nil && len(p.Actions) == 1 {
			switch p.Actions[0].Type {
			case traj.Answer, traj.Finished, traj.CallUser:
				return last
			}
		}
	}
	return finishStep
}

// PlanText is the planner's text for an oracle step, as the oracle writes
// it (points on the 0–1000 grid).
func PlanText(s tasks.OracleStep) string { return "Thought: " + s.Thought + "\nAction: " + s.Action }

// planText is the planner's text for an oracle step in the planner's
// coordinate space: PlanText on the grid, the action re-written in any
// other space.
func (m *Endpoints) planText(s tasks.OracleStep) string {
	if m.planSpace.opt.Coords.Space == traj.Grid1000 {
		return PlanText(s)
	}
	p, err := uitars.Parse(s.Action, uitars.DefaultOptions())
	if err != nil {
		return PlanText(s)
	}
	acts := make([]string, len(p.Actions))
	for i, a := range p.Actions {
		for _, pt := range []*traj.Point{a.Point, a.Start, a.End} {
			if pt != nil {
				*pt = *m.planSpace.point(pt.X*desktop.ScreenW, pt.Y*desktop.ScreenH)
			}
		}
		acts[i] = m.planSpace.format(a)
	}
	return "Thought: " + s.Thought + "\nAction: " + strings.Join(acts, "\n\n")
}

// planMatches reports whether a plan (a previous assistant turn) took
// oracle step o: its thought asks for the same action as o's thought, or,
// when it has no thought, its action matches o's action (a point inside
// o's target element, the same text, keys or answer).
func (m *Endpoints) planMatches(plan string, o tasks.OracleStep) bool {
	p, err := m.planSpace.parse(plan)
	thought := strings.TrimSpace(p.Thought)
	if thought == "" && err != nil {
		thought = strings.TrimSpace(plan)
	}
	if thought != "" {
		if normSpace(thought) == normSpace(o.Thought) {
			return true
		}
		pi, oi := m.parseThought(thought), m.parseThought(o.Thought)
		if pi.verb != "" && pi.same(oi) {
			return true
		}
	}
	if err != nil || len(p.Actions) != 1 {
		return false
	}
	oa, err := uitars.Parse(o.Action, uitars.DefaultOptions())
	if err != nil || len(oa.Actions) != 1 {
		return false
	}
	return m.sameStep(p.Actions[0], oa.Actions[0], o.Target)
}

// sameStep compares a taken action with an oracle action: same type and
// arguments, with points compared by the target element's box.
func (m *Endpoints) sameStep(a, o traj.Action, target string) bool {
	if a.Type != o.Type {
		return false
	}
	switch a.Type {
	case traj.TypeText, traj.Answer:
		return sameAnswer(a.Text, o.Text) || a.Text == o.Text
	case traj.Hotkey:
		return strings.Join(a.Keys, " ") == strings.Join(o.Keys, " ")
	case traj.Scroll:
		if a.Direction != o.Direction {
			return false
		}
	case traj.Wait, traj.Finished, traj.CallUser:
		return true
	}
	if a.Type.Pointed() && o.Point != nil {
		if a.Point == nil {
			return false
		}
		if e, ok := m.lookupLabel(target); ok {
			x, y := a.Point.X*desktop.ScreenW, a.Point.Y*desktop.ScreenH
			return x >= float64(e.Box.Min.X) && x <= float64(e.Box.Max.X) && y >= float64(e.Box.Min.Y) && y <= float64(e.Box.Max.Y)
		}
		return *a.Point == *o.Point
	}
	return a.Type != traj.Drag
}

// plan answers one planner call. The draws are made in a fixed order:
// malformed?, correct?, then what the wrong step is.
func (m *Endpoints) plan(c *chatCall, r *rand.Rand, temp float64) string {
	malformed := r.Float64() < m.cfg.Planner.Faults.MalformedProb
	uCorrect := r.Float64()
	var out string
	if task := m.callTask(c); task == nil {
		out = m.genericPlan(c, r)
	} else {
		if c.next == nil {
			next := m.NextOracleStep(task, plannerHistory(c))
			c.next = &next
		}
		if uCorrect < temper(m.skill(taskApp(task)), temp) {
			out = m.planText(*c.next)
		} else {
			out = m.wrongPlan(task, *c.next, r)
		}
	}
	if malformed {
		out = m.malformPlan(out, r)
	}
	return out
}

// genericPlan is a plausible step for an instruction that matches no
// task: a click on an element of an app the text names (any app when it
// names none), or a wait.
func (m *Endpoints) genericPlan(c *chatCall, r *rand.Rand) string {
	text := c.userText()
	var els []desktop.Element
	for _, app := range m.world.apps() {
		if strings.Contains(text, app) {
			els = append(els, m.world.elements(app)...)
		}
	}
	if len(els) == 0 {
		for _, app := range m.world.apps() {
			els = append(els, m.world.elements(app)...)
		}
	}
	if len(els) == 0 || r.Float64() < 0.25 {
		return "Thought: " + thoughtFor(traj.Wait, desktop.Element{}, "") + "\nAction: " + m.planSpace.format(traj.Action{Type: traj.Wait})
	}
	e := els[r.IntN(len(els))]
	return "Thought: " + thoughtFor(traj.Click, e, "") + "\nAction: " + m.planSpace.format(traj.Action{Type: traj.Click, Point: m.planSpace.elementPoint(e)})
}

// wrongPlan is a plausible step that is not the oracle step next: a click
// on another element of the app, a right-click on the right element, a wrong value typed, a scroll, a wrong key, or finishing early
// (a wrong answer for question tasks).
func (m *Endpoints) wrongPlan(task *tasks.Task, next tasks.OracleStep, r *rand.Rand) string {
	app := taskApp(task)
	els := m.world.elements(app)
	target, hasTarget := m.lookupLabel(next.Target)
	nextIntent := m.parseThought(next.Thought)
	want, question := oracleAnswer(task)
	_, answering := cutANS(next.Action)
	finishWeight := 1.0
	switch {
	case answering:
		finishWeight = 3 // the natural mistake at an answer step: a wrong answer
	case next.Action == finishStep.Action:
		finishWeight = 0
	}

	// Wrong plans never touch an element the oracle uses at any step: a
	// click there could be a right step out of order, and a planner of
	// skill 0 must not succeed by accident.
	used := map[string]bool{}
	for _, st := range taskOracle(task) {
		if st.Target != "" {
			used[st.Target] = true
		}
	}
	if task != nil {
		for _, label := range task.Alternatives {
			used[label] = true // another way to the goal
		}
	}
	// Nor an element that shares screen space with one: elements of a
	// hidden tab sit where the visible tab's are (KAlgebra's 2D and 3D
	// Remove buttons), so a click meant for one lands on the other.
	var usedBoxes []image.Rectangle
	for label := range used {
		if e, ok := m.lookupLabel(label); ok {
			usedBoxes = append(usedBoxes, e.Box)
		}
	}
	others := make([]desktop.Element, 0, len(els))
	for _, e := range els {
		if (!hasTarget || e.ID != target.ID) && !used[e.Label] && !overlapsAny(e.Box, usedBoxes) {
			others = append(others, e)
		}
	}
	pick := func() desktop.Element {
		if len(others) > 0 {
			return others[r.IntN(len(others))]
		}
		if len(els) > 0 {
			return els[r.IntN(len(els))]
		}
		return target
	}
	type cand struct {
		weight float64
		make   func() (string, traj.Action)
	}
	cands := []cand{
		{4, func() (string, traj.Action) { // another element
			e := pick()
			return thoughtFor(traj.Click, e, ""), traj.Action{Type: traj.Click, Point: m.planSpace.elementPoint(e)}
		}},
		{1, func() (string, traj.Action) { // a right-click on the target
			// Not a double click: on buttons and radios a double click does
			// what a click does, so it would be the right step in disguise
			// and a planner of skill 0 could still succeed.
			e := target
			if !hasTarget {
				e = pick()
			}
			return thoughtFor(traj.RightSingle, e, ""), traj.Action{Type: traj.RightSingle, Point: m.planSpace.elementPoint(e)}
		}},
		{weightIf(nextIntent.verb == traj.TypeText, 3, 1), func() (string, traj.Action) { // a wrong value
			text := wrongValue(nextIntent.text, r)
			return thoughtFor(traj.TypeText, desktop.Element{}, text), traj.Action{Type: traj.TypeText, Text: text}
		}},
		{1, func() (string, traj.Action) { // a scroll
			e := pick()
			dir := []string{traj.DirUp, traj.DirDown}[r.IntN(2)]
			return thoughtFor(traj.Scroll, e, dir), traj.Action{Type: traj.Scroll, Point: m.planSpace.elementPoint(e), Direction: dir}
		}},
		{0.5, func() (string, traj.Action) { // a key
			// No undo: undoing the task's setup can be a solution.
			keys := [][]string{{"escape"}, {"ctrl", "s"}, {"tab"}}[r.IntN(3)]
			return thoughtFor(traj.Hotkey, desktop.Element{}, strings.Join(keys, " ")), traj.Action{Type: traj.Hotkey, Keys: keys}
		}},
		{finishWeight, func() (string, traj.Action) { // finish early or answer wrongly
			if question {
				a := wrongValue(want, r)
				return fmt.Sprintf("The answer is %s.", a), traj.Action{Type: traj.Answer, Text: a}
			}
			return thoughtFor(traj.Finished, desktop.Element{}, ""), traj.Action{Type: traj.Finished}
		}},
	}
	total := 0.0
	for _, c := range cands {
		total += c.weight
	}
	for try := 0; try < 8; try++ {
		u := r.Float64() * total
		i := 0
		for ; i < len(cands)-1 && u >= cands[i].weight; i++ {
			u -= cands[i].weight
		}
		thought, act := cands[i].make()
		text := "Thought: " + thought + "\nAction: " + m.planSpace.format(act)
		if !m.planMatches(text, next) {
			return text
		}
	}
	if next.Action != "wait()" {
		return "Thought: " + thoughtFor(traj.Wait, desktop.Element{}, "") + "\nAction: wait()"
	}
	return "Thought: " + thoughtFor(traj.Finished, desktop.Element{}, "") + "\nAction: finished()"
}

// overlapsAny reports whether r shares pixels with any of rs.
func overlapsAny(r image.Rectangle, rs []image.Rectangle) bool {
	for _, x := range rs {
		if r.Overlaps(x) {
			return true
		}
	}
	return false
}

func weightIf(cond bool, yes, no float64) float64 {
	if cond {
		return yes
	}
	return no
}

// wrongValue perturbs a value as a confused model would: another number,
// a dropped or doubled character, or a stray word. It never returns s.
func wrongValue(s string, r *rand.Rand) string {
	enter := strings.HasSuffix(s, "\n")
	core := strings.TrimSuffix(s, "\n")
	var out string
	if f, err := strconv.ParseFloat(strings.TrimSpace(core), 64); err == nil {
		out = strconv.FormatFloat(f+float64(1+r.IntN(9))*[]float64{-1, 1}[r.IntN(2)], 'f', -1, 64)
	} else if core == "" {
		out = []string{"test", "help", "1", "ok"}[r.IntN(4)]
	} else {
		switch r.IntN(3) {
		case 0: // drop a character
			i := r.IntN(len(core))
			out = core[:i] + core[i+1:]
		case 1: // double a character
			i := r.IntN(len(core))
			out = core[:i+1] + core[i:]
		default:
			out = core + " " + []string{"all", "1", "again", "x"}[r.IntN(4)]
		}
		out = strings.ToValidUTF8(out, "")
	}
	if out == core || strings.TrimSpace(out) == "" {
		out = core + "0"
	}
	if enter {
		out += "\n"
	}
	return out
}

// malformPlan turns a plan into one of the malformed answers planners
// give: no Action line, a garbled call, a truncated call, prose, or
// nothing. The result never parses in the planner's space.
func (m *Endpoints) malformPlan(plan string, r *rand.Rand) string {
	thought, action, _ := strings.Cut(plan, "\nAction: ")
	var out string
	switch r.IntN(5) {
	case 0: // the Action line is missing
		out = thought
		if !strings.HasPrefix(out, "Thought:") {
			out = "Thought: " + out
		}
	case 1: // a garbled call
		out = thought + "\nAction: clik(start_box='"
	case 2: // truncated in the middle of the call
		cut := len(action) / 2
		if i := strings.IndexByte(action, '('); i >= 0 && cut <= i {
			cut = i + 1
		}
		out = thought + "\nAction: " + action[:cut] + "'("
	case 3: // prose instead of the format
		out = "I should " + strings.ToLower(strings.TrimPrefix(thought, "Thought: "))
	default:
		out = ""
	}
	if _, err := m.planSpace.parse(out); err == nil {
		out = ""
	}
	return out
}
