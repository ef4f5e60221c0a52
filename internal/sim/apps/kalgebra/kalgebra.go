// Package kalgebra is part of codapipe's SIMULATOR (see package sim): the
// simulated KAlgebra, a calculator (console, variables, expression input)
// with 2D and 3D graph tabs and a dictionary tab, and the HTTP server of
// ScienceBoard's KAlgebra build (see server.go). Expressions use the
// language of package expr: p := 3*4 assigns, f := x->x^2 defines a
// function, sin(x) or x->sin(x) or x^2+y^2=1 plots in 2D, x*y or
// x^2+y^2+z^2=1 in 3D (one 3D plot at a time: a new one replaces it).
package kalgebra

import (
	"fmt"
	"image"
	"math"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/expr"
)

// Name is the app's name, as task files spell their "type".
const Name = "KAlgebra"

// Spec describes the simulated KAlgebra, for a machine's catalogue. Its
// argument (the state server's port) is ignored.
func Spec() desktop.AppSpec {
	return desktop.AppSpec{Name: Name, Programs: []string{"kalgebra", "kalgebramobile"}, Elements: layout(),
		Files:      map[string]string{"/app/bin/kalgebra": "#!/bin/sh\n# simulated\n"},
		Start:      func(*desktop.UI, []string) desktop.App { return newKAlgebra() },
		ServeState: ServeState}
}

type kplot struct {
	// Expr is the plot's function as KAlgebra prints it: a lambda, an
	// equation as its left side minus its right side ("(x, y)->x^2+y^2-9").
	Expr  string
	Dim   int    // 2 or 3
	Kind  string // explicit (y = f(x), z = f(x, y)), implicit (f(x, y[, z]) = 0)
	Color string // #rrggbb
	node  expr.Node
	param []string // explicit: the lambda's parameters (x or x,y)
}

type kconsole struct {
	in, out string
	err     bool
}

type kalgebra struct {
	desktop.Tabs // 0 calculator, 1 2D graph, 2 3D graph, 3 dictionary
	env          *expr.Env
	console      []kconsole
	conScroll    int
	plots        []*kplot
	sel2d        int // selected row of the 2D function list (-1: none)
	sel3d        int
	colors       int     // plots added so far (the next plot's color)
	viewX        float64 // 2D view centre
	viewY        float64
	viewSpan     float64 // x range width
}

var kalBuiltins = []string{"e", "euler", "pi"}

func newKAlgebra() *kalgebra {
	env := expr.NewEnv(expr.KAlgebra)
	for _, n := range kalBuiltins {
		v, _ := env.Lookup(n, nil)
		env.Set(n, v)
	}
	return &kalgebra{Tabs: desktop.Tabs{Of: kalTabOf}, env: env, sel2d: -1, sel3d: -1, viewSpan: 20}
}

// calculate evaluates one calculator input and logs it to the console.
func (k *kalgebra) calculate(u *desktop.UI, text string) {
	text = strings.TrimSpace(text)
	if text == "" {
		return
	}
	out, err := k.eval(text)
	entry := kconsole{in: text, out: out}
	if err != nil {
		entry.out, entry.err = "Error: "+err.Error(), true
	}
	k.console = append(k.console, entry)
	if len(k.console) > 500 {
		k.console = k.console[len(k.console)-500:]
	}
	k.conScroll = 0
	if u != nil {
		u.SetStatus(text + "  =  " + entry.out)
		if entry.err {
			u.SetStatus(entry.out)
		}
	}
}

func (k *kalgebra) eval(text string) (string, error) {
	name, rhs, isAssign := strings.Cut(text, ":=")
	name = strings.TrimSpace(name)
	if !isAssign {
		rhs = text
	} else if !expr.IsIdent(name) {
		return "", fmt.Errorf("cannot assign to %q", name)
	}
	n, err := expr.Parse(rhs, expr.KAlgebra)
	if err != nil {
		return "", err
	}
	v, err := k.env.Eval(n, nil)
	if err != nil {
		return "", err
	}
	if isAssign {
		k.env.Set(name, v)
	}
	return v.String(), nil
}

