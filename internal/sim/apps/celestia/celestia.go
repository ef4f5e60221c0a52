// Package celestia is part of codapipe's SIMULATOR (see package sim): the
// simulated Celestia, a space simulator with a 3D view and a control dock
// (go to object, Julian date, time controls, render/label/orbit options,
// star style, texture resolution), and the HTTP server of ScienceBoard's
// Celestia build (see server.go). Bodies move on circular orbits; the data
// are rounded textbook values and fixed.
package celestia

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

// Name is the app's name, as task files spell their "type".
const Name = "Celestia"

// Spec describes the simulated Celestia, for a machine's catalogue. It
// starts with the current date in the Julian date field.
func Spec() desktop.AppSpec {
	start := func(u *desktop.UI, _ []string) desktop.App {
		c := newCelestia()
		u.SetField("jd", formatJD(c.jd))
		return c
	}
	return desktop.AppSpec{Name: Name, Programs: []string{"celestia*"}, Elements: layout(), Start: start,
		Files:      map[string]string{"/app/bin/celestia-qt6": "#!/bin/sh\n# simulated\n"},
		ServeState: ServeState}
}

// celBody is one catalogue object.
type celBody struct {
	Name     string
	Type     string // star, planet, moon, dwarf planet, galaxy
	Parent   string
	Radius   float64 // km
	Orbit    float64 // km from the parent (stars/galaxies: distance from Sol)
	Period   float64 // orbital period, days
	Rotation float64 // sidereal rotation period, hours
	Phase    float64 // orbital angle at J2000, degrees
	Temp     float64 // surface temperature, K (stars)
	Color    color.RGBA
}

const (
	lightYearKm = 9.4607e12
	jd2000      = 2451545.0
)

