// Package pylambda is a placeholder on the issue21 branch until the
// Starlark-based evaluator lands; it evaluates nothing.
package pylambda

import (
	"context"
	"errors"
)

// Lambda is compiled lambda source.
type Lambda struct{ src string }

// Compile always fails in this placeholder.
func Compile(src string) (*Lambda, error) { return nil, errors.New("pylambda: not built yet") }

// Call always fails in this placeholder.
func (l *Lambda) Call(ctx context.Context, args ...any) (any, error) {
	return nil, errors.New("pylambda: not built yet")
}
