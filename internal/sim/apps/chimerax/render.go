package chimerax

import (
	"fmt"
	"image"
	"image/color"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Rendering of the simulated ChimeraX.

type atom3 struct {
	x, y, z float64
	chain   int
	elem    byte // C N O S
}

// coords returns simulated coordinates for a model (at most 700 atoms
// drawn), generated as a random walk seeded by the model name.
func (c *chimerax) coords(m *cxModel) []atom3 {
	key := m.Name + "/" + strconv.Itoa(m.Atoms)
	if a, ok := c.cache[key]; ok {
		return a
	}
	n := min(m.Atoms, 700)
	rng := screen.Mix64(screen.Hash("cx-coords", m.Name))
	next := func() float64 {
		rng = screen.Mix64(rng)
		return float64(rng>>11)/(1<<53)*2 - 1
	}
	atoms := make([]atom3, n)
	var x, y, z float64
	dir := [3]float64{1, 0, 0}
	perChain := max(1, n/len(m.Chains))
	for i := range atoms {
		ch := min(i/perChain, len(m.Chains)-1)
		if i > 0 && i%perChain == 0 {
			x, y, z = next()*10, next()*10, next()*10
		}
		dir[0] += next() * 0.9
		dir[1] += next() * 0.9
		dir[2] += next() * 0.9
		l := math.Sqrt(dir[0]*dir[0]+dir[1]*dir[1]+dir[2]*dir[2]) + 1e-9
		for k := range dir {
			dir[k] /= l
		}
		x += dir[0] * 1.5
		y += dir[1] * 1.5
		z += dir[2] * 1.5
		// Keep the walk compact.
		x, y, z = x*0.985, y*0.985, z*0.985
		e := byte("CCCCNOCS"[int((rng>>40)%8)])
		atoms[i] = atom3{x: x, y: y, z: z, chain: ch, elem: e}
	}
	c.cache[key] = atoms
	return atoms
}

var chainColors = []color.RGBA{{0xd2, 0xb4, 0x8c, 0xff}, {0x87, 0xce, 0xeb, 0xff}, {0xe6, 0x9f, 0x00, 0xff}, {0x98, 0xfb, 0x98, 0xff}, {0xff, 0x69, 0xb4, 0xff}, {0xbd, 0xb7, 0x6b, 0xff}}

func (c *chimerax) atomColor(m *cxModel, a atom3, i, n int) color.RGBA {
	switch m.Color {
	case "bychain", "bypolymer":
		return chainColors[a.chain%len(chainColors)]
	case "byelement", "byhetero":
		switch a.elem {
		case 'N':
			return screen.RGB(0x30, 0x50, 0xf8)
		case 'O':
			return screen.RGB(0xff, 0x0d, 0x0d)
		case 'S':
			return screen.RGB(0xff, 0xff, 0x30)
		}
		return screen.RGB(0x90, 0x90, 0x90)
	case "rainbow":
		t := float64(i) / float64(max(1, n-1))
		return hsv(240*(1-t), 0.85, 0.95)
	}
	r, g, b := hexRGB(m.Color)
	return screen.RGB(r, g, b)
}

func hsv(h, s, v float64) color.RGBA {
	h = math.Mod(h, 360) / 60
	i := math.Floor(h)
	f := h - i
	p, q, t := v*(1-s), v*(1-s*f), v*(1-s*(1-f))
	var r, g, b float64
	switch int(i) {
	case 0:
		r, g, b = v, t, p
	case 1:
		r, g, b = q, v, p
	case 2:
		r, g, b = p, v, t
	case 3:
		r, g, b = p, q, v
	case 4:
		r, g, b = t, p, v
	default:
		r, g, b = v, p, q
	}
	return screen.RGB(uint8(r*255), uint8(g*255), uint8(b*255))
}

// Render draws the toolbar, the graphics window, the log, the command line
// and the status line.
func (c *chimerax) Render(cv *screen.Canvas, u *desktop.UI) {
	// Toolbar.
	cv.Fill(image.Rect(0, desktop.AppTop, desktop.ScreenW, 120), screen.RGB(0xde, 0xde, 0xdc))
	for _, e := range u.Elements() {
		if !c.Visible(e.ID) {
			continue
		}
		switch e.Kind {
		case "tab":
			cv.Tab(e.Box, e.Caption, "tab-"+c.tab == e.ID)
		case "button":
			on, has := c.Checked(e.ID)
			cv.Button(e.Box, e.Caption, has && on)
		}
	}
	c.renderGraphics(cv)
	// Log.
	inner := cv.Panel(cxLogBox, "Log", screen.ColField)
	cv.Noise(inner, screen.Hash("cx-log"), screen.GrainPanel)
	cv.Lines(inner, c.log, c.logScroll, screen.ColText)
	// Command line and status.
	if !c.cliDestroyed {
		cv.Text(8, cxCmdBox.Min.Y+7, "Command:", screen.ColText)
		u.DrawField(cv, "cmdline", "")
	}
	cv.Fill(image.Rect(0, 756, desktop.ScreenW, desktop.ScreenH), screen.RGB(0xd4, 0xd4, 0xd2))
	cv.TextClip(8, 768, u.Status(), screen.ColText, image.Rect(0, 756, desktop.ScreenW, desktop.ScreenH))
}

func (c *chimerax) renderGraphics(cv *screen.Canvas) {
	box := cxGraphicsBox
	r, g, b := hexRGB(c.bg)
	cv.Fill(box, screen.RGB(r, g, b))
	// Seed the texture from the visual state so that it changes with it.
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s|%s|%v|%.3f|%.3f|%.3f|%.3f", c.bg, c.lighting, c.sil.Enabled, c.rot[0], c.rot[1], c.rot[2], c.zoom)
	for _, m := range c.models {
		fmt.Fprintf(&sb, "|%s %s %v %v %v %s %d", m.Name, m.Style, m.AtomsShown, m.Cartoon, m.surfaces(), m.Color, m.hbonds())
	}
	cv.Noise(box, screen.Hash("cx-graphics", sb.String()), screen.GrainMain)
	if len(c.models) == 0 {
		return
	}
	sx, sy := math.Sincos(c.rot[0] * math.Pi / 180)
	yx, yy := math.Sincos(c.rot[1] * math.Pi / 180)
	zx, zy := math.Sincos(c.rot[2] * math.Pi / 180)
	type proj struct {
		px, py, z float64
		col       color.RGBA
		m         *cxModel
		i         int
	}
	var ps []proj
	light := map[string]float64{"default": 1, "simple": 0.9, "soft": 0.8, "full": 1.1, "flat": 1.0, "gentle": 0.85}[c.lighting]
	for mi, m := range c.models {
		atoms := c.coords(m)
		off := float64(mi) * 14
		for i, a := range atoms {
			x, y, z := a.x+off, a.y, a.z
			// Rotate about x, then y, then z.
			y, z = y*sy-z*sx, y*sx+z*sy
			x, z = x*yy+z*yx, -x*yx+z*yy
			x, y = x*zy-y*zx, x*zx+y*zy
			scale := 9 * c.zoom
			ps = append(ps, proj{
				px: float64(box.Min.X+box.Dx()/2) + x*scale,
				py: float64(box.Min.Y+box.Dy()/2) + y*scale,
				z:  z, col: c.atomColor(m, a, i, len(atoms)), m: m, i: i,
			})
		}
	}
	sort.SliceStable(ps, func(i, j int) bool { return ps[i].z < ps[j].z })
	shade := c.lighting != "flat"
	for _, p := range ps {
		m := p.m
		if m.surfaces() && p.i%3 == 0 {
			cv.Disc(p.px, p.py, 16*c.zoom, screen.Shade(p.col, 0.8), shade, box)
		}
	}
	// Cartoon: a thick trace through every second atom.
	byModel := map[*cxModel][]proj{}
	for _, p := range ps {
		byModel[p.m] = append(byModel[p.m], p)
	}
	for _, m := range c.models {
		pts := byModel[m]
		sort.Slice(pts, func(i, j int) bool { return pts[i].i < pts[j].i })
		if m.Cartoon {
			for i := 2; i < len(pts); i += 2 {
				a, b := pts[i-2], pts[i]
				col := b.col
				cv.Line(a.px, a.py, b.px, b.py, col, max(2, int(4*c.zoom)), box)
			}
		}
		if m.AtomsShown && m.Style != "sphere" {
			w := 1
			if m.Style == "stick" {
				w = max(1, int(2*c.zoom))
			}
			for i := 1; i < len(pts); i++ {
				a, b := pts[i-1], pts[i]
				cv.Line(a.px, a.py, b.px, b.py, a.col, w, box)
			}
		}
		if m.hbonds() > 0 {
			for k := 0; k < m.hbonds() && len(pts) > 10; k++ {
				a := pts[(k*37)%len(pts)]
				b := pts[(k*37+len(pts)/3)%len(pts)]
				for t := 0.0; t < 1; t += 0.08 {
					cv.Line(a.px+(b.px-a.px)*t, a.py+(b.py-a.py)*t, a.px+(b.px-a.px)*(t+0.04), a.py+(b.py-a.py)*(t+0.04), screen.RGB(0, 200, 255), 1, box)
				}
			}
		}
	}
	for _, p := range ps {
		if !p.m.AtomsShown {
			continue
		}
		rad := map[string]float64{"sphere": 8, "ball": 3.5, "stick": 1.6}[p.m.Style] * c.zoom
		col := screen.Shade(p.col, light)
		cv.Disc(p.px, p.py, rad, col, shade, box)
		if c.sil.Enabled && rad > 2 {
			cv.Set(int(p.px+rad), int(p.py), screen.ColBlack)
		}
	}
	// Model labels.
	y := box.Min.Y + 6
	for _, m := range c.models {
		fr, fg, fb := hexRGB(c.bg)
		tc := screen.ColWhite
		if int(fr)+int(fg)+int(fb) > 380 {
			tc = screen.ColBlack
		}
		cv.Text(box.Min.X+8, y, fmt.Sprintf("#%d %s", m.ID, m.Name), tc)
		y += screen.LineH
	}
}