var celCatalogue = []celBody{
	{Name: "Sol", Type: "star", Radius: 695700, Rotation: 609.12, Temp: 5772, Color: screen.RGB(255, 230, 160)},
	{Name: "Mercury", Type: "planet", Parent: "Sol", Radius: 2439.7, Orbit: 57.91e6, Period: 87.969, Rotation: 1407.6, Phase: 252.3, Color: screen.RGB(160, 150, 140)},
	{Name: "Venus", Type: "planet", Parent: "Sol", Radius: 6051.8, Orbit: 108.21e6, Period: 224.701, Rotation: 5832.5, Phase: 181.98, Color: screen.RGB(230, 200, 140)},
	{Name: "Earth", Type: "planet", Parent: "Sol", Radius: 6371.0, Orbit: 149.598e6, Period: 365.256, Rotation: 23.93, Phase: 100.46, Color: screen.RGB(70, 110, 200)},
	{Name: "Moon", Type: "moon", Parent: "Earth", Radius: 1737.4, Orbit: 384400, Period: 27.3217, Rotation: 655.72, Phase: 218.3, Color: screen.RGB(180, 180, 180)},
	{Name: "Mars", Type: "planet", Parent: "Sol", Radius: 3389.5, Orbit: 227.94e6, Period: 686.98, Rotation: 24.62, Phase: 355.45, Color: screen.RGB(200, 100, 60)},
	{Name: "Phobos", Type: "moon", Parent: "Mars", Radius: 11.27, Orbit: 9376, Period: 0.31891, Rotation: 7.65, Phase: 35, Color: screen.RGB(130, 120, 110)},
	{Name: "Deimos", Type: "moon", Parent: "Mars", Radius: 6.2, Orbit: 23463, Period: 1.263, Rotation: 30.31, Phase: 120, Color: screen.RGB(150, 140, 120)},
	{Name: "Jupiter", Type: "planet", Parent: "Sol", Radius: 69911, Orbit: 778.57e6, Period: 4332.59, Rotation: 9.93, Phase: 34.4, Color: screen.RGB(210, 180, 140)},
	{Name: "Io", Type: "moon", Parent: "Jupiter", Radius: 1821.6, Orbit: 421700, Period: 1.769, Rotation: 42.46, Phase: 10, Color: screen.RGB(230, 210, 90)},
	{Name: "Europa", Type: "moon", Parent: "Jupiter", Radius: 1560.8, Orbit: 671034, Period: 3.551, Rotation: 85.23, Phase: 80, Color: screen.RGB(210, 190, 160)},
	{Name: "Ganymede", Type: "moon", Parent: "Jupiter", Radius: 2634.1, Orbit: 1070412, Period: 7.155, Rotation: 171.71, Phase: 150, Color: screen.RGB(160, 150, 140)},
	{Name: "Callisto", Type: "moon", Parent: "Jupiter", Radius: 2410.3, Orbit: 1882709, Period: 16.689, Rotation: 400.54, Phase: 260, Color: screen.RGB(110, 100, 90)},
	{Name: "Saturn", Type: "planet", Parent: "Sol", Radius: 58232, Orbit: 1433.53e6, Period: 10759.22, Rotation: 10.66, Phase: 50.08, Color: screen.RGB(220, 200, 150)},
	{Name: "Enceladus", Type: "moon", Parent: "Saturn", Radius: 252.1, Orbit: 237948, Period: 1.370, Rotation: 32.9, Phase: 70, Color: screen.RGB(240, 240, 240)},
	{Name: "Titan", Type: "moon", Parent: "Saturn", Radius: 2574.7, Orbit: 1221870, Period: 15.945, Rotation: 382.69, Phase: 200, Color: screen.RGB(220, 170, 80)},
	{Name: "Uranus", Type: "planet", Parent: "Sol", Radius: 25362, Orbit: 2872.46e6, Period: 30688.5, Rotation: 17.24, Phase: 314.06, Color: screen.RGB(160, 220, 230)},
	{Name: "Neptune", Type: "planet", Parent: "Sol", Radius: 24622, Orbit: 4495.06e6, Period: 60182, Rotation: 16.11, Phase: 304.35, Color: screen.RGB(70, 100, 220)},
	{Name: "Triton", Type: "moon", Parent: "Neptune", Radius: 1353.4, Orbit: 354759, Period: 5.877, Rotation: 141.05, Phase: 15, Color: screen.RGB(200, 190, 190)},
	{Name: "Pluto", Type: "dwarf planet", Parent: "Sol", Radius: 1188.3, Orbit: 5906.38e6, Period: 90560, Rotation: 153.29, Phase: 238.9, Color: screen.RGB(210, 180, 150)},
	{Name: "Charon", Type: "moon", Parent: "Pluto", Radius: 606, Orbit: 19591, Period: 6.387, Rotation: 153.29, Phase: 0, Color: screen.RGB(150, 150, 150)},
	{Name: "Ceres", Type: "dwarf planet", Parent: "Sol", Radius: 469.7, Orbit: 413.7e6, Period: 1680, Rotation: 9.07, Phase: 95, Color: screen.RGB(140, 140, 130)},
	{Name: "Eris", Type: "dwarf planet", Parent: "Sol", Radius: 1163, Orbit: 10125e6, Period: 203830, Rotation: 378.9, Phase: 205, Color: screen.RGB(220, 220, 220)},
	{Name: "Iapetus", Type: "moon", Parent: "Saturn", Radius: 734.5, Orbit: 3560820, Period: 79.32, Rotation: 1903.7, Phase: 120, Color: screen.RGB(170, 150, 120)},
	{Name: "Orcus", Type: "dwarf planet", Parent: "Sol", Radius: 455, Orbit: 5865e6, Period: 90465, Rotation: 13.19, Phase: 60, Color: screen.RGB(190, 190, 200)},
	{Name: "Dysnomia", Type: "moon", Parent: "Eris", Radius: 350, Orbit: 37273, Period: 15.786, Rotation: 378.9, Phase: 30, Color: screen.RGB(150, 150, 150)},
	{Name: "Sirius", Type: "star", Radius: 1190000, Orbit: 8.60 * lightYearKm, Rotation: 130, Temp: 9940, Color: screen.RGB(200, 220, 255)},
	{Name: "Proxima Centauri", Type: "star", Radius: 107000, Orbit: 4.24 * lightYearKm, Rotation: 2136, Temp: 3042, Color: screen.RGB(255, 150, 110)},
	{Name: "Vega", Type: "star", Radius: 1640000, Orbit: 25.04 * lightYearKm, Rotation: 16.5, Temp: 9602, Color: screen.RGB(210, 225, 255)},
	{Name: "Betelgeuse", Type: "star", Radius: 617.1e6, Orbit: 548 * lightYearKm, Rotation: 316000, Temp: 3600, Color: screen.RGB(255, 140, 90)},
	{Name: "Andromeda Galaxy", Type: "galaxy", Radius: 1.04e18, Orbit: 2.54e6 * lightYearKm, Color: screen.RGB(220, 210, 255)},
}

