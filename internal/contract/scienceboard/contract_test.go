package scienceboard

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
)

// goldenStamp is the clock the evaluate pairs run with: {{STAMP}}.
var goldenStamp = time.UnixMilli(1700000000123)

// replayVM answers a pair's requests with its golden replies, in order,
// and reports every request that differs from the golden one.
type replayVM struct {
	t    *testing.T
	ex   []sbtest.Exchange
	next int
}

func (v *replayVM) Call(ctx context.Context, r Request) ([]byte, error) {
	v.t.Helper()
	if v.next >= len(v.ex) {
		v.t.Errorf("extra request %s %s", r, r.Body)
		return nil, &statusError{599, "not in the golden pair"}
	}
	e := v.ex[v.next]
	v.next++
	stamp := strconv.FormatInt(goldenStamp.UnixMilli(), 10)
	if d := e.Request.MatchRequest(stamp, r.Server, r.Method, r.Path, r.Query, r.ContentType, r.Body); d != "" {
		v.t.Errorf("request %d: %s", v.next-1, d)
	}
	body := e.Reply.BodyBytes()
	if e.Reply.Status != 0 && e.Reply.Status != 200 {
		return nil, &statusError{e.Reply.Status, string(body)}
	}
	return body, nil
}

// TestGoldenPairs: the requests SetupSteps and Evaluate make for each
// golden pair's task are the ones the real harness sends, and the golden
// replies lead to the harness's verdict.
func TestGoldenPairs(t *testing.T) {
	pairs, err := sbtest.Golden()
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range pairs {
		t.Run(p.Name, func(t *testing.T) {
			tk, err := ParseTask(fmt.Sprintf("golden/%s.json", strings.ReplaceAll(p.Name, "/", "_")), p.TaskFile("http://files.test"))
			if err != nil {
				t.Fatal(err)
			}
			if len(tk.Unsupported) > 0 {
				t.Fatalf("unsupported: %q", tk.Unsupported)
			}
			vm := &replayVM{t: t, ex: p.Exchanges}
			switch p.Phase {
			case "initialize":
				exp, err := tk.ExpandPlaceholders(map[string]string{"PORTLIKE": "8000"})
				if err != nil {
					t.Fatal(err)
				}
				steps, err := SetupSteps(exp)
				if err != nil {
					t.Fatal(err)
				}
				for _, st := range steps {
					switch {
					case st.Download != nil:
						if p.Download == nil || !strings.HasSuffix(st.Download.URL, p.Download.URL) {
							t.Errorf("download step %+v, golden has %+v", st.Download, p.Download)
						}
						vm.next++ // the upload is the agent's; its test checks it
					case st.Request != nil:
						body, err := vm.Call(context.Background(), *st.Request)
						if err != nil {
							t.Errorf("initialize[%d]: %v", st.Item, err)
							continue
						}
						if err := st.CheckReply(body); err != nil {
							t.Errorf("initialize[%d]: golden reply refused: %v", st.Item, err)
						}
					}
				}
			case "evaluate":
				final := FinalAction{Kind: p.Final.Kind, Answer: p.Final.Answer}
				res := Evaluator{Now: func() time.Time { return goldenStamp }}.Evaluate(context.Background(), tk, vm, final)
				if p.Passed != nil && res.Passed != *p.Passed {
					t.Errorf("passed = %v, want %v: %+v", res.Passed, *p.Passed, res)
				}
			default:
				t.Fatalf("phase %q", p.Phase)
			}
			if vm.next != len(p.Exchanges) {
				t.Errorf("%d requests sent, the golden pair has %d", vm.next, len(p.Exchanges))
			}
		})
	}
}

// TestGoldenPairsCoverTheBenchmark: every setup func and check type of
// the 169 VM task files, per app, is exercised by a golden pair whose
// task really has it.
func TestGoldenPairsCoverTheBenchmark(t *testing.T) {
	pairs, err := sbtest.Golden()
	if err != nil {
		t.Fatal(err)
	}
	covered := map[string]bool{}
	for _, p := range pairs {
		tk, err := ParseTask("golden/x.json", p.TaskFile("http://files.test"))
		if err != nil {
			t.Fatalf("%s: %v", p.Name, err)
		}
		has := map[string]bool{}
		for _, it := range tk.Initialize {
			has[tk.App+"/"+it.Func] = true
		}
		for _, c := range tk.Evaluate {
			has[tk.App+"/"+c.Type] = true
		}
		for _, c := range p.Covers {
			if !has[c] {
				t.Errorf("%s: covers %s, but its task has no such item", p.Name, c)
			}
			covered[c] = true
		}
	}
	set, err := LoadDir(realTasks)
	if err != nil {
		t.Fatal(err)
	}
	need := map[string]bool{}
	for _, tk := range set.Tasks {
		for _, it := range tk.Initialize {
			need[tk.App+"/"+it.Func] = true
		}
		for _, c := range tk.Evaluate {
			need[tk.App+"/"+c.Type] = true
		}
	}
	var missing []string
	for n := range need {
		if !covered[n] {
			missing = append(missing, n)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Errorf("no golden pair covers %q", missing)
	}
	if len(need) != 50 {
		t.Errorf("the benchmark uses %d app/type names, want 32 setup + 18 check = 50", len(need))
	}
}
