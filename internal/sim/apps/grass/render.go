package grass

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"slices"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Rendering of the simulated GRASS GIS.

func elevRamp(t float64) color.RGBA {
	stops := []struct {
		t float64
		c color.RGBA
	}{{0, screen.RGB(0, 191, 191)}, {0.25, screen.RGB(0, 255, 0)}, {0.5, screen.RGB(255, 255, 0)}, {0.75, screen.RGB(255, 127, 0)}, {1, screen.RGB(191, 127, 63)}}
	t = math.Max(0, math.Min(1, t))
	for i := 1; i < len(stops); i++ {
		if t <= stops[i].t {
			a, b := stops[i-1], stops[i]
			f := (t - a.t) / (b.t - a.t)
			return screen.RGB(screen.Lerp8(a.c.R, b.c.R, f), screen.Lerp8(a.c.G, b.c.G, f), screen.Lerp8(a.c.B, b.c.B, f))
		}
	}
	return stops[len(stops)-1].c
}

var landuseColors = []color.RGBA{{200, 200, 200, 255}, {230, 0, 0, 255}, {255, 200, 100, 255}, {120, 200, 60, 255}, {20, 130, 40, 255}, {60, 120, 220, 255}, {160, 90, 200, 255}, {240, 240, 120, 255}}

// mapToScreen converts map coordinates to display pixels.
func (g *grass) mapToScreen(e, n float64) (float64, float64) {
	b := grassMapBox
	per := ppm / g.scale // pixels per map unit
	return float64(b.Min.X+b.Dx()/2) + (e-g.centerE)*per, float64(b.Min.Y+b.Dy()/2) - (n-g.centerN)*per
}

// Render draws the toolbar, the map, the layer manager and the status
// lines.
func (g *grass) Render(cv *screen.Canvas, u *desktop.UI) {
	cv.Fill(image.Rect(0, desktop.AppTop, desktop.ScreenW, 82), screen.RGB(0xde, 0xde, 0xdc))
	for _, e := range u.Elements() {
		switch {
		case e.Kind == "button" && e.ID != "run":
			cv.Button(e.Box, e.Caption, false)
		case e.Kind == "tab":
			cv.Tab(e.Box, e.Caption, e.ID == fmt.Sprintf("tab-%d", g.Open))
		}
	}
	g.renderMap(cv)
	switch g.Open {
	case 0:
		inner := cv.Panel(grassPanelBox, "Layers", screen.ColField)
		cv.Noise(inner, screen.Hash("grass-layers"), screen.GrainPanel)
		for i, lay := range g.layers {
			r := image.Rect(inner.Min.X, inner.Min.Y+i*24, inner.Max.X, inner.Min.Y+i*24+24)
			cv.Checkbox(r.Inset(2), lay.Map, lay.Checked, false)
		}
		if len(g.layers) == 0 {
			cv.Text(inner.Min.X+6, inner.Min.Y+6, "No layers. Use d.rast / d.vect or the Data tab.", screen.ColDim)
		}
	case 1:
		inner := cv.Panel(grassOutputBox, "Command console", screen.ColField)
		cv.Noise(inner, screen.Hash("grass-console"), screen.GrainPanel)
		cv.Lines(inner, g.console, g.outScroll, screen.ColText)
		placeholder := "Type a GRASS command, e.g. g.list raster"
		if g.cmdDisabled {
			placeholder = "The console is disabled"
		}
		u.DrawField(cv, "console", placeholder)
		cv.Button(u.Element("run").Box, "Run", false)
	default:
		inner := cv.Panel(grassPanelBox, "Data catalog (double-click a map to display it)", screen.ColField)
		cv.Noise(inner, screen.Hash("grass-catalog"), screen.GrainPanel)
		y := inner.Min.Y + 1
		for _, row := range g.catalogRows() {
			indent, text := 4, row.Name
			switch row.Type {
			case "raster", "vector":
				indent, text = 28, row.Name+"  ("+row.Type+")"
			case "mapset":
				indent, text = 16, row.Name+"  (current)"
			}
			cv.TextClip(inner.Min.X+indent, y, text, screen.ColText, inner)
			y += screen.LineH
		}
	}
	// Status bar with the cursor's map coordinates.
	cv.Fill(image.Rect(0, 724, 764, 752), screen.RGB(0xd4, 0xd4, 0xd2))
	coords := "Coordinates: outside the map"
	if cur := u.Cursor(); cur.In(grassMapBox) {
		per := ppm / g.scale
		e := g.centerE + float64(cur.X-(grassMapBox.Min.X+grassMapBox.Dx()/2))/per
		n := g.centerN - float64(cur.Y-(grassMapBox.Min.Y+grassMapBox.Dy()/2))/per
		coords = fmt.Sprintf("E: %.1f  N: %.1f", e, n)
	}
	cv.Text(12, 731, coords, screen.ColText)
	cv.Fill(image.Rect(0, 756, desktop.ScreenW, desktop.ScreenH), screen.RGB(0xd4, 0xd4, 0xd2))
	cv.TextClip(8, 770, u.Status(), screen.ColText, image.Rect(0, 756, desktop.ScreenW, desktop.ScreenH))
}

