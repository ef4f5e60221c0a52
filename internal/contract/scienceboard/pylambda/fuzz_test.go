package pylambda

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
)

// fuzzSteps is the step budget of the fuzz target's calls.
const fuzzSteps = 20_000

// fuzzArg is the argument the fuzz target passes for every parameter: a
// small dump with the shapes the task files index into.
var fuzzArg = json.RawMessage(`{"layers": [{"name": "a", "opacity": 0.5}], "time": {"value": 2400000, "scale": 0.05},
 "entity": {"Sol": {"position": [1.5, 2, 3]}}, "output": "n: 1", "s": "x", "n": 3, "f": -0.5}`)

// FuzzCompile checks that arbitrary source never panics the parser, the
// translation or the interpreter; that Compile's errors are of this
// package's types with a position; and that a compiled lambda, called
// with a small budget, stops within it.
func FuzzCompile(f *testing.F) {
	lambdas, _ := taskLambdas(f, sbtest.Copy())
	for _, tl := range lambdas {
		f.Add(tl.src)
	}
	for _, s := range []string{
		"lambda x: 0 < x['n'] < 10 < 20", "lambda x: (y := x['n'], y ** 2)[-1]", "lambda x: {1, 2} | {x['n']}",
		"lambda x: [i for i in range(10 ** 9)]", "lambda x: 'a' * x['n']", "lambda x: x['f'] % 1 // 0.1",
		"lambda x: round(x['f'], 2) + sum(v for v in [1.5])", "lambda *a, **k: (a, k)", "lambda x: x is None is None",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, src string) {
		l, err := Compile(src, WithMaxSteps(fuzzSteps))
		if err != nil {
			var se *SyntaxError
			var ue *UnsupportedError
			var ee *EvalError
			switch {
			case errors.As(err, &se):
				if se.Line < 1 || se.Col < 1 {
					t.Errorf("%q: position %d:%d in %v", src, se.Line, se.Col, err)
				}
			case errors.As(err, &ue):
				if ue.Line < 1 || ue.Col < 1 {
					t.Errorf("%q: position %d:%d in %v", src, ue.Line, ue.Col, err)
				}
			case errors.As(err, &ee): // a default value raised
			default:
				t.Errorf("%q: error %T %v", src, err, err)
			}
			return
		}
		if len(src) > 200 {
			return // long programs can allocate much in a few steps
		}
		args := make([]any, l.Params())
		for i := range args {
			args[i] = fuzzArg
		}
		// Steps are bounded, allocation is not: a step may build a 1 Mi
		// element string. The context bounds the time.
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		th := l.thread()
		start := time.Now()
		l.callThread(ctx, th, args)
		if steps := th.ExecutionSteps(); steps > fuzzSteps+1 {
			t.Errorf("%q ran %d steps, budget %d", src, steps, fuzzSteps)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("%q: ran %v after a 2s deadline (%d steps)", src, d, th.ExecutionSteps())
		}
	})
}
