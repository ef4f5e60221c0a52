package models

import (
	"context"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	simguest "github.com/codapipe/codapipe/internal/sim/guest"
	"github.com/codapipe/codapipe/internal/sim/tasks"
)

// TestStateTruthAgreesWithTheEvaluator: for every task the judge's truth,
// computed from the final state alone, agrees with the task's evaluator
// run on the live machine — after the oracle (success) and from the
// initial state (failure) — except for tasks whose checks need a POST
// endpoint, which fall back to the answer-based truth.
func TestStateTruthAgreesWithTheEvaluator(t *testing.T) {
	ts, err := tasks.All()
	if err != nil {
		t.Fatal(err)
	}
	exact, fallback := 0, 0
	for _, task := range ts {
		t.Run(task.ID, func(t *testing.T) {
			// From the initial state: never a success.
			m, err := tasks.NewMachine(&task, 1)
			if err != nil {
				t.Fatal(err)
			}
			if ok, _, _, err := StateTruth(&task, []desktop.State{m.State()}, ""); err != nil || ok {
				t.Fatalf("initial state judged a success (%v)", err)
			}
			// After the oracle.
			states := []desktop.State{m.State()}
			final := playOracle(t, m, &task, func() { states = append(states, m.State()) })
			live := scienceboard.Evaluate(context.Background(), &task.Task, simguest.Local(m, simguest.Config{}), final)
			ok, _, redundant, err := StateTruth(&task, states, final.Answer)
			if err != nil {
				t.Fatal(err)
			}
			res := scienceboard.Evaluate(context.Background(), &task.Task, newChunkSource(states[len(states)-1]), final)
			if expectsFail(&task.Task) || len(res.Unsupported) > 0 || res.Error != "" {
				fallback++
				return
			}
			exact++
			if ok != live.Passed {
				t.Fatalf("truth from the state says %v, the live evaluator %v (%+v)", ok, live.Passed, live)
			}
			if final.Kind != scienceboard.FinalFail && !ok {
				t.Fatalf("the oracle run is not judged a success")
			}
			if len(redundant) != 0 {
				t.Errorf("the oracle has redundant steps %v", redundant)
			}
		})
	}
	t.Logf("truth exact from the state for %d tasks, fallback for %d", exact, fallback)
	if exact < 40 {
		t.Errorf("only %d tasks judged from their state; want most of them", exact)
	}
}

// replyRecorder is a scienceboard.Caller that records what another answers.
type replyRecorder struct {
	c     scienceboard.Caller
	calls []recorded
}

type recorded struct {
	r      scienceboard.Request
	body   []byte
	status int // 0: 2xx
}

func (rc *replyRecorder) Call(ctx context.Context, r scienceboard.Request) ([]byte, error) {
	b, err := rc.c.Call(ctx, r)
	rc.calls = append(rc.calls, recorded{r: r, body: b, status: scienceboard.StatusOf(err)})
	return b, err
}

// TestChunkSourceAnswersAsTheMachine: every request the evaluator sends
// to a live machine — after the oracle and in the initial state — that the
// screenshot's state answers gets the same answer, byte for byte, from
// the state (chunkSource) as from the machine (guest.Local); the
// requests it cannot answer are the ones of the tasks that fall back.
// playOracle plays task's oracle plan on m up to the action that ends it,
// whose final action it returns, calling played (when not nil) after each
// action before that.
func playOracle(t *testing.T, m desktop.Machine, task *tasks.Task, played func()) scienceboard.FinalAction {
	t.Helper()
	for _, a := range task.OracleActions() {
		f, end, err := tasks.Play(m, a)
		if err != nil {
			t.Fatal(err)
		}
		if end {
			return f
		}
		if played != nil {
			played()
		}
	}
	return scienceboard.FinalAction{}
}

func TestChunkSourceAnswersAsTheMachine(t *testing.T) {
	ts, err := tasks.All()
	if err != nil {
		t.Fatal(err)
	}
	answered := map[string]int{}
	for _, task := range ts {
		t.Run(task.ID, func(t *testing.T) {
			m, err := tasks.NewMachine(&task, 1)
			if err != nil {
				t.Fatal(err)
			}
			check := func(when string, final scienceboard.FinalAction) {
				st := m.State()
				rec := &replyRecorder{c: simguest.Local(m, simguest.Config{})}
				scienceboard.Evaluate(context.Background(), &task.Task, rec, final)
				src := newChunkSource(st)
				for _, c := range rec.calls {
					b, err := src.Call(context.Background(), c.r)
					if err != nil && scienceboard.StatusOf(err) == 0 {
						// Unanswerable: the live evaluation's later requests
						// may depend on it; stop here.
						t.Logf("%s: %s: not answered from the state: %v", when, c.r, err)
						return
					}
					answered[st.App]++
					if status := scienceboard.StatusOf(err); status != c.status || string(b) != string(c.body) {
						t.Errorf("%s: %s: the state answers %d %.200q, the machine %d %.200q", when, c.r, status, b, c.status, c.body)
					}
				}
			}
			check("initial state", scienceboard.FinalAction{Kind: scienceboard.FinalDone})
			check("after the oracle", playOracle(t, m, &task, nil))
		})
	}
	t.Logf("requests answered from the state, by app: %v", answered)
	for _, app := range apps.Catalog().Names() {
		if answered[app] == 0 {
			t.Errorf("no request to %s answered from the state", app)
		}
	}
}