var celByName = func() map[string]*celBody {
	m := map[string]*celBody{}
	for i := range celCatalogue {
		b := &celCatalogue[i]
		m[strings.ToLower(b.Name)] = b
	}
	m["sun"] = m["sol"]
	m["luna"] = m["moon"]
	m["m31"] = m["andromeda galaxy"]
	m["andromeda"] = m["andromeda galaxy"]
	return m
}()

// celestiaBody returns a catalogue object by name (case-insensitive,
// a few aliases such as Sun and M31).
func celestiaBody(name string) (*celBody, bool) {
	b, ok := celByName[strings.ToLower(strings.TrimSpace(name))]
	return b, ok
}

type vec3 [3]float64

func (a vec3) add(b vec3) vec3    { return vec3{a[0] + b[0], a[1] + b[1], a[2] + b[2]} }
func (a vec3) sub(b vec3) vec3    { return vec3{a[0] - b[0], a[1] - b[1], a[2] - b[2]} }
func (a vec3) mul(f float64) vec3 { return vec3{a[0] * f, a[1] * f, a[2] * f} }
func (a vec3) dot(b vec3) float64 { return a[0]*b[0] + a[1]*b[1] + a[2]*b[2] }
func (a vec3) norm() float64      { return math.Sqrt(a.dot(a)) }
func (a vec3) unit() vec3         { return a.mul(1 / (a.norm() + 1e-300)) }
func (a vec3) cross(b vec3) vec3 {
	return vec3{a[1]*b[2] - a[2]*b[1], a[2]*b[0] - a[0]*b[2], a[0]*b[1] - a[1]*b[0]}
}
func roundVec(a vec3, q float64) vec3 {
	return vec3{math.Round(a[0]/q) * q, math.Round(a[1]/q) * q, math.Round(a[2]/q) * q}
}

// position returns a body's position (km, heliocentric) at Julian date jd.
func (b *celBody) position(jd float64) vec3 {
	switch b.Type {
	case "star", "galaxy":
		if b.Name == "Sol" {
			return vec3{}
		}
		h := screen.Hash("cel-dir", b.Name)
		lon := float64(h%3600) / 10 * math.Pi / 180
		lat := (float64((h>>16)%1800)/10 - 90) * math.Pi / 180
		return vec3{math.Cos(lat) * math.Cos(lon), math.Cos(lat) * math.Sin(lon), math.Sin(lat)}.mul(b.Orbit)
	}
	parent := vec3{}
	if p, ok := celestiaBody(b.Parent); ok {
		parent = p.position(jd)
	}
	ang := (b.Phase + 360*(jd-jd2000)/b.Period) * math.Pi / 180
	tilt := 0.0
	if b.Type == "dwarf planet" {
		tilt = 0.3
	}
	return parent.add(vec3{math.Cos(ang), math.Sin(ang) * math.Cos(tilt), math.Sin(ang) * math.Sin(tilt)}.mul(b.Orbit))
}

type celestia struct {
	jd       float64
	scale    float64
	paused   bool
	target   string // the body the observer is attached to
	selected string
	offset   vec3 // observer position relative to the target
	rflags   map[string]bool
	label    map[string]bool
	orbit    map[string]bool
	star     int // StarFuzzy, StarPoints, StarDiscs (Celestia's StarStyle)
	res      int // 0 low, 1 medium, 2 high
	autoMag  float64
}

