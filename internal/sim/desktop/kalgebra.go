package desktop

import (
	"encoding/json"
	"fmt"
	"image"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/expr"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// KAlgebra: a calculator (console, variables, expression input) with 2D
// and 3D graph tabs and a dictionary tab. Expressions use the language in
// expr.go: p := 3*4 assigns, f := x->x^2 defines a function, sin(x) or
// x->sin(x) or x^2+y^2=1 plots in 2D, x*y or x^2+y^2+z^2=1 in 3D.

type kplot struct {
	Expr  string // canonical text
	Dim   int    // 2 or 3
	Kind  string // explicit, implicit
	node  expr.Node
	param []string // explicit: the lambda's parameters (x or x,y)
}

type kconsole struct {
	in, out string
	err     bool
}

type kalgebra struct {
	tab       int // 0 calculator, 1 2D graph, 2 3D graph, 3 dictionary
	env       *expr.Env
	console   []kconsole
	conScroll int
	plots     []*kplot
	sel2d     int // selected row of the 2D function list (-1: none)
	sel3d     int
	viewX     float64 // 2D view centre
	viewY     float64
	viewSpan  float64 // x range width
}

var kalBuiltins = []string{"e", "euler", "pi"}

func newKAlgebra() *kalgebra {
	env := expr.NewEnv(expr.KAlgebra)
	for _, n := range kalBuiltins {
		v, _ := env.Lookup(n, nil)
		env.Set(n, v)
	}
	return &kalgebra{env: env, sel2d: -1, sel3d: -1, viewSpan: 20}
}

func (k *kalgebra) name() string { return AppKAlgebra }

// calculate evaluates one calculator input and logs it to the console.
func (k *kalgebra) calculate(u *ui, text string) {
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
		u.status = text + "  =  " + entry.out
		if entry.err {
			u.status = entry.out
		}
	}
}

