package scienceboard

import (
	"fmt"
	"sync"

	"github.com/codapipe/codapipe/internal/contract/scienceboard/pylambda"
)

// lambda is compiled Python lambda source from a task file.
type lambda = pylambda.Lambda

// lambdaCache holds compiled task-file lambdas by source text (task files
// are few; their lambdas are compiled once per process).
var lambdaCache struct {
	sync.Mutex
	m map[string]lambdaEntry
}

type lambdaEntry struct {
	l   *lambda
	err error
}

const maxCachedLambdas = 1 << 14

// compileLambda compiles src, once.
func compileLambda(src string) (*lambda, error) {
	lambdaCache.Lock()
	defer lambdaCache.Unlock()
	if e, ok := lambdaCache.m[src]; ok {
		return e.l, e.err
	}
	l, err := pylambda.Compile(src)
	if lambdaCache.m == nil || len(lambdaCache.m) >= maxCachedLambdas {
		lambdaCache.m = map[string]lambdaEntry{}
	}
	lambdaCache.m[src] = lambdaEntry{l, err}
	return l, err
}

// apply calls the lambda src with args.
func (e *evaluator) apply(src string, args ...any) (any, error) {
	l, err := compileLambda(src)
	if err != nil {
		return nil, fmt.Errorf("lambda %s: %w", clip(src), err)
	}
	v, err := l.Call(e.ctx, args...)
	if err != nil {
		return nil, fmt.Errorf("lambda %s: %w", clip(src), err)
	}
	return v, nil
}

// lambdasOf returns the lambda sources of a check (key, pred, find and a
// lambda value), by field name.
func lambdasOf(c Check) map[string]string {
	out := map[string]string{}
	add := func(field string, s *string) {
		if s != nil && IsLambda(*s) {
			out[field] = *s
		}
	}
	switch a := c.Args.(type) {
	case *StatesCheck:
		add("key", &a.Key)
		add("find", a.Find)
	case *InfoCheck:
		add("key", &a.Key)
		add("pred", a.Pred)
	case *DBCheck:
		add("key", &a.Key)
		add("pred", a.Pred)
	case *FileCheck:
		if v, err := decodeJSON(a.Value); err == nil {
			if s, ok := v.(string); ok {
				add("value", &s)
			}
		}
	}
	return out
}

// Unsupported lists why the task's checks cannot be evaluated: checks the
// loader could not type, checks of an app without an evaluator, lambdas
// that do not compile, a Lean task without exactly one query item. Empty
// when every check can run.
func Unsupported(t *Task) []string {
	var out []string
	for i, c := range t.Evaluate {
		for _, r := range checkIssues(t, c) {
			out = append(out, fmt.Sprintf("evaluate[%d]: %s", i, r))
		}
	}
	return out
}

// checkIssues says why check c of t cannot run (nil: it can).
func checkIssues(t *Task, c Check) []string {
	if c.Issue != "" {
		return []string{c.Issue}
	}
	if _, stop := c.Args.(*StopCheck); stop {
		return nil
	}
	if _, known := appChecks[t.App]; !known {
		return []string{fmt.Sprintf("type %q: app %q has no evaluator (known: ChimeraX, KAlgebra, Celestia, GrassGIS, Lean, TeXstudio)", c.Type, t.App)}
	}
	var out []string
	lambdas := lambdasOf(c)
	for _, field := range []string{"key", "find", "pred", "value"} {
		if src, ok := lambdas[field]; ok {
			if _, err := compileLambda(src); err != nil {
				out = append(out, fmt.Sprintf("type %q: field %q: %v", c.Type, field, err))
			}
		}
	}
	if _, ok := c.Args.(*PlaceholderCheck); ok {
		n := 0
		for _, it := range t.Initialize {
			if _, q := it.Args.(*LeanQuery); q {
				n++
			}
		}
		if n != 1 {
			out = append(out, fmt.Sprintf("type %q: expected exactly one query item, found %d", c.Type, n))
		}
	}
	return out
}