func newCelestia() *celestia {
	c := &celestia{
		jd: 2460000.5, scale: 1, target: "Earth", selected: "Earth", offset: vec3{0, 0, 5 * 6371.0},
		rflags: defaults(renderFlags, "stars", "planets", "galaxies", "cloudMaps", "nightMaps", "atmospheres", "smoothLines",
			"eclipseShadows", "ringShadows", "autoMag", "cometTails", "nebulae", "openClusters", "globulars", "cloudShadows",
			"dwarfPlanets", "moons", "minorMoons", "asteroids", "comets", "spacecrafts", "fadingOrbits", "planetRings"),
		label: defaults(labelFlags),
		orbit: defaults(orbitFlags, "planet", "moon", "stellar"),
		star:  StarFuzzy, res: 1, autoMag: 6.5,
	}
	return c
}

func (c *celestia) observer() vec3 {
	t, _ := celestiaBody(c.target)
	return t.position(c.jd).add(c.offset)
}

// distance returns the distance from the observer to the body's surface.
func (c *celestia) distance(b *celBody) float64 {
	return math.Max(0, c.observer().sub(b.position(c.jd)).norm()-b.Radius)
}

func (c *celestia) visibleBody(b *celBody) bool {
	t, _ := celestiaBody(c.target)
	switch {
	case b.Name == t.Name, b.Name == t.Parent, b.Parent == t.Name:
		return true
	case b.Name == "Sol":
		return t.Type != "star" && t.Type != "galaxy"
	}
	return false
}

func (c *celestia) gotoBody(u *desktop.UI, name string) bool {
	b, ok := celestiaBody(name)
	if !ok {
		u.SetStatus("Object not found: " + strings.TrimSpace(name))
		return false
	}
	c.target, c.selected = b.Name, b.Name
	c.offset = vec3{0, -0.6, 0.8}.unit().mul(5 * b.Radius)
	u.SetStatus("Travelling to " + b.Name)
	return true
}

func formatJD(jd float64) string { return strconv.FormatFloat(jd, 'f', -1, 64) }

// Layout.

type celCheck struct {
	id, caption, group, key string
}

var celChecks = []celCheck{
	{"cb-orbits", "Orbits", "render", "orbits"},
	{"cb-diagrams", "Constellation Lines", "render", "diagrams"},
	{"cb-boundaries", "Constellation Boundaries", "render", "boundaries"},
	{"cb-eqgrid", "Equatorial Grid", "render", "celestialSphere"},
	{"cb-eclgrid", "Ecliptic Grid", "render", "eclipticGrid"},
	{"cb-horgrid", "Horizon Grid", "render", "horizonGrid"},
	{"cb-ecliptic", "Ecliptic Line", "render", "ecliptic"},
	{"cb-galaxies", "Galaxies", "render", "galaxies"},
	{"cb-atmos", "Atmospheres", "render", "atmospheres"},
	{"cb-clouds", "Clouds", "render", "cloudMaps"},
	{"cb-lbl-planet", "Planet Labels", "label", "planet"},
	{"cb-lbl-moon", "Moon Labels", "label", "moon"},
	{"cb-lbl-star", "Star Labels", "label", "star"},
	{"cb-lbl-const", "Constellation Labels", "label", "constellation"},
	{"cb-orb-planet", "Planet Orbits", "orbit", "planet"},
	{"cb-orb-moon", "Moon Orbits", "orbit", "moon"},
	{"cb-orb-dwarf", "Dwarf Planet Orbits", "orbit", "dwarfPlanet"},
}

// The star style radios: rb-star-N selects Celestia's StarStyle N.
var celRadios = []struct{ id, caption, group string }{
	{"rb-star-0", "Fuzzy Points", "star"}, {"rb-star-1", "Points", "star"}, {"rb-star-2", "Scaled Discs", "star"},
	{"rb-res-0", "Low Texture", "res"}, {"rb-res-1", "Medium Texture", "res"}, {"rb-res-2", "High Texture", "res"},
}