// addPlot parses a plot input for the 2D (dim 2) or 3D (dim 3) view.
func (k *kalgebra) addPlot(text string, dim int) (*kplot, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return nil, fmt.Errorf("empty function")
	}
	n, err := expr.Parse(text, expr.KAlgebra)
	if err != nil {
		return nil, err
	}
	axes := []string{"x", "y"}
	if dim == 3 {
		axes = []string{"x", "y", "z"}
	}
	p := &kplot{Dim: dim, node: n}
	isAxis := func(v string) bool {
		for _, a := range axes {
			if a == v {
				return true
			}
		}
		return false
	}
	checkFree := func(n expr.Node, allowed ...string) error {
		for _, v := range expr.FreeVars(n) {
			ok := false
			for _, a := range allowed {
				if a == v {
					ok = true
				}
			}
			if !ok {
				if _, known := k.env.Lookup(v, nil); !known {
					return fmt.Errorf("unknown identifier: %s", v)
				}
			}
		}
		return nil
	}
	params, body, isLambda := expr.Lambda(n)
	switch {
	case isLambda:
		want := dim - 1
		if len(params) != want {
			return nil, fmt.Errorf("a %dD function takes %d parameter(s), got %d", dim, want, len(params))
		}
		for _, pr := range params {
			if !isAxis(pr) || pr == axes[dim-1] {
				return nil, fmt.Errorf("parameter %q: polar and parametric plots are not simulated", pr)
			}
		}
		if err := checkFree(body, params...); err != nil {
			return nil, err
		}
		p.Kind, p.param, p.node = "explicit", params, body
	case expr.IsEquation(n):
		if err := checkFree(n, axes...); err != nil {
			return nil, err
		}
		p.Kind = "implicit"
		free := map[string]bool{}
		for _, v := range expr.FreeVars(n) {
			free[v] = true
		}
		switch {
		case dim == 3 && !free["z"] && free["x"] && free["y"]:
			// KAlgebra makes x^2-y^2=2 the function (x, y)->x^2-y^2-2
			// of a surface z = f(x, y).
			zero, _ := expr.EquationZero(n)
			p.Kind, p.param, p.node = "explicit", []string{"x", "y"}, zero
		case !free["x"] || !free["y"] || dim == 3 && !free["z"]:
			return nil, fmt.Errorf("an equation in fewer variables than its plot's axes is not simulated")
		}
	default:
		p.Kind = "explicit"
	}
	if p.Kind == "explicit" && p.param == nil {
		params := axes[:dim-1]
		for _, v := range expr.FreeVars(p.node) {
			if v == axes[dim-1] {
				return nil, fmt.Errorf("%s cannot appear in an explicit function; use an equation", v)
			}
		}
		if err := checkFree(p.node, params...); err != nil {
			return nil, err
		}
		p.param = params
	}
	if p.Kind == "explicit" {
		p.Expr = expr.FormatLambda(p.param, p.node)
	} else {
		zero, _ := expr.EquationZero(p.node)
		p.Expr = expr.FormatLambda(axes[:dim], zero)
	}
	// Check that it evaluates somewhere.
	if _, err := k.plotValue(p, []float64{0.5, 0.5, 0.5}); err != nil {
		return nil, err
	}
	return p, nil
}

// plotValue evaluates an explicit plot at the point's leading coordinates
// or an implicit one (lhs - rhs) at the whole point.
func (k *kalgebra) plotValue(p *kplot, pt []float64) (float64, error) {
	locals := map[string]expr.Value{}
	axes := []string{"x", "y", "z"}
	if p.Kind == "explicit" {
		for i, name := range p.param {
			locals[name] = expr.Number(pt[i])
		}
	} else {
		for i := 0; i < p.Dim && i < len(pt); i++ {
			locals[axes[i]] = expr.Number(pt[i])
		}
	}
	return k.env.Num(p.node, locals)
}

func (k *kalgebra) plotsOf(dim int) []*kplot {
	var out []*kplot
	for _, p := range k.plots {
		if p.Dim == dim {
			out = append(out, p)
		}
	}
	return out
}