func (k *kalgebra) eval(text string) (string, error) {
	name, rhs, isAssign := strings.Cut(text, ":=")
	name = strings.TrimSpace(name)
	if isAssign {
		if !expr.IsIdent(name) {
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
		k.env.Set(name, v)
		return v.String(), nil
	}
	n, err := expr.Parse(text, expr.KAlgebra)
	if err != nil {
		return "", err
	}
	v, err := k.env.Eval(n, nil)
	if err != nil {
		return "", err
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
		p.Expr = expr.Format(p.node)
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

// onPlot reports whether the point lies on the plot (relative tolerance
// 1e-6).
func (k *kalgebra) onPlot(p *kplot, pt []float64) bool {
	if len(pt) != p.Dim {
		return false
	}
	v, err := k.plotValue(p, pt)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	if p.Kind == "explicit" {
		want := pt[p.Dim-1]
		return math.Abs(v-want) <= 1e-6*math.Max(1, math.Abs(want))
	}
	scale := 1.0
	for _, c := range pt {
		scale = math.Max(scale, c*c)
	}
	return math.Abs(v) <= 1e-6*scale
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

func (k *kalgebra) vars() map[string]any {
	out := map[string]any{}
	for name, v := range k.env.Vars() {
		out[name] = v.String()
	}
	return out
}

func (k *kalgebra) state() map[string]any {
	plots := []any{}
	for _, p := range k.plots {
		plots = append(plots, map[string]any{"expr": p.Expr, "dim": p.Dim, "kind": p.Kind})
	}
	console := []any{}
	for _, e := range tailConsole(k.console, 10) {
		console = append(console, map[string]any{"in": e.in, "out": e.out})
	}
	return map[string]any{
		"tab":       []string{"calculator", "2d", "3d", "dictionary"}[k.tab],
		"tab_index": k.tab,
		"vars":      k.vars(),
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

// endpoint serves /vars, /eqns, /tab, /func2d and /func3d.
func (k *kalgebra) endpoint(p string, q url.Values, body []byte) ([]byte, int, bool) {
	switch p {
	case "/vars":
		return mustJSON(k.vars()), 200, true
	case "/eqns":
		if len(body) == 0 {
			list := []any{}
			for _, pl := range k.plots {
				list = append(list, map[string]any{"expr": pl.Expr, "dim": pl.Dim})
			}
			return mustJSON(map[string]any{"size": len(k.plots), "plots": list}), 200, true
		}
		var req struct {
			Points [][]float64 `json:"points"`
		}
		if err := json.Unmarshal(body, &req.Points); err != nil {
			if err2 := json.Unmarshal(body, &req); err2 != nil {
				return jsonError("expected a list of points or {\"points\": [...]}: " + err.Error()), 400, true
			}
		}
		dim := 2
		if len(req.Points) > 0 {
			dim = len(req.Points[0])
		}
		res := []any{}
		for _, pl := range k.plotsOf(dim) {
			on := make([]bool, len(req.Points))
			for i, pt := range req.Points {
				on[i] = k.onPlot(pl, pt)
			}
			res = append(res, map[string]any{"expr": pl.Expr, "dim": pl.Dim, "points": on})
		}
		return mustJSON(map[string]any{"size": len(k.plots), "plots": res}), 200, true
	case "/tab":
		var req struct {
			Index *int `json:"index"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Index == nil || *req.Index < 0 || *req.Index > 3 {
			return jsonError(`expected {"index": 0..3}`), 400, true
		}
		k.tab = *req.Index
		return []byte(`{"status":"ok"}`), 200, true
	case "/func2d", "/func3d":
		var req struct {
			Expr string `json:"expr"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Expr == "" {
			return jsonError(`expected {"expr": "..."}`), 400, true
		}
		dim := 2
		if p == "/func3d" {
			dim = 3
		}
		pl, err := k.addPlot(req.Expr, dim)
		if err != nil {
			return jsonError(err.Error()), 400, true
		}
		k.plots = append(k.plots, pl)
		return []byte(`{"status":"ok"}`), 200, true
	}
	return nil, 0, false
}

func (k *kalgebra) launchArgs(u *ui, args []string) {}

// Layout.

var (
	kalMainBox  = image.Rect(8, 82, 880, 716)
	kalSideBox  = image.Rect(888, 82, 1272, 660)
	kalInputBox = image.Rect(8, 724, 1160, 752)
	kalGoBox    = image.Rect(1166, 724, 1272, 752)
)

var kalTabs = []string{"Calculator", "2D Graph", "3D Graph", "Dictionary"}

func kalgebraLayout() *appLayout {
	l := &appLayout{app: AppKAlgebra}
	add := func(id, label, kind, caption string, r image.Rectangle) {
		l.elems = append(l.elems, &uiElement{Element: Element{ID: id, Label: label, Kind: kind, Box: r}, caption: caption})
	}
	for i, t := range kalTabs {
		add(fmt.Sprintf("tab-%d", i), "KAlgebra "+t+" tab", "tab", t, image.Rect(8+i*104, 52, 8+i*104+100, 76))
	}
	// Calculator.
	add("console", "KAlgebra console", "list", "", kalMainBox)
	add("variables", "KAlgebra variables list", "list", "", image.Rect(888, 82, 1272, 716))
	add("input", "KAlgebra expression input", "field", "", kalInputBox)
	add("calculate", "KAlgebra Calculate button", "button", "Calculate", kalGoBox)
	// 2D graph.
	add("plot2d", "KAlgebra 2D plot", "canvas", "", kalMainBox)
	add("list2d", "KAlgebra function list", "list", "", kalSideBox)
	add("remove2d", "KAlgebra Remove Function button", "button", "Remove", image.Rect(888, 666, 1076, 694))
	add("clear2d", "KAlgebra Clear Functions button", "button", "Clear all", image.Rect(1084, 666, 1272, 694))
	add("input2d", "KAlgebra function input", "field", "", kalInputBox)
	add("add2d", "KAlgebra Add button", "button", "Add", kalGoBox)
	// 3D graph.
	add("plot3d", "KAlgebra 3D plot", "canvas", "", kalMainBox)
	add("list3d", "KAlgebra 3D function list", "list", "", kalSideBox)
	add("remove3d", "KAlgebra Remove 3D Function button", "button", "Remove", image.Rect(888, 666, 1076, 694))
	add("clear3d", "KAlgebra Clear 3D Functions button", "button", "Clear all", image.Rect(1084, 666, 1272, 694))
	add("input3d", "KAlgebra 3D function input", "field", "", kalInputBox)
	add("add3d", "KAlgebra Plot 3D button", "button", "Plot", kalGoBox)
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

func (k *kalgebra) visible(id string) bool { return tabVisible(kalTabOf, k.tab, id) }

// tabVisible reports whether element id shows with tab open: elements
// listed in of belong to one tab, the others show on every tab.
func tabVisible(of map[string]int, tab int, id string) bool {
	if t, ok := of[id]; ok {
		return t == tab
	}
	return true
}

// tabClick handles what a tabbed app's click does before its own elements:
// only left clicks count, and one on "tab-N" opens tab N. It reports
// whether the click is used up.
func tabClick(tab *int, el *uiElement, button string) bool {
	if button != "left" {
		return true
	}
	if rest, ok := strings.CutPrefix(el.ID, "tab-"); ok {
		*tab, _ = strconv.Atoi(rest)
		return true
	}
	return false
}

func (k *kalgebra) click(u *ui, el *uiElement, button string, clicks int, pt image.Point) {
	if tabClick(&k.tab, el, button) {
		return
	}
	switch el.ID {
	case "calculate":
		k.calculate(u, u.field("input"))
		u.setField("input", "")
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

func (k *kalgebra) plotInput(u *ui, field string, dim int) {
	p, err := k.addPlot(u.field(field), dim)
	if err != nil {
		u.status = "Error: " + err.Error()
		return
	}
	k.plots = append(k.plots, p)
	u.setField(field, "")
	u.status = "Added " + p.Expr
}

func (k *kalgebra) submit(u *ui, id, text string) bool {
	switch id {
	case "input":
		k.calculate(u, text)
		return true
	case "input2d":
		k.plotInput(u, id, 2)
		return u.field(id) == ""
	case "input3d":
		k.plotInput(u, id, 3)
		return u.field(id) == ""
	}
	return false
}

func (k *kalgebra) shortcut(u *ui, keys []string) {
	switch strings.Join(keys, "+") {
	case "ctrl+1", "ctrl+2", "ctrl+3", "ctrl+4":
		k.tab = int(keys[1][0] - '1')
	}
}

func (k *kalgebra) scroll(u *ui, el *uiElement, dx, dy int) {
	switch el.ID {
	case "console":
		k.conScroll = max(0, min(len(k.console)*2, k.conScroll+dy))
	case "plot2d":
		k.viewSpan = math.Max(0.01, math.Min(1e6, k.viewSpan*math.Pow(0.9, float64(dy))))
		k.viewSpan = expr.RoundSig(k.viewSpan, 10)
	}
}

func (k *kalgebra) drag(u *ui, el *uiElement, from, to image.Point) {
	if el.ID != "plot2d" {
		return
	}
	per := k.viewSpan / float64(kalMainBox.Dx())
	k.viewX = expr.RoundSig(k.viewX-float64(to.X-from.X)*per, 10)
	k.viewY = expr.RoundSig(k.viewY+float64(to.Y-from.Y)*per, 10)
}

// Rendering.

var plotColors = []color3{{0x1e, 0x64, 0xc8}, {0xd0, 0x30, 0x30}, {0x20, 0x9a, 0x40}, {0x9c, 0x27, 0xb0}, {0xe0, 0x80, 0x10}, {0x00, 0x96, 0x96}}

func (k *kalgebra) render(cv *screen.Canvas, u *ui) {
	for i, t := range kalTabs {
		cv.Tab(u.layout.byID[fmt.Sprintf("tab-%d", i)].Box, t, k.tab == i)
	}
	cv.Fill(image.Rect(0, 76, ScreenW, 77), screen.ColBorder)
	switch k.tab {
	case 0:
		k.renderCalculator(cv, u)
	case 1:
		k.renderPlot2D(cv, u)
	case 2:
		k.renderPlot3D(cv, u)
	default:
		inner := cv.Panel(u.layout.byID["dictionary"].Box, "Dictionary", screen.ColField)
		cv.Noise(inner, screen.Hash("kal-dict"), screen.GrainPanel)
		var ls []string
		for _, f := range []string{"abs", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "exp", "ln", "log", "sqrt", "root", "power", "floor", "ceiling", "factorial", "max", "min", "sum", "product"} {
			ls = append(ls, f+"    built-in function")
		}
		cv.Lines(inner, ls, 0, screen.ColText)
	}
	cv.Fill(image.Rect(0, 758, ScreenW, ScreenH), screen.RGB(0xd4, 0xd4, 0xd2))
	cv.TextClip(8, 772, u.status, screen.ColText, image.Rect(0, 758, ScreenW, ScreenH))
}

func (k *kalgebra) renderInput(cv *screen.Canvas, u *ui, field, button string) {
	e := u.layout.byID[field]
	ph := map[string]string{"input": "Expression to calculate, e.g. p := 3*4", "input2d": "Function to plot, e.g. x->sin(x)", "input3d": "Surface to plot, e.g. x*y"}[field]
	cv.Field(e.Box, u.field(field), ph, u.focus == field, u.selAll && u.focus == field)
	b := u.layout.byID[button]
	cv.Button(b.Box, b.caption, false)
}

func (k *kalgebra) renderCalculator(cv *screen.Canvas, u *ui) {
	inner := cv.Panel(kalMainBox, "Console", screen.ColField)
	cv.Noise(inner, screen.Hash("kal-console", strconv.Itoa(len(k.console))), screen.GrainMain)
	var ls []string
	for _, e := range k.console {
		ls = append(ls, e.in)
		if e.err {
			ls = append(ls, "ERROR "+e.out)
		} else {
			ls = append(ls, "    = "+e.out)
		}
	}
	cv.Lines(inner, ls, k.conScroll, screen.ColText)
	vinner := cv.Panel(u.layout.byID["variables"].Box, "Variables", screen.ColField)
	cv.Noise(vinner, screen.Hash("kal-vars"), screen.GrainPanel)
	var vs []string
	vars := k.env.Vars()
	for _, name := range slices.Sorted(maps.Keys(vars)) {
		vs = append(vs, fmt.Sprintf("%-8s %s", name, vars[name]))
	}
	y := vinner.Min.Y + 2
	for _, l := range vs {
		cv.TextClip(vinner.Min.X+4, y, l, screen.ColText, vinner)
		y += screen.LineH
	}
	k.renderInput(cv, u, "input", "calculate")
}

func (k *kalgebra) toScreen(x, y float64) (float64, float64) {
	b := kalMainBox
	per := float64(b.Dx()) / k.viewSpan
	return float64(b.Min.X+b.Dx()/2) + (x-k.viewX)*per, float64(b.Min.Y+b.Dy()/2) - (y-k.viewY)*per
}

func (k *kalgebra) renderPlot2D(cv *screen.Canvas, u *ui) {
	b := kalMainBox
	cv.Fill(b, screen.RGB(0xfb, 0xfb, 0xf7))
	var sb strings.Builder
	for _, p := range k.plotsOf(2) {
		sb.WriteString(p.Expr + ";")
	}
	cv.Noise(b, screen.Hash("kal-2d", sb.String(), expr.FormatNum(k.viewSpan), expr.FormatNum(k.viewX), expr.FormatNum(k.viewY)), screen.GrainMain)
	per := float64(b.Dx()) / k.viewSpan
	step := math.Pow(10, math.Floor(math.Log10(k.viewSpan/10)))
	x0 := k.viewX - k.viewSpan/2
	for gx := math.Floor(x0/step) * step; gx <= x0+k.viewSpan; gx += step {
		sx, _ := k.toScreen(gx, 0)
		cv.Line(sx, float64(b.Min.Y), sx, float64(b.Max.Y-1), screen.RGB(0xdd, 0xdd, 0xe8), 1, b)
	}
	halfH := float64(b.Dy()) / per / 2
	for gy := math.Floor((k.viewY-halfH)/step) * step; gy <= k.viewY+halfH; gy += step {
		_, sy := k.toScreen(0, gy)
		cv.Line(float64(b.Min.X), sy, float64(b.Max.X-1), sy, screen.RGB(0xdd, 0xdd, 0xe8), 1, b)
	}
	ax, ay := k.toScreen(0, 0)
	cv.Line(ax, float64(b.Min.Y), ax, float64(b.Max.Y-1), screen.RGB(0x60, 0x60, 0x60), 1, b)
	cv.Line(float64(b.Min.X), ay, float64(b.Max.X-1), ay, screen.RGB(0x60, 0x60, 0x60), 1, b)
	for i, p := range k.plotsOf(2) {
		col := plotColors[i%len(plotColors)]
		c := screen.RGB(col.r, col.g, col.b)
		if p.Kind == "explicit" {
			var px, py float64
			ok := false
			for sx := b.Min.X; sx < b.Max.X; sx++ {
				x := k.viewX + (float64(sx)-float64(b.Min.X+b.Dx()/2))/per
				y, err := k.plotValue(p, []float64{x})
				if err != nil || math.IsNaN(y) || math.IsInf(y, 0) {
					ok = false
					continue
				}
				_, sy := k.toScreen(x, y)
				if ok && math.Abs(sy-py) < float64(b.Dy()) {
					cv.Line(px, py, float64(sx), math.Max(-1e4, math.Min(1e4, sy)), c, 2, b)
				}
				px, py, ok = float64(sx), math.Max(-1e4, math.Min(1e4, sy)), true
			}
			continue
		}
		// Implicit: mark cells where lhs-rhs changes sign.
		const cell = 4
		cols := b.Dx()/cell + 1
		prev := make([]float64, cols)
		for ry := 0; ry*cell < b.Dy(); ry++ {
			var left float64
			for rx := 0; rx < cols; rx++ {
				sx := float64(b.Min.X + rx*cell)
				sy := float64(b.Min.Y + ry*cell)
				x := k.viewX + (sx-float64(b.Min.X+b.Dx()/2))/per
				y := k.viewY - (sy-float64(b.Min.Y+b.Dy()/2))/per
				v, err := k.plotValue(p, []float64{x, y})
				if err != nil {
					v = math.NaN()
				}
				if rx > 0 && left*v <= 0 {
					cv.Disc(sx, sy, 1.5, c, false, b)
				}
				if ry > 0 && prev[rx]*v <= 0 {
					cv.Disc(sx, sy, 1.5, c, false, b)
				}
				left, prev[rx] = v, v
			}
		}
	}
	k.renderList(cv, u, "list2d", 2, k.sel2d)
	cv.Button(u.layout.byID["remove2d"].Box, "Remove", false)
	cv.Button(u.layout.byID["clear2d"].Box, "Clear all", false)
	k.renderInput(cv, u, "input2d", "add2d")
}

func (k *kalgebra) renderList(cv *screen.Canvas, u *ui, id string, dim, sel int) {
	inner := cv.Panel(u.layout.byID[id].Box, "Functions", screen.ColField)
	cv.Noise(inner, screen.Hash("kal-list", id), screen.GrainPanel)
	for i, p := range k.plotsOf(dim) {
		r := image.Rect(inner.Min.X, inner.Min.Y+i*22, inner.Max.X, inner.Min.Y+i*22+22)
		if i == sel {
			cv.Fill(r, screen.ColSelect)
		}
		col := plotColors[i%len(plotColors)]
		cv.Fill(image.Rect(r.Min.X+4, r.Min.Y+6, r.Min.X+14, r.Min.Y+16), screen.RGB(col.r, col.g, col.b))
		cv.TextClip(r.Min.X+20, r.Min.Y+4, p.Expr, screen.ColText, r)
	}
}

func (k *kalgebra) renderPlot3D(cv *screen.Canvas, u *ui) {
	b := kalMainBox
	cv.Gradient(b, screen.RGB(0xf4, 0xf6, 0xfa), screen.RGB(0xd8, 0xde, 0xea))
	var sb strings.Builder
	for _, p := range k.plotsOf(3) {
		sb.WriteString(p.Expr + ";")
	}
	cv.Noise(b, screen.Hash("kal-3d", sb.String()), screen.GrainMain)
	cx, cy := float64(b.Min.X+b.Dx()/2), float64(b.Min.Y+b.Dy()/2)
	proj := func(x, y, z float64) (float64, float64) {
		return cx + (x-y)*22, cy + (x+y)*11 - z*14
	}
	for _, ax := range [][3]float64{{8, 0, 0}, {0, 8, 0}, {0, 0, 8}} {
		x1, y1 := proj(0, 0, 0)
		x2, y2 := proj(ax[0], ax[1], ax[2])
		cv.Line(x1, y1, x2, y2, screen.RGB(0x50, 0x50, 0x50), 1, b)
	}
	for i, p := range k.plotsOf(3) {
		col := plotColors[i%len(plotColors)]
		c := screen.RGB(col.r, col.g, col.b)
		for gx := -6.0; gx <= 6; gx += 0.5 {
			for gy := -6.0; gy <= 6; gy += 0.5 {
				if p.Kind == "explicit" {
					z, err := k.plotValue(p, []float64{gx, gy})
					if err != nil || math.IsNaN(z) || math.Abs(z) > 12 {
						continue
					}
					x1, y1 := proj(gx, gy, z)
					for _, d := range [][2]float64{{0.5, 0}, {0, 0.5}} {
						z2, err2 := k.plotValue(p, []float64{gx + d[0], gy + d[1]})
						if err2 == nil && !math.IsNaN(z2) && math.Abs(z2) <= 12 {
							x2, y2 := proj(gx+d[0], gy+d[1], z2)
							cv.Line(x1, y1, x2, y2, c, 1, b)
						}
					}
					continue
				}
				// Implicit: look for sign changes along z.
				prev := math.NaN()
				for gz := -8.0; gz <= 8; gz += 0.5 {
					v, err := k.plotValue(p, []float64{gx, gy, gz})
					if err == nil && !math.IsNaN(prev) && prev*v <= 0 {
						x1, y1 := proj(gx, gy, gz)
						cv.Disc(x1, y1, 1.2, c, false, b)
					}
					prev = v
				}
			}
		}
	}
	k.renderList(cv, u, "list3d", 3, k.sel3d)
	cv.Button(u.layout.byID["remove3d"].Box, "Remove", false)
	cv.Button(u.layout.byID["clear3d"].Box, "Clear all", false)
	k.renderInput(cv, u, "input3d", "add3d")
}