var celTimeButtons = []struct{ id, caption, label string }{
	{"slower", "Slower", "10x Slower"}, {"faster", "Faster", "10x Faster"}, {"reverse", "Reverse", "Reverse Time"},
	{"pause", "Pause", "Pause"}, {"realtime", "Real time", "Real Time"},
}

var (
	celViewBox = image.Rect(4, 52, 900, 770)
	celDockX   = 908
	// celSections maps the dock's section captions to their y.
	celSections = map[string]int{"Go to object": 90, "Julian date": 138, "Render": 218, "Labels": 350, "Orbits": 416, "Star style": 482, "Texture resolution": 548}
)

func layout() []desktop.Element {
	var l []desktop.Element
	add := func(id, label, kind, caption string, r image.Rectangle) {
		l = append(l, desktop.Element{ID: id, Label: label, Kind: kind, Caption: caption, Box: r})
	}
	add("view", "Celestia 3D view", "canvas", "", celViewBox)
	add("goto", "Celestia Go to object field", "field", "", image.Rect(908, 106, 1178, 130))
	add("go", "Celestia Go button", "button", "Go", image.Rect(1184, 106, 1272, 130))
	add("jd", "Celestia Julian date field", "field", "", image.Rect(908, 154, 1178, 178))
	add("setdate", "Celestia Set Date button", "button", "Set", image.Rect(1184, 154, 1272, 178))
	for i, b := range celTimeButtons {
		add(b.id, "Celestia "+b.label+" button", "button", b.caption, image.Rect(908+i*73, 186, 908+i*73+70, 210))
	}
	place := func(startY, i int) image.Rectangle {
		col, row := i%2, i/2
		x := 908 + col*184
		y := startY + row*22
		return image.Rect(x, y, x+180, y+20)
	}
	groupStart := map[string]int{"render": 234, "label": 366, "orbit": 432}
	idx := map[string]int{}
	for _, cb := range celChecks {
		add(cb.id, "Celestia "+cb.caption+" checkbox", "checkbox", cb.caption, place(groupStart[cb.group], idx[cb.group]))
		idx[cb.group]++
	}
	for i, rb := range celRadios {
		start := 498
		if rb.group == "res" {
			start = 564
		}
		add(rb.id, "Celestia "+rb.caption+" radio", "radio", rb.caption, place(start, i%3))
	}
	return l
}

// Visible: every element of Celestia is always shown.
func (c *celestia) Visible(id string) bool { return true }

// Checked is the state of the check boxes and radio buttons.
func (c *celestia) Checked(id string) (bool, bool) {
	for _, cb := range celChecks {
		if cb.id == id {
			return c.group(cb.group)[cb.key], true
		}
	}
	if rest, ok := strings.CutPrefix(id, "rb-star-"); ok {
		return strconv.Itoa(c.star) == rest, true
	}
	if rest, ok := strings.CutPrefix(id, "rb-res-"); ok {
		return strconv.Itoa(c.res) == rest, true
	}
	return false, false
}

func (c *celestia) group(g string) map[string]bool {
	switch g {
	case "label":
		return c.label
	case "orbit":
		return c.orbit
	}
	return c.rflags
}

// Click toggles the options, travels, sets the date and controls time.
func (c *celestia) Click(u *desktop.UI, el desktop.Element, button string, clicks int, pt image.Point) {
	if button != "left" {
		return
	}
	for _, cb := range celChecks {
		if cb.id == el.ID {
			g := c.group(cb.group)
			g[cb.key] = !g[cb.key]
			return
		}
	}
	switch el.ID {
	case "rb-star-0", "rb-star-1", "rb-star-2":
		c.star = int(el.ID[len(el.ID)-1] - '0')
	case "rb-res-0", "rb-res-1", "rb-res-2":
		c.res = int(el.ID[len(el.ID)-1] - '0')
	case "go":
		c.gotoBody(u, u.Field("goto"))
	case "setdate":
		c.setDate(u, u.Field("jd"))
	case "slower", "faster", "reverse", "pause", "realtime":
		c.timeControl(u, el.ID)
	}
}

