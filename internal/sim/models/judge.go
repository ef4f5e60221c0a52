package models

// SIMULATOR: the judge endpoint. It reads the true outcome from the state
// chunks of the screenshots it is shown (through JudgeConfig.Truth) and
// answers like a VLM judge with the configured recall and false-positive
// rate.

import (
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// JudgeResult is the result dict of the simulated judge, with the key
// names CODA's judge prompt asks for.
type JudgeResult struct {
	Correctness    bool   `json:"Correctness"`
	Redundant      []int  `json:"Redundant"`
	Optimized      bool   `json:"Optimized"`
	FirstErrorStep *int   `json:"First_Error_Step"`
	ErrorType      string `json:"Error_Type"`
	CorrectAction  string `json:"Correct_Action"`
}

// judgeAnswerText finds the agent's final answer in a judge request: the
// last line of the user messages' text that starts with "ANS <answer>"
// (or "ANS: <answer>"), optionally after an "Action:" label.
func judgeAnswerText(c *chatCall) string {
	ans := ""
	for _, m := range c.msgs {
		if m.role != "user" {
			continue
		}
		for _, line := range strings.Split(m.text, "\n") {
			line = strings.TrimSpace(line)
			if len(line) >= 7 && strings.EqualFold(line[:7], "action:") {
				line = line[7:]
			}
			if a, ok := cutANS(line); ok {
				ans = a
			}
		}
	}
	return ans
}

// judgeFrames is what the judge reads from a call, once per call.
type judgeFrames struct {
	task     *tasks.Task
	answer   string
	states   []desktop.State // one per image, in order
	readable []bool          // readable[i] is false when image i has no state chunk
	// pos[i] is the step whose observation image i is (1-based; the
	// screen after the last step is steps+1), read from the image's label
	// ("Step 5 ...", "... after step 12"); without labels, i+1.
	pos      []int
	steps    int  // the number of steps the frames span (at least 1)
	lowRes   bool // every image is narrower than the screen
	success  bool // the truth
	firstErr int
	redund   []int
	shared   map[string]SharedDraw // per model: the draws shared by its votes on this trajectory
}

func (m *Endpoints) readJudgeFrames(c *chatCall) *judgeFrames {
	if c.frames != nil {
		return c.frames
	}
	f := &judgeFrames{task: m.callTask(c), answer: judgeAnswerText(c), states: []desktop.State{}}
	imgs := c.images()
	f.lowRes = len(imgs) > 0
	labelled := len(imgs) > 0
	for _, img := range imgs {
		s, err := m.world.readState(img.data)
		f.states = append(f.states, s)
		f.readable = append(f.readable, err == nil)
		if img.w >= desktop.ScreenW {
			f.lowRes = false
		}
		p, after := framePos(img.label)
		switch {
		case p == 0:
			labelled = false
		case after:
			f.steps = max(f.steps, p-1)
		default:
			f.steps = max(f.steps, p)
		}
		f.pos = append(f.pos, p)
	}
	if !labelled { // frame i shows step i
		f.steps = len(imgs)
		for i := range f.pos {
			f.pos[i] = i + 1
		}
	}
	f.steps = max(f.steps, 1)
	if f.task != nil {
		var err error
		f.success, f.firstErr, f.redund, err = m.cfg.Judge.Truth(f.task, f.states, f.answer)
		if err != nil {
			f.success, f.firstErr, f.redund = false, 0, nil
		}
	}
	f.shared = map[string]SharedDraw{}
	c.frames = f
	return f
}

var (
	afterStepRe = regexp.MustCompile(`(?i)\bafter\s+(?:the\s+last\s+step,?\s+)?step\s+(\d+)`)
	stepRe      = regexp.MustCompile(`(?i)\bstep\s+(\d+)`)
)

// framePos reads the position of a frame from its label: "... after step
// N" is the screen after step N (position N+1, after is true), "Step N
// ..." the observation of step N; 0 when the label names no step.
func framePos(label string) (pos int, after bool) {
	a := afterStepRe.FindStringSubmatchIndex(label)
	b := stepRe.FindStringSubmatchIndex(label)
	m, after := b, false
	if a != nil && (b == nil || a[0] <= b[0]) { // the earlier mention counts
		m, after = a, true
	}
	if m == nil {
		return 0, false
	}
	n, err := strconv.Atoi(label[m[2]:m[3]])
	switch {
	case err != nil || n >= 1<<20:
		return 0, false
	case after:
		return n + 1, true
	case n >= 1:
		return n, false
	}
	return 0, false
}

// stepOf is the step a judge names for frame i (0-based): the step whose
// observation it is, the last step for the screen after it.
func (f *judgeFrames) stepOf(i int) int {
	if i < 0 || i >= len(f.pos) {
		return f.steps
	}
	return min(max(f.pos[i], 1), f.steps)
}

// judgeAnswer answers one judge call (one vote). The draws are made in a
// fixed order: malformed?, the vote, shared vote?, then details.
func (m *Endpoints) judgeAnswer(c *chatCall, r *rand.Rand, temp float64) string {
	cfg := m.cfg.Judge
	malformed := r.Float64() < cfg.Faults.MalformedProb
	u := r.Float64()

	f := m.readJudgeFrames(c)
	task, answer, states, readable := f.task, f.answer, f.states, f.readable
	success, firstErr, redundant := f.success, f.firstErr, f.redund
	vm := cfg.VoteModel
	if s := cfg.Second; s != nil && c.model == s.Model {
		vm = s.VoteModel
	}
	shared, ok := f.shared[c.model]
	if !ok {
		shared = m.sharedVote(c.model, task, states, answer)
		f.shared[c.model] = shared
	}
	correct := vm.Yes(success, f.lowRes, shared, u, temp)

	res := JudgeResult{Correctness: correct, Redundant: []int{}}
	switch {
	case correct && success:
		// The truth's step i turned frame i into frame i+1: a redundant
		// step the judge can see when those frames are consecutive.
		for _, i := range redundant {
			if i >= 1 && i < len(f.pos) && f.pos[i] == f.pos[i-1]+1 {
				res.Redundant = append(res.Redundant, f.stepOf(i-1))
			}
		}
		sort.Ints(res.Redundant)
		res.Redundant = slices.Compact(res.Redundant)
		res.Optimized = len(res.Redundant) == 0
	case correct: // a false positive: the judge believes in a clean run
		res.Optimized = true
	case success: // a false negative
		fe := f.stepOf(r.IntN(max(len(f.pos), 1)))
		res.FirstErrorStep = &fe
		res.ErrorType = "The final screen does not show the requested result."
		res.CorrectAction = m.correctAction(task, fe)
	default:
		fe := f.steps
		if firstErr >= 1 && firstErr <= len(f.pos) {
			fe = f.stepOf(firstErr - 1)
		}
		res.FirstErrorStep = &fe
		res.ErrorType = m.errorType(task, answer)
		res.CorrectAction = m.correctAction(task, fe)
	}

	var b strings.Builder
	for i, s := range states {
		fmt.Fprintf(&b, "Frame %d: %s\n", i+1, m.caption(s, readable[i]))
	}
	if len(states) == 0 {
		b.WriteString("Frame 1: no screenshot was provided.\n")
	}
	out := b.String() + "Result:\n```json\n" + string(mustJSON(res)) + "\n```"
	if malformed {
		out = malformJudge(b.String(), res, r)
	}
	return out
}

// sharedVote is the draws shared by every vote of model on the same
// trajectory (VoteCorrelation).
func (m *Endpoints) sharedVote(model string, task *tasks.Task, states []desktop.State, answer string) SharedDraw {
	h := sha256.New()
	if model != m.cfg.Judge.Model {
		fmt.Fprintf(h, "model %s\x00", model)
	}
	if task != nil {
		fmt.Fprintf(h, "%s\x00", taskID(task))
	}
	fmt.Fprintf(h, "%s\x00", answer)
	for _, s := range states {
		h.Write(mustJSON(s))
		h.Write([]byte{0})
	}
	var key [32]byte
	h.Sum(key[:0])
	r := m.judge.stream("shared-vote", key)
	return SharedDraw{Consistent: r.Float64(), Verdict: r.Float64()}
}

func (m *Endpoints) errorType(task *tasks.Task, answer string) string {
	if task != nil {
		if want, ok := oracleAnswer(task); ok && !sameAnswer(answer, want) {
			if answer == "" {
				return "The agent did not give an answer."
			}
			return "The agent's answer is wrong."
		}
	}
	return "The task is not completed: the final state does not match the instruction."
}

// correctAction is what the step should have done: the oracle plan's
// thought at that step when known.
func (m *Endpoints) correctAction(task *tasks.Task, step int) string {
	if task != nil {
		if o := taskOracle(task); step >= 1 && step <= len(o) {
			return o[step-1].Thought
		}
	}
	return "Follow the instruction to its end before finishing."
}

// caption describes one frame: the app, the focused element and a few
// facts of the app's state.
func (m *Endpoints) caption(s desktop.State, readable bool) string {
	if !readable {
		return "the screenshot is unclear; no application state can be read from it."
	}
	if s.App == "" {
		return "the simulated desktop with no application open."
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s is open", s.App)
	if s.Focus != "" {
		label := s.Focus
		for _, e := range m.world.elements(s.App) {
			if e.ID == s.Focus {
				label = e.Label
				break
			}
		}
		fmt.Fprintf(&b, "; the focus is on '%s'", label)
	}
	keys := make([]string, 0, len(s.AppState))
	for k := range s.AppState {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	if len(keys) > 4 {
		keys = keys[:4]
	}
	for i, k := range keys {
		v := string(mustJSON(s.AppState[k]))
		if len(v) > 48 {
			v = v[:45] + "..."
		}
		sep := ", "
		if i == 0 {
			sep = "; it shows "
		}
		fmt.Fprintf(&b, "%s%s = %s", sep, k, v)
	}
	b.WriteString(".")
	return b.String()
}

func mustJSON(v any) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimRight(buf.Bytes(), "\n")
}

// malformJudge is one of the malformed answers judges give: no result
// dict, a dict cut off, or a dict with wrong key names.
func malformJudge(captions string, res JudgeResult, r *rand.Rand) string {
	switch r.IntN(4) {
	case 0: // no result block
		verdict := "the agent did not complete the task"
		if res.Correctness {
			verdict = "the agent completed the task"
		}
		return captions + "Overall, " + verdict + "."
	case 1: // truncated in the middle of the dict
		js := string(mustJSON(res))
		return captions + "Result:\n```json\n" + js[:len(js)/2]
	case 2: // wrong key names
		wrong := map[string]any{
			"Success":    res.Correctness,
			"Redundant":  res.Redundant,
			"Optimized":  res.Optimized,
			"Error_Step": res.FirstErrorStep,
			"Error_Type": res.ErrorType,
		}
		return captions + "Result:\n```json\n" + string(mustJSON(wrong)) + "\n```"
	}
	return ""
}