func (k *kalgebra) removePlot(dim, idx int) {
	ps := k.plotsOf(dim)
	if len(ps) == 0 {
		return
	}
	if idx < 0 || idx >= len(ps) {
		idx = len(ps) - 1
	}
	victim := ps[idx]
	keep := k.plots[:0]
	for _, p := range k.plots {
		if p != victim {
			keep = append(keep, p)
		}
	}
	k.plots = keep
}

// State is the open tab, the calculator, the plots and the 2D view; its
// "vars" is what GET /vars answers (ServeState: null when there is no
// variable).
func (k *kalgebra) State() map[string]any {
	plots := []any{}
	for _, p := range k.plots {
		plots = append(plots, map[string]any{"expr": p.Expr, "dim": p.Dim, "kind": p.Kind})
	}
	vars := k.vars()
	console := []any{}
	for _, e := range tailConsole(k.console, 10) {
		console = append(console, map[string]any{"in": e.in, "out": e.out})
	}
	return map[string]any{
		"tab":       []string{"calculator", "2d", "3d", "dictionary"}[k.Open],
		"tab_index": k.Open,
		"vars":      vars,
		"plots":     plots,
		"console":   console,
		"view2d":    map[string]any{"x": k.viewX, "y": k.viewY, "span": k.viewSpan},
	}
}

func tailConsole(c []kconsole, n int) []kconsole {
	if len(c) > n {
		return c[len(c)-n:]
	}
	return c
}

// Layout.

var kalTabs = []string{"Calculator", "2D Graph", "3D Graph", "Dictionary"}

// The boxes the tabs share.
var (
	kalMainBox  = image.Rect(8, 82, 880, 716)
	kalSideBox  = image.Rect(888, 82, 1272, 660)
	kalInputBox = image.Rect(8, 724, 1160, 752)
	kalGoBox    = image.Rect(1166, 724, 1272, 752)
)

func layout() []desktop.Element {
	var l []desktop.Element
	add := func(id, label, kind, caption string, r image.Rectangle) {
		l = append(l, desktop.Element{ID: id, Label: label, Kind: kind, Caption: caption, Box: r})
	}
	for i, t := range kalTabs {
		add(fmt.Sprintf("tab-%d", i), "KAlgebra "+t+" tab", "tab", t, image.Rect(8+i*104, 52, 8+i*104+100, 76))
	}
	// Calculator.
	add("console", "KAlgebra console", "list", "", kalMainBox)
	add("variables", "KAlgebra variables list", "list", "", image.Rect(888, 82, 1272, 716))
	add("input", "KAlgebra expression input", "field", "", kalInputBox)
	add("calculate", "KAlgebra Calculate button", "button", "Calculate", kalGoBox)
	// The 2D and the 3D graph: the same controls, "3D" in the 3D labels.
	for _, g := range []struct{ dim, label, add, addCaption string }{{"2d", "", "Add", "Add"}, {"3d", "3D ", "Plot 3D", "Plot"}} {
		add("plot"+g.dim, "KAlgebra "+strings.ToUpper(g.dim)+" plot", "canvas", "", kalMainBox)
		add("list"+g.dim, "KAlgebra "+g.label+"function list", "list", "", kalSideBox)
		add("remove"+g.dim, "KAlgebra Remove "+g.label+"Function button", "button", "Remove", image.Rect(888, 666, 1076, 694))
		add("clear"+g.dim, "KAlgebra Clear "+g.label+"Functions button", "button", "Clear all", image.Rect(1084, 666, 1272, 694))
		add("input"+g.dim, "KAlgebra "+g.label+"function input", "field", "", kalInputBox)
		add("add"+g.dim, "KAlgebra "+g.add+" button", "button", g.addCaption, kalGoBox)
	}
	// Dictionary.
	add("dictionary", "KAlgebra dictionary", "list", "", image.Rect(8, 82, 1272, 752))
	return l
}

var kalTabOf = map[string]int{
	"console": 0, "variables": 0, "input": 0, "calculate": 0,
	"plot2d": 1, "list2d": 1, "remove2d": 1, "clear2d": 1, "input2d": 1, "add2d": 1,
	"plot3d": 2, "list3d": 2, "remove3d": 2, "clear3d": 2, "input3d": 2, "add3d": 2,
	"dictionary": 3,
}

