package chimerax

// The simulated session's state as the chimerax-states bundle
// (ShiinaHiiragi/chimerax-states, src/cmds.py) dumps it: `states DIR
// STAMP` walks the session object (cruise: objects by their __dict__,
// dicts by str(key), lists and tuples as lists, numpy arrays as str()
// without newlines, an object met a second time dropped) and writes
// DIR/STAMP.raw.json (the nested walk) and DIR/STAMP.json (flatten: the
// scalar leaves under dotted keys, list items as #i), both with Python's
// json.dump(indent=2). The simulator builds the part of that tree its
// state covers, with the attribute paths of ChimeraX 1.9 where the real
// task files show them:
//
//	_state_containers.models._models.(N,)._name           model name
//	_state_containers.models._models.(N,)._display        shown
//	_state_containers.models._models.(N,).position        its Place (3×4, identity)
//	_state_containers.models._models.(N,)._redraw_needed.cached_drawing_bounds.xyz_min|xyz_max
//	                                                      bounds of what is drawn (float32)
//	_state_containers.models._models.(N, K)._name         submodels: "NAME_A SES surface",
//	                                                      "hydrogen bonds" (with _pbond_drawing.name
//	                                                      "pbonds" and ._opaque_color_count)
//	<view>._background_rgba                               background, alpha 0 (float32)
//	<view>._render.lighting.*                             lighting parameters
//	<view>._render.silhouette.{enabled,thickness,depth_jump}
//	<view>._render.current_model_view_matrix._m44         OpenGL model-view matrix (float32 4×4)
//	_state_containers.tools._tool_instances.1.page_source the Log's HTML
//
// <view> is where the walk meets the View first: through the first
// model's atoms drawing (..._models.(1,)._atoms_drawing._draw_shape.
// bindings._opengl_context.window.view), or main_view with no model open.
// The tools prefix is the simulator's choice (the real tasks only match
// keys ending in page_source).

