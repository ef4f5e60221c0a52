package kalgebra

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/expr"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Rendering of the simulated KAlgebra.

// rgba is the plot's color.
func (p *kplot) rgba() color.RGBA {
	var r, g, b uint8
	if _, err := fmt.Sscanf(p.Color, "#%02x%02x%02x", &r, &g, &b); err != nil {
		return plotColors[0]
	}
	return color.RGBA{r, g, b, 0xff}
}

var plotColors = []color.RGBA{{0x1e, 0x64, 0xc8, 0xff}, {0xd0, 0x30, 0x30, 0xff}, {0x20, 0x9a, 0x40, 0xff}, {0x9c, 0x27, 0xb0, 0xff}, {0xe0, 0x80, 0x10, 0xff}, {0x00, 0x96, 0x96, 0xff}}

// Render draws the tabs, the open tab and the status line.
func (k *kalgebra) Render(cv *screen.Canvas, u *desktop.UI) {
	for i, t := range kalTabs {
		cv.Tab(u.Element(fmt.Sprintf("tab-%d", i)).Box, t, k.Open == i)
	}
	cv.Fill(image.Rect(0, 76, desktop.ScreenW, 77), screen.ColBorder)
	switch k.Open {
	case 0:
		k.renderCalculator(cv, u)
	case 1:
		k.renderPlot2D(cv, u)
	case 2:
		k.renderPlot3D(cv, u)
	default:
		inner := cv.Panel(u.Element("dictionary").Box, "Dictionary", screen.ColField)
		cv.Noise(inner, screen.Hash("kal-dict"), screen.GrainPanel)
		var ls []string
		for _, f := range []string{"abs", "sin", "cos", "tan", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh", "exp", "ln", "log", "sqrt", "root", "power", "floor", "ceiling", "factorial", "max", "min", "sum", "product"} {
			ls = append(ls, f+"    built-in function")
		}
		cv.Lines(inner, ls, 0, screen.ColText)
	}
	cv.Fill(image.Rect(0, 758, desktop.ScreenW, desktop.ScreenH), screen.RGB(0xd4, 0xd4, 0xd2))
	cv.TextClip(8, 772, u.Status(), screen.ColText, image.Rect(0, 758, desktop.ScreenW, desktop.ScreenH))
}

func (k *kalgebra) renderInput(cv *screen.Canvas, u *desktop.UI, field, button string) {
	ph := map[string]string{"input": "Expression to calculate, e.g. p := 3*4", "input2d": "Function to plot, e.g. x->sin(x)", "input3d": "Surface to plot, e.g. x*y"}[field]
	u.DrawField(cv, field, ph)
	b := u.Element(button)
	cv.Button(b.Box, b.Caption, false)
}

func (k *kalgebra) renderCalculator(cv *screen.Canvas, u *desktop.UI) {
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
	vinner := cv.Panel(u.Element("variables").Box, "Variables", screen.ColField)
	cv.Noise(vinner, screen.Hash("kal-vars"), screen.GrainPanel)
	var vs []string
	for _, name := range k.env.Names() {
		v, _ := k.env.Lookup(name, nil)
		vs = append(vs, fmt.Sprintf("%-8s %s", name, v))
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

func (k *kalgebra) renderPlot2D(cv *screen.Canvas, u *desktop.UI) {
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
	for _, p := range k.plotsOf(2) {
		c := p.rgba()
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
	cv.Button(u.Element("remove2d").Box, "Remove", false)
	cv.Button(u.Element("clear2d").Box, "Clear all", false)
	k.renderInput(cv, u, "input2d", "add2d")
}

func (k *kalgebra) renderList(cv *screen.Canvas, u *desktop.UI, id string, dim, sel int) {
	inner := cv.Panel(u.Element(id).Box, "Functions", screen.ColField)
	cv.Noise(inner, screen.Hash("kal-list", id), screen.GrainPanel)
	for i, p := range k.plotsOf(dim) {
		r := image.Rect(inner.Min.X, inner.Min.Y+i*22, inner.Max.X, inner.Min.Y+i*22+22)
		if i == sel {
			cv.Fill(r, screen.ColSelect)
		}
		cv.Fill(image.Rect(r.Min.X+4, r.Min.Y+6, r.Min.X+14, r.Min.Y+16), p.rgba())
		cv.TextClip(r.Min.X+20, r.Min.Y+4, p.Expr, screen.ColText, r)
	}
}

func (k *kalgebra) renderPlot3D(cv *screen.Canvas, u *desktop.UI) {
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
	for _, p := range k.plotsOf(3) {
		c := p.rgba()
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
	cv.Button(u.Element("remove3d").Box, "Remove", false)
	cv.Button(u.Element("clear3d").Box, "Clear all", false)
	k.renderInput(cv, u, "input3d", "add3d")
}