// Click calculates, adds, removes and selects plots (the machine opens
// the tabs; only left clicks arrive).
func (k *kalgebra) Click(u *desktop.UI, el desktop.Element, button string, clicks int, pt image.Point) {
	switch el.ID {
	case "calculate":
		u.SubmitField("input")
	case "add2d", "add3d":
		in := "input2d"
		dim := 2
		if el.ID == "add3d" {
			in, dim = "input3d", 3
		}
		k.plotInput(u, in, dim)
	case "remove2d":
		k.removePlot(2, k.sel2d)
		k.sel2d = -1
	case "remove3d":
		k.removePlot(3, k.sel3d)
		k.sel3d = -1
	case "clear2d", "clear3d":
		dim := 2
		if el.ID == "clear3d" {
			dim = 3
		}
		keep := k.plots[:0]
		for _, p := range k.plots {
			if p.Dim != dim {
				keep = append(keep, p)
			}
		}
		k.plots = keep
	case "list2d", "list3d":
		row := (pt.Y - el.Box.Min.Y - 18) / 22
		dim := 2
		if el.ID == "list3d" {
			dim = 3
		}
		if row >= 0 && row < len(k.plotsOf(dim)) {
			if dim == 2 {
				k.sel2d = row
			} else {
				k.sel3d = row
			}
		}
	}
}

func (k *kalgebra) plotInput(u *desktop.UI, field string, dim int) {
	p, err := k.addPlot(u.Field(field), dim)
	if err != nil {
		u.SetStatus("Error: " + err.Error())
		return
	}
	k.insert(p)
	u.SetField(field, "")
	u.SetStatus("Added " + p.Expr)
}

// insert adds a parsed plot with the next color; a 3D plot replaces the
// 3D plot there is (KAlgebra's 3D view shows one).
func (k *kalgebra) insert(p *kplot) {
	c := plotColors[k.colors%len(plotColors)]
	k.colors++
	p.Color = fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
	if p.Dim == 3 {
		keep := k.plots[:0]
		for _, q := range k.plots {
			if q.Dim != 3 {
				keep = append(keep, q)
			}
		}
		k.plots = keep
	}
	k.plots = append(k.plots, p)
}

// Submit calculates or plots the field's text.
func (k *kalgebra) Submit(u *desktop.UI, id, text string) bool {
	switch id {
	case "input":
		k.calculate(u, text)
		return true
	case "input2d":
		k.plotInput(u, id, 2)
		return u.Field(id) == ""
	case "input3d":
		k.plotInput(u, id, 3)
		return u.Field(id) == ""
	}
	return false
}

// Shortcut: ctrl+1..4 open the tabs.
func (k *kalgebra) Shortcut(u *desktop.UI, keys []string) {
	switch strings.Join(keys, "+") {
	case "ctrl+1", "ctrl+2", "ctrl+3", "ctrl+4":
		k.Open = int(keys[1][0] - '1')
	}
}

// Scroll scrolls the console and zooms the 2D plot.
func (k *kalgebra) Scroll(u *desktop.UI, el desktop.Element, dx, dy int) {
	switch el.ID {
	case "console":
		k.conScroll = max(0, min(len(k.console)*2, k.conScroll+dy))
	case "plot2d":
		k.viewSpan = math.Max(0.01, math.Min(1e6, k.viewSpan*math.Pow(0.9, float64(dy))))
		k.viewSpan = expr.RoundSig(k.viewSpan, 10)
	}
}

// Drag on the 2D plot pans it.
func (k *kalgebra) Drag(u *desktop.UI, el desktop.Element, from, to image.Point) {
	if el.ID != "plot2d" {
		return
	}
	per := k.viewSpan / float64(kalMainBox.Dx())
	k.viewX = expr.RoundSig(k.viewX-float64(to.X-from.X)*per, 10)
	k.viewY = expr.RoundSig(k.viewY+float64(to.Y-from.Y)*per, 10)
}
