package kalgebra

import (
	"math"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/expr"
	tg "github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Tasks returns the simulator's KAlgebra tasks (see package taskgen);
// expected values are the calculator's (12 significant digits).
func Tasks() (tg.Set, error) {
	set := tg.Set{App: Spec(), Launch: tg.O("func", "launch", "wait", 2.5, "command", "LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/kalgebra «PORTLIKE»", "shell", true)}
	calc := tg.Click("KAlgebra expression input", "I will type into the calculator input.")
	tab2d := tg.Click("KAlgebra 2D Graph tab", "Plots are made on the 2D Graph tab.")
	in2d := tg.Click("KAlgebra function input", "")
	set.Add("S01", 5, "Calculate 17 times 23 in KAlgebra and store the result in variable `p`.", nil,
		[]tg.Obj{tg.Val("p", 391)}, calc, tg.Enter("p := 17*23"), tg.Done(""))
	set.Add("S02", 5, "Store the square root of 2 in variable `r` in KAlgebra.", nil,
		[]tg.Obj{tg.Val("r", expr.RoundSig(math.Sqrt2, 12))}, calc, tg.Enter("r := sqrt(2)"), tg.Done(""))
	set.Add("S03", 5, "Compute sin(π/6) in KAlgebra and store it in variable `s`.", nil,
		[]tg.Obj{tg.Val("s", 0.5)}, calc, tg.Enter("s := sin(pi/6)"), tg.Done(""))
	set.Add("S04", 5, "Define the function f(x) = x^2 + 1 as variable `f` in KAlgebra.", nil,
		[]tg.Obj{tg.Var("f", "x->x^2+1")}, calc, tg.Enter("f := x->x^2+1"), tg.Done(""))
	set.Add("S05", 5, "Calculate 2^20 in KAlgebra and submit the result via ANS.", nil,
		[]tg.Obj{tg.StopAns("1048576")}, calc, tg.Enter("2^20"), tg.Answer("1048576", "The console shows 1048576."))
	sinOn := [][]float64{}
	for _, x := range []float64{-3, -1.2, 0.5, 2, 4.4} {
		sinOn = append(sinOn, []float64{x, math.Sin(x)})
	}
	set.Add("S06", 5, "Plot y = sin(x) in the 2D graph of KAlgebra.", nil,
		[]tg.Obj{eqnPoints(sinOn, [][]float64{{0, 1}, {1.5, -0.5}, {-2.5, 2}, {3, 0.5}, {5, -5}})},
		tab2d, in2d, tg.Enter("sin(x)"), tg.Done(""))
	set.Add("S07", 5, "Plot the parabola y = x^2 - 4 in the 2D graph of KAlgebra.", nil,
		[]tg.Obj{eqnPoints([][]float64{{0, -4}, {2, 0}, {-3, 5}, {1.5, -1.75}}, [][]float64{{0, 0}, {1, 1}, {-2, 4}})},
		tab2d, in2d, tg.Enter("x->x^2-4"), tg.Done(""))
	removeAll := set.Add("S08", 5, "Remove every function from the 2D graph in KAlgebra.",
		[]tg.Obj{tg.O("func", "tab", "index", 1), tg.O("func", "func_2d", "expr", "x->x^3")},
		[]tg.Obj{tg.O("type", "eqn", "key", "#SIZE", "value", 0)},
		tg.Click("KAlgebra Clear Functions button", ""), tg.Done(""))
	// One function is plotted: removing it clears the graph too.
	removeAll.Alternatives = []string{"KAlgebra Remove Function button"}
	set.Add("S09", 10, "Compute the sum of the integers from 1 to 100 in KAlgebra and store it in variable `total`.", nil,
		[]tg.Obj{tg.Val("total", 5050)}, calc, tg.Enter("total := sum(n : n=1..100)"), tg.Done(""))
	set.Add("S10", 10, "Compare e^π and π^e in KAlgebra and store the larger one in variable `m`.", nil,
		[]tg.Obj{tg.Val("m", expr.RoundSig(math.Exp(math.Pi), 12))},
		calc, tg.Enter("e^pi"), tg.Enter("pi^e"), tg.Enter("m := e^pi"), tg.Done("e^pi is the larger one."))
	set.Add("S11", 5, "Plot the function w = x*y*z in the 4D graph tab of KAlgebra.", nil,
		[]tg.Obj{tg.StopFail()},
		tg.Click("KAlgebra 3D Graph tab", "I look for a 4D graph tab; the last graph tab is 3D."),
		tg.Fail("KAlgebra has no 4D graph."))
	set.Add("S12", 10, "Define g(x) = 2x + 1 as variable `g` and store g(5) in variable `q` in KAlgebra.", nil,
		[]tg.Obj{tg.Var("g", "x->2*x+1"), tg.Val("q", 11)}, calc, tg.Enter("g := x->2*x+1"), tg.Enter("q := g(5)"), tg.Done(""))
	set.Add("S13", 5, "Plot the surface z = x*y in the 3D graph of KAlgebra.", nil,
		[]tg.Obj{eqnPoints([][]float64{{1, 2, 2}, {-1.5, 2, -3}, {0.5, 0.5, 0.25}, {3, -2, -6}}, [][]float64{{1, 1, 2}, {2, 2, 0}, {-1, -1, -1}})},
		tg.Click("KAlgebra 3D Graph tab", "Surfaces are plotted on the 3D Graph tab."), tg.Click("KAlgebra 3D function input", ""), tg.Enter("x*y"), tg.Done(""))
	r := 3 / math.Sqrt2
	set.Add("S14", 5, "Plot the circle x^2 + y^2 = 9 in the 2D graph of KAlgebra.", []tg.Obj{tg.O("func", "tab", "index", 1)},
		[]tg.Obj{eqnPoints([][]float64{{3, 0}, {0, -3}, {-3, 0}, {r, r}, {1.8, 2.4}}, [][]float64{{1, 1}, {3, 3}, {0, 0}, {2, 2.5}})},
		in2d, tg.Enter("x^2+y^2=9"), tg.Done(""))
	return set, nil
}

// eqnPoints is a KAlgebra "eqn" check of points on and off the plot: the
// key lists the points, the value maps each point as the server keys it
// (its coordinates as the task file holds them, printed by nlohmann; see
// NlohmannNumber) to whether it is on the plot.
func eqnPoints(on, off [][]float64) tg.Obj {
	var keys [][]float64
	value := tg.Obj{}
	add := func(p []float64, b bool) {
		keys = append(keys, p)
		parts := make([]string, len(p))
		for i, x := range p {
			lit, err := traj.MarshalCompact(x)
			if err != nil {
				panic(err) // a finite float64 always encodes
			}
			parts[i] = NlohmannNumber(string(lit))
		}
		value = append(value, tg.KV{K: "(" + strings.Join(parts, ", ") + ")", V: b})
	}
	for _, p := range on {
		add(p, true)
	}
	for _, p := range off {
		add(p, false)
	}
	return tg.Obj{{K: "type", V: "eqn"}, {K: "key", V: keys}, {K: "value", V: value}}
}