func (c *celestia) timeControl(u *desktop.UI, what string) {
	switch what {
	case "slower":
		c.scale /= 10
	case "faster":
		c.scale *= 10
	case "reverse":
		c.scale = -c.scale
	case "pause":
		c.paused = !c.paused
	case "realtime":
		c.scale, c.paused = 1, false
	}
	c.scale = expr.RoundSig(c.scale, 12)
	u.SetStatus("Time rate: " + expr.FormatNum(c.scale) + "x")
	if c.paused {
		u.SetStatus(u.Status() + " (paused)")
	}
}

func (c *celestia) setDate(u *desktop.UI, text string) {
	jd, err := strconv.ParseFloat(strings.TrimSpace(text), 64)
	if err != nil || jd < 0 || jd > 1e7 || math.IsNaN(jd) {
		u.SetStatus("Invalid Julian date: " + strings.TrimSpace(text))
		return
	}
	c.jd = jd
	u.SetField("jd", formatJD(jd))
	u.SetStatus("Date set to " + calendarDate(jd))
}

// Submit travels (go to object field) or sets the date.
func (c *celestia) Submit(u *desktop.UI, id, text string) bool {
	switch id {
	case "goto":
		c.gotoBody(u, text)
	case "jd":
		c.setDate(u, text)
	}
	return false
}

// Shortcut: Celestia's keys for time (l, k, j, space, backslash) and
// selection (h, g).
func (c *celestia) Shortcut(u *desktop.UI, keys []string) {
	switch strings.Join(keys, "+") {
	case "l":
		c.timeControl(u, "faster")
	case "k":
		c.timeControl(u, "slower")
	case "j":
		c.timeControl(u, "reverse")
	case "space":
		c.timeControl(u, "pause")
	case "\\":
		c.timeControl(u, "realtime")
	case "h":
		c.selected = "Sol"
	case "g":
		c.gotoBody(u, c.selected)
	}
}

// Scroll over the 3D view zooms.
func (c *celestia) Scroll(u *desktop.UI, el desktop.Element, dx, dy int) {
	if el.ID != "view" || dy == 0 {
		return
	}
	t, _ := celestiaBody(c.target)
	f := math.Pow(0.8, float64(dy))
	d := c.offset.norm() * f
	d = math.Max(1.05*t.Radius, math.Min(d, 1e6*t.Radius+1e9))
	c.offset = c.offset.unit().mul(d)
}

// Drag on the 3D view orbits the camera.
func (c *celestia) Drag(u *desktop.UI, el desktop.Element, from, to image.Point) {
	if el.ID != "view" {
		return
	}
	a := float64(to.X-from.X) * 0.005
	s, co := math.Sincos(a)
	o := c.offset
	c.offset = vec3{o[0]*co - o[1]*s, o[0]*s + o[1]*co, o[2]}
}

// calendarDate converts a Julian date to a UTC calendar string.
func calendarDate(jd float64) string {
	z := math.Floor(jd + 0.5)
	f := jd + 0.5 - z
	a := z
	if z >= 2299161 {
		alpha := math.Floor((z - 1867216.25) / 36524.25)
		a = z + 1 + alpha - math.Floor(alpha/4)
	}
	b := a + 1524
	cc := math.Floor((b - 122.1) / 365.25)
	d := math.Floor(365.25 * cc)
	e := math.Floor((b - d) / 30.6001)
	day := b - d - math.Floor(30.6001*e)
	month := e - 1
	if e >= 14 {
		month = e - 13
	}
	year := cc - 4716
	if month <= 2 {
		year = cc - 4715
	}
	secs := int(math.Round(f * 86400))
	months := []string{"Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"}
	mi := int(month) - 1
	if mi < 0 || mi > 11 {
		mi = 0
	}
	return fmt.Sprintf("%d %s %02d %02d:%02d:%02d UTC", int(year), months[mi], int(day), secs/3600%24, secs/60%60, secs%60)
}
