package sched

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/pkg/traj"
)

func TestFamily(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"ui-tars-7b-step1200", "ui-tars-7b"},
		{"ui-tars-7b-step1300", "ui-tars-7b"},
		{"run/global_step_40", "run"},
		{"planner_iter_3", "planner"},
		{"run/checkpoint-500", "run"},
		{"model:1200", "model"},
		{"sim-step-0", "sim"},
		{"llama3", "llama3"},
		{"qwen2.5-vl-7b", "qwen2.5-vl-7b"},
		{"1200", "1200"},
		{"", ""},
	} {
		if got := Family(c.in); got != c.want {
			t.Errorf("Family(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

func TestCensored(t *testing.T) {
	for _, c := range []struct {
		kind         traj.OutcomeKind
		censored, ok bool
	}{
		{traj.OutcomeFinished, false, true},
		{traj.OutcomeFailed, false, true},
		{traj.OutcomeStepLimit, true, true},
		{traj.OutcomeContextOverflow, true, true},
		{traj.OutcomeEnvError, false, false},
	} {
		censored, ok := Censored(traj.Outcome{Kind: c.kind})
		if censored != c.censored || ok != c.ok {
			t.Errorf("%s: censored %v ok %v, want %v %v", c.kind, censored, ok, c.censored, c.ok)
		}
	}
}

// openTestHistory opens the history on a fresh embedded NATS server.
func openTestHistory(t *testing.T) (*natstest.Server, *History) {
	t.Helper()
	srv := natstest.Start(t)
	b, err := bus.Open(context.Background(), bus.Config{URL: srv.URL(), Timeout: 2 * time.Second, RetryBudget: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	h, err := OpenHistory(context.Background(), b, bus.DefaultTopology(), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	return srv, h
}

func TestHistoryPredicts(t *testing.T) {
	ctx := context.Background()
	srv, h := openTestHistory(t)
	const app, fam = "Bench", "ckpt"
	s := time.Second
	// Hostile task ids: dots, wildcards, spaces, empty, non-ASCII.
	tasks := []scienceboard.Task{
		{ID: "a.b", Steps: 10}, {ID: "*", Steps: 10}, {ID: ">", Steps: 5},
		{ID: " x/y ", Steps: 15}, {ID: "", Steps: 5}, {ID: "ü=41", Steps: 5},
		{ID: "unseen", Steps: 15},
	}
	type ep struct {
		task     string
		d        time.Duration
		steps    int
		censored bool
	}
	for _, e := range []ep{
		{"a.b", 100 * s, 10, false}, {"a.b", 200 * s, 10, false}, // mean 150
		{"*", 40 * s, 4, false}, {"*", 10 * s, 10, true}, // a shorter censored one does not lower it
		{">", 20 * s, 2, true}, {">", 50 * s, 5, true}, // a longer censored one raises it
		{" x/y ", 300 * s, 15, false},
		{"", 5 * s, 1, false},
		{"ü=41", 7 * s, 1, false},
	} {
		if err := h.Record(ctx, app, fam, e.task, e.d, e.steps, e.censored); err != nil {
			t.Fatal(err)
		}
	}
	// Another family and another app share none of it.
	if err := h.Record(ctx, app, "other", "a.b", time.Hour, 10, false); err != nil {
		t.Fatal(err)
	}
	if err := h.Record(ctx, "Other.App", fam, "a.b", time.Hour, 10, false); err != nil {
		t.Fatal(err)
	}
	l, err := h.Load(ctx, app, fam, tasks)
	if err != nil {
		t.Fatal(err)
	}
	// Seconds per step over the known tasks: (150+40+35+300+5+7) / (10+4+3.5+15+1+1).
	perStep := (150.0 + 40 + 35 + 300 + 5 + 7) / (10 + 4 + 3.5 + 15 + 1 + 1)
	for _, c := range []struct {
		task    int
		want    float64
		history bool
	}{
		{0, 150, true}, {1, 40, true}, {2, 35, true}, {3, 300, true}, {4, 5, true}, {5, 7, true},
		{6, 15 * perStep, false},
	} {
		got, fromHistory := l.Predict(&tasks[c.task])
		if math.Abs(got.Seconds()-c.want) > 1e-6 || fromHistory != c.history {
			t.Errorf("%q: predicted %v (history %v), want %gs (%v)", tasks[c.task].ID, got, fromHistory, c.want, c.history)
		}
	}
	if l.Known() != 6 {
		t.Errorf("Known() = %d, want 6", l.Known())
	}

	// Drift: a changed checkpoint of the family takes 2× as long; after
	// the first 1/lengthAlpha episodes the estimate follows it
	// exponentially.
	for range 12 {
		if err := h.Record(ctx, app, fam, "a.b", 300*s, 10, false); err != nil {
			t.Fatal(err)
		}
	}
	if l, err = h.Load(ctx, app, fam, tasks[:1]); err != nil {
		t.Fatal(err)
	}
	if got, _ := l.Predict(&tasks[0]); got < 290*s || got > 300*s {
		t.Errorf("after drift to 300 s: predicted %v", got)
	}

	// A failed read fails the load (the caller falls back to the step
	// limits), and a nil Lengths predicts from them.
	srv.Shutdown()
	if _, err := h.Load(ctx, app, fam, tasks); err == nil {
		t.Error("Load with the server down: no error")
	}
	var none *Lengths
	if got, fromHistory := none.Predict(&tasks[6]); got != 15*DefaultSecondsPerStep*s || fromHistory {
		t.Errorf("nil Lengths: %v %v", got, fromHistory)
	}
}

// fixedLengths predicts from a table.
type fixedLengths map[string]time.Duration

func (f fixedLengths) Predict(t *scienceboard.Task) (time.Duration, bool) {
	d, ok := f[t.ID]
	return d, ok
}

func TestOrder(t *testing.T) {
	a := &scienceboard.Task{ID: "a", Steps: 5}
	b := &scienceboard.Task{ID: "b", Steps: 15}
	c := &scienceboard.Task{ID: "c", Steps: 10}
	jobs := []Job{{a, 0}, {a, 1}, {b, 0}, {c, 0}, {c, 1}}
	ids := func(js []Job) (s []string) {
		for _, j := range js {
			s = append(s, j.Task.ID+string(rune('0'+j.Sample)))
		}
		return s
	}
	for _, tc := range []struct {
		name string
		p    Predictor
		want []string
	}{
		{"step limit", nil, []string{"b0", "c0", "c1", "a0", "a1"}},
		{"history", fixedLengths{"a": 300 * time.Second, "b": 20 * time.Second, "c": 100 * time.Second}, []string{"a0", "a1", "c0", "c1", "b0"}},
		{"ties keep the job order", fixedLengths{"a": time.Second, "b": time.Second, "c": time.Second}, []string{"a0", "a1", "b0", "c0", "c1"}},
	} {
		got := ids(Order(jobs, tc.p))
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %v", tc.name, got)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s: order %v, want %v", tc.name, got, tc.want)
				break
			}
		}
	}
	if got := ids(LongestFirst(jobs)); got[0] != "b0" || got[4] != "a1" {
		t.Errorf("LongestFirst: %v", got)
	}
	if jobs[0].Task != a || jobs[2].Task != b {
		t.Error("Order changed its argument")
	}
}