import (
	"fmt"
	"html"
	"math"
	"path"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// cxLighting is the View's lighting parameters (ChimeraX's
// graphics.Lighting) that the lighting command sets.
type cxLighting struct {
	Key             float64 `json:"key"`
	Fill            float64 `json:"fill"`
	Ambient         float64 `json:"ambient"`
	Shadows         bool    `json:"shadows"`
	Multishadow     int     `json:"multishadow"`
	MSMapSize       int     `json:"ms_map_size"`
	MSDepthBias     float64 `json:"ms_depth_bias"`
	ShadowMapSize   int     `json:"shadow_map_size"`
	ShadowDepthBias float64 `json:"shadow_depth_bias"`
	DepthCue        bool    `json:"depth_cue"`
}

// defaultLighting is Lighting.set_default_parameters.
func defaultLighting() cxLighting {
	return cxLighting{Key: 1, Fill: 0.5, Ambient: 0.4, MSMapSize: 1024, MSDepthBias: 0.01,
		ShadowMapSize: 2048, ShadowDepthBias: 0.005, DepthCue: true}
}

// cxSilhouette is the View's silhouette parameters.
type cxSilhouette struct {
	Enabled   bool    `json:"enabled"`
	Thickness float64 `json:"thickness"`
	DepthJump float64 `json:"depth_jump"`
}

func defaultSilhouette() cxSilhouette { return cxSilhouette{Thickness: 1, DepthJump: 0.03} }

// preset applies a lighting preset as std_commands/lighting.py does.
func (c *chimerax) preset(name string) {
	l := &c.light
	switch name {
	case "default", "simple":
		*l = defaultLighting()
	case "full":
		l.Shadows, l.Multishadow, l.Key, l.Fill, l.Ambient, l.MSDepthBias, l.MSMapSize = true, 64, 0.7, 0.3, 0.8, 0.01, 1024
	case "soft":
		l.Shadows, l.Multishadow, l.Key, l.Fill, l.Ambient, l.MSDepthBias, l.MSMapSize = false, 64, 0, 0, 1.5, 0.01, 1024
	case "gentle":
		l.Shadows, l.Multishadow, l.Key, l.Fill, l.Ambient, l.MSDepthBias, l.MSMapSize = false, 64, 0, 0, 1.5, 0.05, 128
	case "flat":
		l.Shadows, l.Multishadow, l.Key, l.Fill, l.Ambient = false, 0, 0, 0, 1.45
		c.sil.Enabled, c.sil.DepthJump = true, 0.01
	}
	c.lighting = name
}

// lightingReport is what lighting with no options logs.
func (c *chimerax) lightingReport() string {
	l := c.light
	return strings.Join([]string{
		fmt.Sprintf("Intensity: %.5g", l.Key), "Direction: 0.57735,-0.57735,-0.57735", "Color: 100,100,100",
		fmt.Sprintf("Fill intensity: %.5g", l.Fill), "Fill direction: -0.2,-0.2,-0.95917", "Fill color: 100,100,100",
		fmt.Sprintf("Ambient intensity: %.5g", l.Ambient), "Ambient color: 100,100,100",
		fmt.Sprintf("Depth cue: %d, start 0.5, end 1, color 0,0,0", boolInt(l.DepthCue)),
		fmt.Sprintf("Shadow: %s (depth map size %d, depth bias %.5g)", pyBool(l.Shadows), l.ShadowMapSize, l.ShadowDepthBias),
		fmt.Sprintf("Multishadows: %d (max 1024, depth map size %d, depth bias %.5g)", l.Multishadow, l.MSMapSize, l.MSDepthBias),
	}, "\n")
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// cxChild is a submodel of a structure: a molecular surface of a chain or
// the hydrogen bonds pseudobond group.
type cxChild struct {
	ID      int    `json:"id"` // the last part of its model id (N, ID)
	Name    string `json:"name"`
	Display bool   `json:"display"`
	Count   int    `json:"count"` // pseudobonds
}

// cxAtom is one simulated atom, as info and selections name it.
type cxAtom struct {
	Chain   string
	ResNum  int
	ResName string
	Name    string
	Type    string // IDATM type
}

var (
	cxResNames   = []string{"ALA", "GLY", "SER", "LEU", "VAL", "ASN", "ASP", "GLU", "LYS", "THR", "ILE", "PRO", "ARG", "PHE"}
	cxAtomNames  = []string{"N", "CA", "C", "O", "CB", "CG", "CD", "CE", "NZ", "OG"}
	cxAtomTypes  = []string{"Npl", "C3", "C2", "O2", "C3", "C3", "C3", "C3", "N3+", "O3"}
	cxWaterFirst = 201 // the first water's residue number
)

// atoms returns the model's atoms: its polymer residues spread over its
// chains (residue numbers from 1 in each chain), their atoms named from a
// fixed list, then its waters (HOH, one O each, numbered from 201 in the
// first chain).
func (m *cxModel) atoms() []cxAtom {
	var out []cxAtom
	polymer := m.Atoms - m.Waters
	per := max(1, polymer/max(1, m.Residues))
	chain, num := "", 0
	for r := 0; r < m.Residues && len(out) < polymer; r++ {
		if ch := m.Chains[min(r*len(m.Chains)/m.Residues, len(m.Chains)-1)]; ch != chain {
			chain, num = ch, 0
		}
		num++
		n := per
		if r == m.Residues-1 {
			n = polymer - len(out)
		}
		res := cxResNames[hashIndex(m.Name, r, len(cxResNames))]
		for a := 0; a < n; a++ {
			k := a % len(cxAtomNames)
			out = append(out, cxAtom{Chain: chain, ResNum: num, ResName: res, Name: cxAtomNames[k], Type: cxAtomTypes[k]})
		}
	}
	for w := 0; w < m.Waters; w++ {
		out = append(out, cxAtom{Chain: m.Chains[0], ResNum: cxWaterFirst + w, ResName: "HOH", Name: "O", Type: "O3"})
	}
	return out
}

func hashIndex(name string, i, n int) int {
	h := uint64(14695981039346656037)
	for _, b := range []byte(fmt.Sprintf("%s/%d", name, i)) {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return int(h % uint64(n))
}

// residues returns the model's residues (chain, number) in order.
func (m *cxModel) residues() []cxAtom {
	var out []cxAtom
	seen := map[string]bool{}
	for _, a := range m.atoms() {
		k := fmt.Sprintf("%s:%d", a.Chain, a.ResNum)
		if !seen[k] {
			seen[k] = true
			out = append(out, a)
		}
	}
	return out
}

// residueColor is the ribbon color of the i-th of n residues of a chain,
// as info rescolor reports it.
func (m *cxModel) residueColor(chainIdx, i, n int) string {
	switch m.Color {
	case "bychain", "bypolymer":
		c := chainColors[chainIdx%len(chainColors)]
		return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
	case "rainbow":
		c := hsv(240*(1-float64(i)/float64(max(1, n-1))), 0.85, 0.95)
		return fmt.Sprintf("#%02x%02x%02x", c.R, c.G, c.B)
	}
	return m.Color
}

// f32 rounds to float32, as numpy stores ChimeraX's coordinates.
func f32(v float64) float64 { return float64(float32(v)) }

// bounds is the box around what the model draws: atoms (radius by style
// and element), ribbons (1 Å), surfaces (van der Waals radius); ok is
// false when nothing is drawn.
func (c *chimerax) bounds(m *cxModel) (lo, hi [3]float64, ok bool) {
	vdw := map[byte]float64{'C': 1.7, 'N': 1.625, 'O': 1.48, 'S': 1.782}
	surface := false
	for _, ch := range m.Children {
		surface = surface || ch.Display && strings.HasSuffix(ch.Name, "SES surface")
	}
	lo = [3]float64{math.Inf(1), math.Inf(1), math.Inf(1)}
	hi = [3]float64{math.Inf(-1), math.Inf(-1), math.Inf(-1)}
	for _, a := range c.coords(m) {
		r := -1.0
		if m.AtomsShown {
			switch m.Style {
			case "sphere":
				r = vdw[a.elem]
			case "ball":
				r = 0.25 * vdw[a.elem]
			default:
				r = 0.2
			}
		}
		if m.Cartoon {
			r = math.Max(r, 1)
		}
		if surface {
			r = math.Max(r, vdw[a.elem])
		}
		if r < 0 {
			continue
		}
		ok = true
		for k, v := range [3]float64{a.x, a.y, a.z} {
			lo[k] = math.Min(lo[k], v-r)
			hi[k] = math.Max(hi[k], v+r)
		}
	}
	for k := range lo {
		lo[k], hi[k] = f32(lo[k]), f32(hi[k])
	}
	return lo, hi, ok
}

// rotation is the view's rotation (degrees about x, then y, then z), its
// entries snapped to 0 below 1e-12.
func (c *chimerax) rotation() [3][3]float64 {
	sx, cx := math.Sincos(c.rot[0] * math.Pi / 180)
	sy, cy := math.Sincos(c.rot[1] * math.Pi / 180)
	sz, cz := math.Sincos(c.rot[2] * math.Pi / 180)
	rx := [3][3]float64{{1, 0, 0}, {0, cx, -sx}, {0, sx, cx}}
	ry := [3][3]float64{{cy, 0, sy}, {0, 1, 0}, {-sy, 0, cy}}
	rz := [3][3]float64{{cz, -sz, 0}, {sz, cz, 0}, {0, 0, 1}}
	mul := func(a, b [3][3]float64) (o [3][3]float64) {
		for i := range 3 {
			for j := range 3 {
				for k := range 3 {
					o[i][j] += a[i][k] * b[k][j]
				}
			}
		}
		return o
	}
	r := mul(rz, mul(ry, rx))
	for i := range 3 {
		for j := range 3 {
			if math.Abs(r[i][j]) < 1e-12 {
				r[i][j] = 0
			}
		}
	}
	return r
}

// modelView is the OpenGL model-view matrix (Place.opengl_matrix: the
// transpose of [R t], translation in the last row) of the camera looking
// at the first model's centre from 50 Å / zoom.
func (c *chimerax) modelView() ndarray {
	r := c.rotation()
	var centre [3]float64
	if len(c.models) > 0 {
		if lo, hi, ok := c.bounds(c.models[0]); ok {
			for k := range centre {
				centre[k] = (lo[k] + hi[k]) / 2
			}
		}
	}
	var t [3]float64
	for i := range 3 {
		for k := range 3 {
			t[i] -= r[i][k] * centre[k]
		}
	}
	t[2] -= math.Round(50/c.zoom*1000) / 1000
	m := make([]float64, 16)
	for i := range 3 {
		for j := range 3 {
			m[j*4+i] = f32(r[i][j])
		}
		m[12+i] = f32(t[i])
	}
	m[15] = 1
	return matrix(32, 4, 4, m)
}

// rgba is a color as the View stores its background: float32 RGB, alpha 0.
func rgba(hex string) ndarray {
	r, g, b := hexRGB(hex)
	return vector32(f32(float64(r)/255), f32(float64(g)/255), f32(float64(b)/255), 0)
}

// viewTree is the View's part of the walk.
func (c *chimerax) viewTree() *odict {
	l := c.light
	lighting := newODict().
		set("key_light_intensity", l.Key).set("fill_light_intensity", l.Fill).set("ambient_light_intensity", l.Ambient).
		set("depth_cue", l.DepthCue).set("move_lights_with_camera", true).set("shadows", l.Shadows).
		set("shadow_map_size", l.ShadowMapSize).set("shadow_depth_bias", l.ShadowDepthBias).
		set("multishadow", l.Multishadow).set("multishadow_map_size", l.MSMapSize).set("multishadow_depth_bias", l.MSDepthBias)
	sil := newODict().set("enabled", c.sil.Enabled).set("thickness", c.sil.Thickness).
		set("color", vector32(0, 0, 0, 1).String()).set("depth_jump", c.sil.DepthJump)
	render := newODict().set("lighting", lighting).set("silhouette", sil).
		set("current_model_view_matrix", newODict().set("_m44", c.modelView().String()))
	return newODict().set("_background_rgba", rgba(c.bg).String()).set("_render", render)
}

// logHTML is the Log tool's page source: its lines, HTML-escaped, joined
// by <br>.
func (c *chimerax) logHTML() string {
	lines := make([]string, len(c.log))
	for i, l := range c.log {
		lines[i] = html.EscapeString(l)
	}
	return "<html><head><title>Log</title></head><body>" + strings.Join(lines, "<br>") + "</body></html>"
}

// sessionTree is the walk of the simulated session (see the top of
// session.go).
func (c *chimerax) sessionTree() *odict {
	models := newODict()
	var view *odict
	for i, m := range c.models {
		entry := newODict().set("_name", m.Name).set("_display", true).
			set("position", matrix(64, 3, 4, []float64{1, 0, 0, 0, 0, 1, 0, 0, 0, 0, 1, 0}).String())
		bounds := newODict()
		if lo, hi, ok := c.bounds(m); ok {
			bounds.set("xyz_min", vector32(lo[:]...).String()).set("xyz_max", vector32(hi[:]...).String())
			entry.set("_redraw_needed", newODict().set("cached_drawing_bounds", bounds))
		} else {
			entry.set("_redraw_needed", newODict().set("cached_drawing_bounds", nil))
		}
		if i == 0 {
			view = c.viewTree()
			window := newODict().set("view", view)
			entry.set("_atoms_drawing", newODict().set("_draw_shape", newODict().set("bindings",
				newODict().set("_opengl_context", newODict().set("window", window)))))
		}
		models.set(fmt.Sprintf("(%d,)", m.ID), entry)
		for _, ch := range m.Children {
			sub := newODict().set("_name", ch.Name).set("_display", ch.Display)
			if ch.Name == "hydrogen bonds" {
				sub.set("_pbond_drawing", newODict().set("name", "pbonds").set("_opaque_color_count", ch.Count))
			}
			models.set(fmt.Sprintf("(%d, %d)", m.ID, ch.ID), sub)
		}
	}
	containers := newODict().
		set("models", newODict().set("_models", models)).
		set("tools", newODict().set("_tool_instances", newODict().
			set("1", newODict().set("tool_name", "Log").set("page_source", c.logHTML())).
			set("2", newODict().set("tool_name", "Command Line Interface").set("_shown", !c.cliDestroyed))))
	root := newODict().set("_state_containers", containers)
	if view == nil {
		root.set("main_view", c.viewTree())
	}
	return root
}

// writeStates is the states command: DIR/STAMP.raw.json and DIR/STAMP.json.
func (c *chimerax) writeStates(files desktop.Files, dir, stamp string) error {
	if files == nil {
		return fmt.Errorf("no file system")
	}
	base := path.Join(files.Abs(dir), stamp)
	tree := c.sessionTree()
	for _, f := range []struct {
		name string
		v    any
	}{{base + ".raw.json", tree}, {base + ".json", flatten(tree)}} {
		if err := files.WriteFile(f.name, string(pyJSON(f.v))); err != nil {
			return fmt.Errorf("[Errno 2] No such file or directory: '%s'", f.name)
		}
	}
	return nil
}