//go:norace
func (g *grass) renderMap(cv *screen.Canvas) {
	b := grassMapBox
	cv.Fill(b, screen.ColWhite)
	cv.Frame(b, screen.ColBorder)
	var names []string
	for _, l := range g.layers {
		names = append(names, l.Kind+"/"+l.Map+"/"+strings.Join(l.Cmd, " "))
	}
	seed := screen.Hash("grass-map", g.loc.Name, strings.Join(names, ","), gnum(g.scale), gnum(g.centerE), gnum(g.centerN))
	l := g.loc
	pix := cv.Img.Pix
	for _, name := range g.displayed("raster") {
		r := g.rasters()[name]
		if r == nil {
			continue
		}
		_, mn, mx, _, _, _ := rasterStats(r.Data)
		span := mx - mn
		if span == 0 {
			span = 1
		}
		// Colour every cell once, then map pixels to cells.
		categorical := r.Type == "CELL" && mx-mn <= 8
		cellCol := make([]color.RGBA, len(r.Data))
		cellOK := make([]bool, len(r.Data))
		for i, v := range r.Data {
			if math.IsNaN(v) {
				continue
			}
			cellOK[i] = true
			if categorical {
				cellCol[i] = landuseColors[int(v)%len(landuseColors)]
			} else {
				cellCol[i] = elevRamp((v - mn) / span)
			}
		}
		per := ppm / g.scale
		colOf := make([]int, b.Dx())
		for x := range colOf {
			e := g.centerE + (float64(b.Min.X+x)-float64(b.Min.X+b.Dx()/2))/per
			colOf[x] = int(math.Floor((e - l.W) / l.ewres()))
		}
		for y := b.Min.Y + 1; y < b.Max.Y-1; y++ {
			n := g.centerN - (float64(y)-float64(b.Min.Y+b.Dy()/2))/per
			row := int(math.Floor((l.N - n) / l.nsres()))
			if row < 0 || row >= l.Rows {
				continue
			}
			off := y*cv.Img.Stride + 4*(b.Min.X+1)
			for x := b.Min.X + 1; x < b.Max.X-1; x, off = x+1, off+4 {
				col := colOf[x-b.Min.X]
				if col < 0 || col >= l.Cols {
					continue
				}
				i := row*l.Cols + col
				if !cellOK[i] {
					continue
				}
				c := cellCol[i]
				pix[off], pix[off+1], pix[off+2] = c.R, c.G, c.B
			}
		}
	}
	cv.Noise(b.Inset(1), seed, screen.GrainMain)
	for _, name := range g.displayed("vector") {
		v := g.vectors()[name]
		if v == nil {
			continue
		}
		g.drawVector(cv, v)
	}
	// Region outline.
	x0, y0 := g.mapToScreen(g.region.W, g.region.N)
	x1, y1 := g.mapToScreen(g.region.E, g.region.S)
	rr := image.Rect(int(x0), int(y0), int(x1), int(y1)).Intersect(b)
	if !rr.Empty() {
		cv.Frame(rr, screen.RGB(255, 0, 0))
	}
}

// displayed returns the names of the displayed maps of a kind ("raster",
// "vector"), bottom layer first.
func (g *grass) displayed(kind string) []string {
	var out []string
	for _, l := range slices.Backward(g.layers) {
		if l.Kind == kind && l.Checked {
			out = append(out, mapName(l.Map))
		}
	}
	return out
}

func (g *grass) drawVector(cv *screen.Canvas, v *grassVector) {
	b := grassMapBox
	rng := screen.Hash("grass-vec", v.geomSeed)
	rnd := func() float64 {
		rng = screen.Mix64(rng)
		return float64(rng>>11) / (1 << 53)
	}
	c := screen.RGB(120, 60, 160)
	switch v.Type {
	case "point":
		c = screen.RGB(200, 30, 30)
	case "line":
		c = screen.RGB(90, 90, 90)
	}
	l := g.loc
	bufPx := 0.0
	if v.Buffer > 0 {
		bufPx = v.Buffer * ppm / g.scale
	}
	step := (l.E - l.W) / 60
	for i := 0; i < v.Features; i++ {
		e, n := l.point(v, i)
		x, y := g.mapToScreen(e, n)
		if v.Type == "point" {
			if bufPx > 0 {
				cv.Disc(x, y, math.Max(1, bufPx), screen.RGB(255, 200, 200), false, b)
			}
			cv.Disc(x, y, 3, c, false, b)
			continue
		}
		px, py := x, y
		ang := rnd() * 2 * math.Pi
		for s := 0; s < 6; s++ {
			ang += (rnd() - 0.5) * 0.8
			e += math.Cos(ang) * step
			n += math.Sin(ang) * step
			nx, ny := g.mapToScreen(e, n)
			if (image.Point{int(nx), int(ny)}).In(b) && (image.Point{int(px), int(py)}).In(b) {
				if bufPx > 0 {
					cv.Line(px, py, nx, ny, screen.RGB(255, 215, 170), min(40, max(2, int(2*bufPx))), b)
				}
				cv.Line(px, py, nx, ny, c, 2, b)
			}
			px, py = nx, ny
		}
	}
}
