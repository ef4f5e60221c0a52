package kalgebra

import (
	"math"
	"strings"
	"testing"
)

func TestExpressions(t *testing.T) {
	// want is the exact value text; wantErr the exact error text.
	cases := []struct {
		in      string
		want    string
		wantErr string
	}{
		{in: "17*23", want: "391"}, {in: "2^10", want: "1024"}, {in: "2^-1", want: "0.5"}, {in: "-2^2", want: "-4"},
		{in: "(1+2)*3", want: "9"}, {in: "7 % 4", want: "3"},
		{in: "sqrt(2)", want: "1.41421356237"}, {in: "sin(pi/6)", want: "0.5"}, {in: "ln(e)", want: "1"},
		{in: "log(1000)", want: "3"}, {in: "root(27, 3)", want: "3"},
		{in: "sum(n : n=1..100)", want: "5050"}, {in: "product(k : k=1..5)", want: "120"},
		{in: "sum(1/n : n=1..20)", want: "3.59773965714"},
		{in: "2x", wantErr: "unknown identifier: x"}, {in: "3(1+1)", want: "6"}, {in: "π", want: "3.14159265359"},
		{in: "x->x^2+1", want: "x->x^2+1"}, {in: "(x, y)->x*y", want: "(x, y)->x*y"}, {in: "(x->x^2)(3)", want: "9"},
		{in: "max(1, 5, 3)", want: "5"}, {in: "factorial(5)", want: "120"},
		{in: "1/0", want: "inf"}, {in: "foo(1)", wantErr: "unknown function: foo"},
		{in: "1 +", wantErr: "unexpected end of input"}, {in: "1 $ 2", wantErr: `unexpected character '$'`},
		{in: "sum(n : n=1)", wantErr: `sum: expected "..", found ")"`},
		{in: "(x->x)(1, 2)", wantErr: "wrong number of arguments: expected 1, got 2"},
		{in: "a-(b-c)", wantErr: "unknown identifier: a"}, {in: "f(1)", wantErr: "unknown function: f"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			k := newKAlgebra()
			got, err := k.eval(c.in)
			switch {
			case c.wantErr != "":
				if err == nil || err.Error() != c.wantErr {
					t.Errorf("eval(%q) = %q, %v; want the error %q", c.in, got, err, c.wantErr)
				}
			case err != nil || got != c.want:
				t.Errorf("eval(%q) = %q, %v; want %q", c.in, got, err, c.want)
			}
		})
	}
	// Closures and recursion limits.
	k := newKAlgebra()
	for _, in := range []string{"r := a->q->a*q", "f := n->f(n)"} {
		if _, err := k.eval(in); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := k.eval("(r(2))(5)"); err != nil || got != "10" {
		t.Errorf("curried call = %q, %v", got, err)
	}
	if _, err := k.eval("f(1)"); err == nil {
		t.Error("infinite recursion did not stop")
	}
}

func TestKAlgebraPlots(t *testing.T) {
	k := newKAlgebra()
	cases := []struct {
		in, expr string
		dim      int
		on, off  [][]float64
		err      string
	}{
		{in: "sin(x)", expr: "x->sin(x)", dim: 2, on: [][]float64{{1, math.Sin(1)}}, off: [][]float64{{1, 1}}},
		{in: "x->x^2-4", expr: "x->x^2-4", dim: 2, on: [][]float64{{2, 0}, {-3, 5}}, off: [][]float64{{0, 0}}},
		{in: "x^2+y^2=9", expr: "(x, y)->x^2+y^2-9", dim: 2, on: [][]float64{{3, 0}, {1.8, 2.4}}, off: [][]float64{{1, 1}}},
		{in: "x*y", expr: "(x, y)->x*y", dim: 3, on: [][]float64{{2, 3, 6}}, off: [][]float64{{2, 3, 5}}},
		{in: "x^2+y^2+z^2=8", expr: "(x, y, z)->x^2+y^2+z^2-8", dim: 3, on: [][]float64{{2, 2, 0}}, off: [][]float64{{0, 0, 0}}},
		{in: "x^2-y^2=2", expr: "(x, y)->x^2-y^2-2", dim: 3, on: [][]float64{{-6.58, 20, -358.7036}, {16, -3, 245}}, off: [][]float64{{-3, -10.48, 0}}},
		{in: "x/16+y^2/9=x-(1+y)", expr: "(x, y)->x/16+y^2/9-(x-(1+y))", dim: 2, on: [][]float64{{16.0 / 15, 0}}, off: [][]float64{{0, 0}}},
		{in: "q->6*sin(3*q)", dim: 2, err: "polar"},
		{in: "x^2=4", dim: 2, err: "fewer variables"},
		{in: "x^2=4", dim: 3, err: "fewer variables"},
		{in: "x+y", dim: 2, err: "cannot appear in an explicit function"},
		{in: "w^2", dim: 2, err: "unknown identifier: w"},
		{in: "(x, y)->x", dim: 2, err: "takes 1 parameter"},
	}
	for _, c := range cases {
		t.Run(c.in, func(t *testing.T) {
			p, err := k.addPlot(c.in, c.dim)
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("addPlot(%q) = %v, want error %q", c.in, err, c.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if p.Expr != c.expr {
				t.Errorf("expr %q, want %q", p.Expr, c.expr)
			}
			for _, pt := range c.on {
				if !k.onPlot(p, pt) {
					t.Errorf("%v not on %s", pt, p.Expr)
				}
			}
			for _, pt := range c.off {
				if k.onPlot(p, pt) {
					t.Errorf("%v on %s", pt, p.Expr)
				}
			}
		})
	}
}
