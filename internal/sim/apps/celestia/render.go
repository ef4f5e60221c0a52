package celestia

import (
	"fmt"
	"image"
	"maps"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/expr"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Rendering of the simulated Celestia.

// Render draws the 3D view, the dock and the status line.
func (c *celestia) Render(cv *screen.Canvas, u *desktop.UI) {
	c.renderView(cv)
	// Dock.
	cv.Fill(image.Rect(904, desktop.AppTop, desktop.ScreenW, 772), screen.ColWindow)
	names := slices.Sorted(maps.Keys(celSections))
	for _, n := range names {
		cv.Text(celDockX, celSections[n], n, screen.ColDim)
	}
	for _, e := range u.Elements() {
		switch e.Kind {
		case "field":
			ph := map[string]string{"goto": "object name, e.g. Mars", "jd": "Julian date"}[e.ID]
			u.DrawField(cv, e.ID, ph)
		case "button":
			cv.Button(e.Box, e.Caption, e.ID == "pause" && c.paused)
		case "checkbox", "radio":
			on, _ := c.Checked(e.ID)
			cv.Checkbox(e.Box, e.Caption, on, e.Kind == "radio")
		}
	}
	// Status bar.
	cv.Fill(image.Rect(0, 772, desktop.ScreenW, desktop.ScreenH), screen.RGB(0xd4, 0xd4, 0xd2))
	rate := expr.FormatNum(c.scale) + "x"
	if c.paused {
		rate += " (Paused)"
	}
	cv.Text(8, 780, fmt.Sprintf("%s   JD %s   Time rate: %s", calendarDate(c.jd), formatJD(c.jd), rate), screen.ColText)
	cv.TextClip(760, 780, u.Status(), screen.ColText, image.Rect(760, 772, desktop.ScreenW, desktop.ScreenH))
}

//go:norace
func (c *celestia) renderView(cv *screen.Canvas) {
	box := celViewBox
	cv.Fill(box, screen.RGB(2, 3, 8))
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s|%.3f|%v|%v|%v|%d|%d|%.2f,%.2f,%.2f", c.target, c.jd, c.rflags, c.label, c.orbit, c.star, c.res, c.offset[0], c.offset[1], c.offset[2])
	seed := screen.Hash("cel-view", sb.String())
	cv.Noise(box, seed, screen.GrainSky)
	// Stars: fixed sky (independent of the state) so that it looks stable.
	rng := screen.Hash("cel-stars")
	nStars := 2600
	for i := 0; i < nStars; i++ {
		rng = screen.Mix64(rng)
		x := box.Min.X + int(rng%uint64(box.Dx()))
		y := box.Min.Y + int((rng>>20)%uint64(box.Dy()))
		mag := float64((rng>>40)%1000) / 1000
		bright := uint8(60 + 195*mag*mag)
		col := screen.RGB(bright, bright, uint8(math.Min(255, float64(bright)*1.1)))
		switch c.star {
		case StarPoints:
			cv.Set(x, y, col)
		case StarFuzzy:
			cv.Set(x, y, col)
			if mag > 0.7 {
				cv.Blend(x+1, y, col, 0.5)
				cv.Blend(x, y+1, col, 0.5)
				cv.Blend(x-1, y, col, 0.5)
				cv.Blend(x, y-1, col, 0.5)
			}
		default:
			cv.Disc(float64(x), float64(y), 0.6+1.8*mag*mag, col, false, box)
		}
	}
	cx, cy := float64(box.Min.X+box.Dx()/2), float64(box.Min.Y+box.Dy()/2)
	if c.rflags["galaxies"] {
		for i := 0; i < 3; i++ {
			gx := cx - 300 + float64(i)*260
			gy := cy + 250 - float64(i)*190
			for k := 0; k < 400; k++ {
				rng = screen.Mix64(rng)
				a := float64(rng%6283) / 1000
				r := float64((rng>>16)%1000) / 1000 * 40
				cv.Blend(int(gx+math.Cos(a)*r*1.8), int(gy+math.Sin(a)*r*0.6), screen.RGB(200, 190, 255), 0.35)
			}
		}
	}
	grid := func(on bool, col [3]uint8, tilt float64) {
		if !on {
			return
		}
		for k := -4; k <= 4; k++ {
			y0 := cy + float64(k)*80
			cv.Line(float64(box.Min.X), y0+tilt*(-450), float64(box.Max.X), y0+tilt*450, screen.RGB(col[0], col[1], col[2]), 1, box)
		}
		for k := -5; k <= 5; k++ {
			x0 := cx + float64(k)*85
			cv.Line(x0, float64(box.Min.Y), x0+tilt*300, float64(box.Max.Y), screen.RGB(col[0], col[1], col[2]), 1, box)
		}
	}
	grid(c.rflags["celestialSphere"], [3]uint8{40, 70, 120}, 0)
	grid(c.rflags["eclipticGrid"], [3]uint8{100, 80, 30}, 0.12)
	grid(c.rflags["horizonGrid"], [3]uint8{40, 110, 60}, -0.2)
	if c.rflags["ecliptic"] {
		cv.Line(float64(box.Min.X), cy+60, float64(box.Max.X), cy-40, screen.RGB(150, 120, 20), 2, box)
	}
	if c.rflags["diagrams"] || c.rflags["boundaries"] {
		crng := screen.Hash("cel-constellations")
		for k := 0; k < 14; k++ {
			crng = screen.Mix64(crng)
			x0 := float64(box.Min.X + int(crng%uint64(box.Dx())))
			y0 := float64(box.Min.Y + int((crng>>20)%uint64(box.Dy())))
			if c.rflags["diagrams"] {
				px, py := x0, y0
				for s := 0; s < 4; s++ {
					crng = screen.Mix64(crng)
					nx := px + float64(int(crng%120)-60)
					ny := py + float64(int((crng>>10)%120)-60)
					cv.Line(px, py, nx, ny, screen.RGB(60, 80, 160), 1, box)
					px, py = nx, ny
				}
			}
			if c.rflags["boundaries"] {
				cv.Frame(image.Rect(int(x0)-70, int(y0)-50, int(x0)+70, int(y0)+50), screen.RGB(120, 40, 60))
			}
			if c.label["constellation"] {
				cv.Text(int(x0), int(y0), []string{"Orion", "Lyra", "Cygnus", "Leo", "Aquila", "Draco", "Lupus"}[k%7], screen.RGB(90, 110, 200))
			}
		}
	}
	// Bodies projected through a camera at the observer looking at the target.
	t, _ := celestiaBody(c.target)
	obs := c.observer()
	tpos := t.position(c.jd)
	fwd := tpos.sub(obs).unit()
	up := vec3{0, 0, 1}
	if math.Abs(fwd.dot(up)) > 0.99 {
		up = vec3{0, 1, 0}
	}
	right := fwd.cross(up).unit()
	up = right.cross(fwd)
	focal := float64(box.Dx()) / 2 / math.Tan(22.5*math.Pi/180)
	type drawn struct {
		b      *celBody
		x, y   float64
		r, dep float64
	}
	var ds []drawn
	for i := range celCatalogue {
		b := &celCatalogue[i]
		v := b.position(c.jd).sub(obs)
		z := v.dot(fwd)
		if z <= 0 {
			continue
		}
		x := cx + focal*v.dot(right)/z
		y := cy - focal*v.dot(up)/z
		r := focal * b.Radius / z
		if x < -2000 || x > 4000 || y < -2000 || y > 4000 {
			continue
		}
		ds = append(ds, drawn{b: b, x: x, y: y, r: r, dep: z})
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i].dep > ds[j].dep })
	// Orbits of the target's satellites and of the planets near it.
	if c.rflags["orbits"] {
		for i := range celCatalogue {
			b := &celCatalogue[i]
			if b.Parent == "" {
				continue
			}
			kind := map[string]string{"planet": "planet", "moon": "moon", "dwarf planet": "dwarfPlanet"}[b.Type]
			if !c.orbit[kind] || b.Parent != t.Name && b.Parent != t.Parent {
				continue
			}
			p, _ := celestiaBody(b.Parent)
			center := p.position(c.jd)
			var px, py float64
			okPrev := false
			for k := 0; k <= 96; k++ {
				a := float64(k) / 96 * 2 * math.Pi
				v := center.add(vec3{math.Cos(a), math.Sin(a), 0}.mul(b.Orbit)).sub(obs)
				z := v.dot(fwd)
				if z <= 0 {
					okPrev = false
					continue
				}
				x := cx + focal*v.dot(right)/z
				y := cy - focal*v.dot(up)/z
				if okPrev && math.Abs(x-px) < 2000 && math.Abs(y-py) < 2000 {
					cv.Line(px, py, x, y, screen.RGB(60, 90, 170), 1, box)
				}
				px, py, okPrev = x, y, true
			}
		}
	}
	for _, d := range ds {
		col := d.b.Color
		r := math.Max(d.r, 1.2)
		if r > 1.5 && r < 2000 {
			cv.Disc(d.x, d.y, r, col, true, box)
			if r > 6 {
				// Surface texture: finer with higher resolution.
				amp := []int{2, 3, 4}[c.res]
				rr := image.Rect(int(d.x-r), int(d.y-r), int(d.x+r), int(d.y+r)).Intersect(box)
				c.texture(cv, rr, d.x, d.y, r, screen.Hash("cel-tex", d.b.Name), amp)
			}
		} else {
			cv.Disc(d.x, d.y, 1.5, col, false, box)
		}
		show := map[string]bool{"planet": c.label["planet"], "dwarf planet": c.label["planet"], "moon": c.label["moon"], "star": c.label["star"]}[d.b.Type]
		if show || d.b.Name == c.selected {
			cv.TextClip(int(d.x+r+4), int(d.y-6), d.b.Name, screen.RGB(140, 200, 255), box)
		}
	}
	// HUD: selection information, as Celestia shows it.
	sel, _ := celestiaBody(c.selected)
	hud := []string{sel.Name, fmt.Sprintf("Distance: %s km", formatKm(c.distance(sel))), fmt.Sprintf("Radius: %.0f km", sel.Radius)}
	if sel.Rotation > 0 {
		hud = append(hud, fmt.Sprintf("Sidereal rotation period: %.2f hours", sel.Rotation))
	}
	if sel.Period > 0 {
		hud = append(hud, fmt.Sprintf("Orbital period: %.2f days", sel.Period))
	}
	if sel.Temp > 0 {
		hud = append(hud, fmt.Sprintf("Surface temperature: %.0f K", sel.Temp))
	}
	if sel.Type == "star" && sel.Name != "Sol" {
		hud = append(hud, fmt.Sprintf("Distance from Sol: %.2f ly", sel.Orbit/lightYearKm))
	}
	for i, l := range hud {
		cv.Text(box.Min.X+10, box.Min.Y+8+i*screen.LineH, l, screen.RGB(220, 220, 220))
	}
	cv.Text(box.Max.X-screen.TextW(calendarDate(c.jd))-10, box.Min.Y+8, calendarDate(c.jd), screen.RGB(220, 220, 220))
}

func formatKm(d float64) string {
	if d >= 1e9 {
		return strconv.FormatFloat(d, 'e', 3, 64)
	}
	return strconv.FormatFloat(math.Round(d), 'f', 0, 64)
}

// texture modulates the pixels of a drawn disc with bands and noise.
//
//go:norace
func (c *celestia) texture(cv *screen.Canvas, r image.Rectangle, cx, cy, rad float64, seed uint64, amp int) {
	s := screen.Mix64(seed ^ cv.Seed)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			dx, dy := float64(x)-cx, float64(y)-cy
			if dx*dx+dy*dy > rad*rad {
				continue
			}
			s = screen.Mix64(s + uint64(x*7919+y))
			band := math.Sin(dy/rad*9+float64(seed%7)) * float64(amp) / 2
			n := int(s%uint64(amp)) - amp/2 + int(band)
			i := y*cv.Img.Stride + 4*x
			cv.Img.Pix[i] = screen.ClampU8(int(cv.Img.Pix[i]) + n)
			cv.Img.Pix[i+1] = screen.ClampU8(int(cv.Img.Pix[i+1]) + n)
			cv.Img.Pix[i+2] = screen.ClampU8(int(cv.Img.Pix[i+2]) + n)
		}
	}
}
