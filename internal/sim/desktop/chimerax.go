package desktop

import (
	"encoding/json"
	"fmt"
	"image"
	"math"
	"net/url"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/screen"
)

// ChimeraX: a molecule viewer with a toolbar (Home, Molecule Display,
// Graphics tabs), a graphics window, a log and a command line. Structures
// are simulated: any 4-character PDB id can be fetched, and its atom,
// residue and chain counts are fixed functions of the id.

// cxModel is one open atomic structure.
type cxModel struct {
	ID         int
	Name       string
	Atoms      int
	Residues   int
	Chains     []string
	Waters     int
	Hydrogens  int
	Style      string // stick, sphere, ball
	AtomsShown bool
	Cartoon    bool
	Surface    bool
	Color      string // #rrggbb or bychain, byelement, rainbow, bypolymer
	HBonds     int    // hydrogen bonds found (0: none)
}

type chimerax struct {
	models      []*cxModel
	bg          string
	lighting    string
	silhouettes bool
	rot         [3]float64
	zoom        float64
	selSpec     string
	selAtoms    int
	log         []string
	logScroll   int
	tab         string
	restPort    int
	cache       map[string][]atom3 // per model name: simulated coordinates
}

func newChimeraX() *chimerax {
	return &chimerax{bg: "#000000", lighting: "default", zoom: 1, tab: "home", cache: map[string][]atom3{},
		log: []string{"UCSF ChimeraX version: 1.6.1 (SIMULATOR)", "How to cite UCSF ChimeraX"}}
}

func (c *chimerax) name() string { return AppChimeraX }

// cxStruct describes a structure that can be fetched.
type cxStruct struct {
	Atoms, Residues, Waters int
	Chains                  []string
}

// Fixed descriptions of a few structures the tasks use; other ids get
// hashed values.
var cxKnown = map[string]cxStruct{
	"1crn": {Atoms: 327, Residues: 46, Chains: []string{"A"}},
	"4hhb": {Atoms: 4779, Residues: 574, Waters: 221, Chains: []string{"A", "B", "C", "D"}},
	"2olx": {Atoms: 54, Residues: 4, Waters: 6, Chains: []string{"A"}},
}

// chimeraxStructure returns the simulated description of a structure by
// PDB id or file name.
func chimeraxStructure(name string) cxStruct {
	if s, ok := cxKnown[strings.ToLower(name)]; ok {
		return s
	}
	h := screen.Hash("cx-structure", strings.ToLower(name))
	res := 40 + int(h%560)
	nch := 1 + int((h>>16)%4)
	chains := make([]string, nch)
	for i := range chains {
		chains[i] = string(rune('A' + i))
	}
	return cxStruct{Atoms: res*8 + int((h>>24)%8), Residues: res, Waters: int((h >> 32) % 90), Chains: chains}
}

func (c *chimerax) logf(format string, args ...any) {
	for _, l := range strings.Split(fmt.Sprintf(format, args...), "\n") {
		c.log = append(c.log, l)
	}
	if len(c.log) > 2000 {
		c.log = c.log[len(c.log)-2000:]
	}
	c.logScroll = 0
}

// cxResult collects the messages of one command run.
type cxResult struct {
	info, errors, warnings []string
}

func (r *cxResult) infof(format string, args ...any) {
	r.info = append(r.info, fmt.Sprintf(format, args...))
}

func (r *cxResult) errorf(format string, args ...any) {
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

// run executes a command line (commands separated by ';') and logs it.
func (c *chimerax) run(u *ui, line string) *cxResult {
	res := &cxResult{}
	line = strings.TrimSpace(line)
	if line == "" {
		return res
	}
	c.logf("> %s", line)
	for _, cmd := range strings.Split(line, ";") {
		cmd = strings.TrimSpace(cmd)
		if cmd == "" {
			continue
		}
		before := len(res.errors)
		c.exec(u, cmd, res)
		if len(res.errors) > before {
			break // ChimeraX stops at the first error
		}
	}
	for _, l := range res.info {
		c.logf("%s", l)
	}
	for _, l := range res.warnings {
		c.logf("Warning: %s", l)
	}
	for _, l := range res.errors {
		c.logf("Error: %s", l)
	}
	if u != nil {
		switch {
		case len(res.errors) > 0:
			u.status = res.errors[len(res.errors)-1]
		case len(res.info) > 0:
			u.status = res.info[len(res.info)-1]
		default:
			u.status = ""
		}
	}
	return res
}

// targets returns the models a spec names ("" or "all": every model).
func (c *chimerax) targets(spec string) ([]*cxModel, error) {
	if spec == "" || spec == "all" || spec == "sel" || strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, ":") {
		return c.models, nil
	}
	if id, ok := strings.CutPrefix(spec, "#"); ok {
		n, err := strconv.Atoi(strings.SplitN(id, "/", 2)[0])
		if err == nil {
			for _, m := range c.models {
				if m.ID == n {
					return []*cxModel{m}, nil
				}
			}
			return nil, nil
		}
	}
	return nil, fmt.Errorf("Invalid atom specifier %q", spec)
}

func isSpec(s string) bool {
	return s == "all" || s == "sel" || strings.HasPrefix(s, "#") || strings.HasPrefix(s, "/") || strings.HasPrefix(s, ":")
}

var cxColors = map[string]string{
	"red": "#ff0000", "green": "#008000", "lime": "#00ff00", "blue": "#0000ff", "white": "#ffffff",
	"black": "#000000", "gray": "#808080", "grey": "#808080", "yellow": "#ffff00", "magenta": "#ff00ff",
	"cyan": "#00ffff", "orange": "#ffa500", "purple": "#800080", "pink": "#ffc0cb", "tan": "#d2b48c",
	"hotpink": "#ff69b4", "lightgray": "#d3d3d3", "lightgrey": "#d3d3d3", "salmon": "#fa8072",
	"gold": "#ffd700", "navy": "#000080", "forestgreen": "#228b22", "cornflowerblue": "#6495ed",
	"darkgray": "#a9a9a9", "darkgrey": "#a9a9a9", "brown": "#a52a2a", "skyblue": "#87ceeb",
}

// parseColor returns a color name or #screen.RGB/#rrggbb as lower-case #rrggbb.
func parseColor(s string) (string, bool) {
	s = strings.ToLower(s)
	if h, ok := cxColors[s]; ok {
		return h, true
	}
	if strings.HasPrefix(s, "#") {
		hex := s[1:]
		if len(hex) == 3 {
			hex = string([]byte{hex[0], hex[0], hex[1], hex[1], hex[2], hex[2]})
		}
		if len(hex) == 6 {
			if _, err := strconv.ParseUint(hex, 16, 32); err == nil {
				return "#" + hex, true
			}
		}
	}
	return "", false
}

func hexRGB(h string) (uint8, uint8, uint8) {
	v, err := strconv.ParseUint(strings.TrimPrefix(h, "#"), 16, 32)
	if err != nil {
		return 200, 200, 200
	}
	return uint8(v >> 16), uint8(v >> 8), uint8(v)
}

func parseBool(s string) (bool, bool) {
	switch strings.ToLower(s) {
	case "true", "t", "1", "on", "yes":
		return true, true
	case "false", "f", "0", "off", "no":
		return false, true
	}
	return false, false
}

func (c *chimerax) exec(u *ui, cmd string, res *cxResult) {
	words := strings.Fields(cmd)
	verb := strings.ToLower(words[0])
	args := words[1:]
	needModels := func() bool {
		if len(c.models) == 0 {
			res.errorf("No atomic structures open")
			return false
		}
		return true
	}
	// Optional leading atom spec.
	spec := ""
	if len(args) > 0 && isSpec(args[0]) {
		spec, args = args[0], args[1:]
	}
	models, specErr := c.targets(spec)
	switch verb {
	case "open":
		if len(args) == 0 {
			res.errorf("Missing filename")
			return
		}
		c.open(u, args[0], res)
	case "close":
		if spec == "" || spec == "all" {
			c.models = nil
		} else {
			keep := c.models[:0]
			for _, m := range c.models {
				if !containsModel(models, m) {
					keep = append(keep, m)
				}
			}
			c.models = keep
		}
		c.selSpec, c.selAtoms = "", 0
	case "show", "hide", "display", "~display":
		if !needModels() || specErr != nil {
			if specErr != nil {
				res.errorf("%v", specErr)
			}
			return
		}
		on := verb == "show" || verb == "display"
		target := "atoms"
		if len(args) > 0 {
			target = strings.ToLower(args[0])
		}
		for _, m := range models {
			switch {
			case strings.HasPrefix(target, "a") || target == "target":
				m.AtomsShown = on
			case strings.HasPrefix(target, "c") || target == "ribbons":
				m.Cartoon = on
			case strings.HasPrefix(target, "s"):
				m.Surface = on
			case strings.HasPrefix(target, "m"):
				m.AtomsShown, m.Cartoon = on, on
			default:
				res.errorf("Unknown display target %q", target)
				return
			}
		}
	case "cartoon", "~cartoon", "surface", "~surface":
		if !needModels() {
			return
		}
		on := !strings.HasPrefix(verb, "~")
		if len(args) > 0 && strings.ToLower(args[0]) == "hide" {
			on = false
		}
		for _, m := range models {
			if strings.HasSuffix(verb, "cartoon") {
				m.Cartoon = on
			} else {
				m.Surface = on
			}
		}
		if strings.HasSuffix(verb, "surface") && on {
			for _, m := range models {
				res.infof("%d surfaces computed for #%d", len(m.Chains), m.ID)
			}
		}
	case "style":
		if !needModels() {
			return
		}
		if len(args) == 0 {
			res.errorf("Missing style: stick, sphere or ball")
			return
		}
		st := strings.ToLower(args[0])
		switch st {
		case "stick", "sphere", "ball":
		case "spheres":
			st = "sphere"
		case "sticks":
			st = "stick"
		default:
			res.errorf("Invalid style %q: expected stick, sphere or ball", args[0])
			return
		}
		for _, m := range models {
			m.Style = st
		}
	case "color", "colour":
		if !needModels() {
			return
		}
		if len(args) == 0 {
			res.errorf("Missing color")
			return
		}
		scheme := strings.ToLower(args[0])
		switch scheme {
		case "bychain", "byelement", "bypolymer", "rainbow", "byhetero":
		default:
			h, ok := parseColor(scheme)
			if !ok {
				res.errorf("Invalid color %q", args[0])
				return
			}
			scheme = h
		}
		for _, m := range models {
			m.Color = scheme
		}
	case "rainbow":
		if !needModels() {
			return
		}
		for _, m := range models {
			m.Color = "rainbow"
		}
	case "set":
		if len(args) < 2 {
			res.errorf("Usage: set bgColor color")
			return
		}
		key := strings.ToLower(args[0])
		if key != "bgcolor" && key != "bg_color" {
			res.errorf("Unknown setting %q", args[0])
			return
		}
		h, ok := parseColor(args[1])
		if !ok {
			res.errorf("Invalid color %q", args[1])
			return
		}
		c.bg = h
	case "lighting":
		if len(args) == 0 {
			res.infof("Intensity %.2g, direction 0.577,-0.577,-0.577, color 100,100,100; lighting %s", 1.0, c.lighting)
			return
		}
		mode := strings.ToLower(args[0])
		switch mode {
		case "simple", "soft", "full", "flat", "default", "gentle":
			c.lighting = mode
		case "shadows", "multishadow", "intensity", "depthcue":
			// accepted, no visible effect in the simulator
		default:
			res.errorf("Unknown lighting mode %q", args[0])
		}
	case "graphics":
		if len(args) >= 2 && strings.ToLower(args[0]) == "silhouettes" {
			b, ok := parseBool(args[1])
			if !ok {
				res.errorf("Expected true or false, got %q", args[1])
				return
			}
			c.silhouettes = b
			return
		}
		res.errorf("Usage: graphics silhouettes true|false")
	case "turn", "roll":
		axis, angle := "y", 90.0
		if verb == "roll" {
			angle = 1
		}
		if len(args) > 0 {
			axis = strings.ToLower(args[0])
		}
		if len(args) > 1 {
			a, err := strconv.ParseFloat(args[1], 64)
			if err != nil {
				res.errorf("Invalid angle %q", args[1])
				return
			}
			angle = a
		}
		i := strings.Index("xyz", axis)
		if len(axis) != 1 || i < 0 {
			res.errorf("Invalid axis %q: expected x, y or z", axis)
			return
		}
		c.rot[i] = normDeg(c.rot[i] + angle)
	case "view":
		c.rot = [3]float64{}
		c.zoom = 1
	case "zoom":
		f := 1.5
		if len(args) > 0 {
			v, err := strconv.ParseFloat(args[0], 64)
			if err != nil || v <= 0 {
				res.errorf("Invalid zoom factor %q", args[0])
				return
			}
			f = v
		}
		c.zoom = math.Max(0.05, math.Min(50, c.zoom*f))
	case "select", "sel", "~select", "~sel":
		if verb[0] == '~' || len(args) > 0 && strings.ToLower(args[0]) == "clear" {
			c.selSpec, c.selAtoms = "", 0
			return
		}
		if !needModels() {
			return
		}
		target := spec
		if target == "" && len(args) > 0 {
			target = args[0]
		}
		n, err := c.countSpec(target)
		if err != nil {
			res.errorf("%v", err)
			return
		}
		c.selSpec, c.selAtoms = target, n
		res.infof("%d atoms, %d models selected", n, len(c.models))
	case "info":
		c.info(strings.ToLower(strings.Join(args, " ")), spec, res)
	case "hbonds", "~hbonds":
		if !needModels() {
			return
		}
		for _, m := range models {
			if verb == "~hbonds" {
				m.HBonds = 0
				continue
			}
			m.HBonds = 4 + int(screen.Hash("hb", m.Name)%uint64(max(8, m.Residues/2)))
			res.infof("%d hydrogen bonds found", m.HBonds)
		}
	case "addh":
		if !needModels() {
			return
		}
		for _, m := range models {
			if m.Hydrogens == 0 {
				m.Hydrogens = m.Residues*7 + int(screen.Hash("h", m.Name)%7)
				m.Atoms += m.Hydrogens
			}
			res.infof("%d hydrogens added to #%d", m.Hydrogens, m.ID)
		}
	case "log":
		if len(args) > 0 && strings.ToLower(args[0]) == "clear" {
			c.log = nil
			c.logScroll = 0
			return
		}
		if len(args) > 0 && (args[0] == "show" || args[0] == "hide") {
			return
		}
		if len(args) > 0 && args[0] == "text" {
			res.infof("%s", strings.Join(args[1:], " "))
			return
		}
		res.errorf("Usage: log clear | log text ...")
	case "remotecontrol":
		port := 60958
		for i := 0; i+1 < len(args); i++ {
			if strings.ToLower(args[i]) == "port" {
				if p, err := strconv.Atoi(args[i+1]); err == nil {
					port = p
				}
			}
		}
		c.restPort = port
		res.infof("REST server started on host 127.0.0.1 port %d", port)
	case "save":
		if len(args) == 0 {
			res.errorf("Missing file name")
			return
		}
		if u != nil {
			if err := u.m.writeFile(args[0], c.sessionText(), false); err != nil {
				res.errorf("Cannot save %s: %v", args[0], err)
				return
			}
		}
		res.infof("Saved %s", args[0])
	case "windowsize":
		res.infof("window size 864 594")
	case "version":
		res.infof("UCSF ChimeraX version: 1.6.1 (SIMULATOR)")
	default:
		res.errorf("Unknown command: %s", cmd)
	}
}

func containsModel(ms []*cxModel, m *cxModel) bool {
	for _, x := range ms {
		if x == m {
			return true
		}
	}
	return false
}

func normDeg(a float64) float64 {
	a = math.Mod(a, 360)
	if a < 0 {
		a += 360
	}
	return math.Round(a*1e6) / 1e6
}

func (c *chimerax) open(u *ui, name string, res *cxResult) {
	var st cxStruct
	var mname string
	lower := strings.ToLower(name)
	switch {
	case len(name) == 4 && isAlnum(name) && !strings.Contains(name, "."):
		mname = lower
		st = chimeraxStructure(lower)
		res.infof("Fetching %s from http://www.rcsb.org/ (simulated)", mname)
	case strings.HasPrefix(lower, "pdb:") && len(name) == 8:
		mname = lower[4:]
		st = chimeraxStructure(mname)
	default:
		p := name
		if u != nil {
			p = u.m.abs(name)
			if !u.m.isFile(p) {
				res.errorf("No such file/path: %s", name)
				return
			}
		}
		ext := strings.ToLower(path.Ext(p))
		if ext != ".pdb" && ext != ".cif" && ext != ".mmcif" && ext != ".ent" {
			res.errorf("Unrecognized file suffix %q", ext)
			return
		}
		mname = path.Base(p)
		content := ""
		if u != nil {
			content = u.m.fs[p]
		}
		st = chimeraxStructure(mname + "\x00" + content)
	}
	id := 1
	for _, m := range c.models {
		if m.ID >= id {
			id = m.ID + 1
		}
	}
	m := &cxModel{ID: id, Name: mname, Atoms: st.Atoms, Residues: st.Residues, Chains: st.Chains, Waters: st.Waters,
		Style: "stick", Cartoon: true, Color: "bypolymer"}
	if st.Residues < 20 {
		m.Cartoon, m.AtomsShown = false, true
	}
	c.models = append(c.models, m)
	res.infof("%s title: Simulated structure %s [more info...]", mname, strings.ToUpper(mname))
	res.infof("Chain information for %s #%d: %s", mname, id, strings.Join(st.Chains, ", "))
}

func isAlnum(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(isDigit(c) || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
			return false
		}
	}
	return true
}

// countSpec returns the number of atoms a selection spec covers.
func (c *chimerax) countSpec(spec string) (int, error) {
	total := 0
	for _, m := range c.models {
		switch {
		case spec == "" || spec == "all" || strings.HasPrefix(spec, "#"+strconv.Itoa(m.ID)) && !strings.Contains(spec, "/"):
			total += m.Atoms
		case strings.HasPrefix(spec, "/") || strings.HasPrefix(spec, "#"+strconv.Itoa(m.ID)+"/"):
			ch := spec[strings.Index(spec, "/")+1:]
			for _, x := range m.Chains {
				if strings.EqualFold(x, ch) {
					total += m.Atoms / len(m.Chains)
				}
			}
		case strings.EqualFold(spec, ":hoh") || spec == "solvent":
			total += m.Waters
		case spec == "protein":
			total += m.Atoms - m.Waters
		case spec == "ligand":
			total += int(screen.Hash("lig", m.Name) % 30)
		case strings.HasPrefix(spec, "#"):
		default:
			return 0, fmt.Errorf("Invalid atom specifier %q", spec)
		}
	}
	return total, nil
}

func (c *chimerax) info(what, spec string, res *cxResult) {
	switch what {
	case "", "models":
		if len(c.models) == 0 {
			res.infof("No models open")
			return
		}
		for _, m := range c.models {
			res.infof("model id #%d type AtomicStructure name %s", m.ID, m.Name)
			res.infof("#%d %s: %d atoms, %d residues, %d chains (%s)", m.ID, m.Name, m.Atoms, m.Residues,
				len(m.Chains), strings.Join(m.Chains, ","))
		}
	case "chains":
		for _, m := range c.models {
			for _, ch := range m.Chains {
				res.infof("chain id #%d/%s chain_id %s", m.ID, ch, ch)
			}
		}
		if len(c.models) == 0 {
			res.infof("No models open")
		}
	case "sel", "selection":
		res.infof("%d atoms selected", c.selAtoms)
	default:
		res.errorf("Unknown info target %q", what)
	}
}

func (c *chimerax) sessionText() string {
	var b strings.Builder
	b.WriteString("# ChimeraX session (SIMULATOR)\n")
	for _, m := range c.models {
		fmt.Fprintf(&b, "model #%d %s atoms=%d\n", m.ID, m.Name, m.Atoms)
	}
	return b.String()
}

// state is the flat state dump (GET /chimerax/state).
func (c *chimerax) state() map[string]any {
	s := map[string]any{
		"models.count":       len(c.models),
		"view.background":    c.bg,
		"view.lighting":      c.lighting,
		"view.silhouettes":   c.silhouettes,
		"view.turn.x":        c.rot[0],
		"view.turn.y":        c.rot[1],
		"view.turn.z":        c.rot[2],
		"view.zoom":          math.Round(c.zoom*1e6) / 1e6,
		"selection.spec":     c.selSpec,
		"selection.atoms":    c.selAtoms,
		"log.lines":          len(c.log),
		"log.tail":           tail(c.log, 12),
		"toolbar.tab":        c.tab,
		"remotecontrol.port": c.restPort,
	}
	for _, m := range c.models {
		p := fmt.Sprintf("models.(%d,).", m.ID)
		s[p+"name"] = m.Name
		s[p+"atoms"] = m.Atoms
		s[p+"residues"] = m.Residues
		s[p+"chains"] = strings.Join(m.Chains, ",")
		s[p+"style"] = m.Style
		s[p+"atoms_shown"] = m.AtomsShown
		s[p+"cartoon"] = m.Cartoon
		s[p+"surface"] = m.Surface
		s[p+"color"] = m.Color
		s[p+"hydrogens"] = m.Hydrogens
		s[p+"hbonds"] = m.HBonds
		// The key ScienceBoard's state dump uses for a model's name.
		s[fmt.Sprintf("_state_containers.models._models.(%d,)._name", m.ID)] = m.Name
	}
	return s
}

func tail(ls []string, n int) []string {
	if len(ls) > n {
		ls = ls[len(ls)-n:]
	}
	return append([]string{}, ls...)
}

// endpoint serves /chimerax/run and /chimerax/state.
func (c *chimerax) endpoint(p string, q url.Values, body []byte) ([]byte, int, bool) {
	switch p {
	case "/chimerax/run", "/run":
		cmd := strings.TrimSpace(string(body))
		if cmd == "" {
			cmd = q.Get("command")
		}
		if strings.HasPrefix(cmd, "{") {
			var req struct {
				Command string `json:"command"`
			}
			if err := json.Unmarshal([]byte(cmd), &req); err != nil {
				return jsonError("bad JSON body: " + err.Error()), 400, true
			}
			cmd = req.Command
		}
		if cmd == "" {
			return jsonError("missing command"), 400, true
		}
		res := c.run(nil, cmd)
		var errVal any
		if len(res.errors) > 0 {
			errVal = map[string]string{"type": "UserError", "message": strings.Join(res.errors, "\n")}
		}
		out := map[string]any{
			"python values": []any{},
			"json values":   []any{},
			"log messages": map[string][]string{
				"info": nonNil(res.info), "warning": nonNil(res.warnings), "error": nonNil(res.errors),
				"status": {}, "bug": {}, "traceback": {},
			},
			"error": errVal,
		}
		return mustJSON(out), 200, true
	case "/chimerax/state", "/chimerax/states":
		return mustJSON(c.state()), 200, true
	}
	return nil, 0, false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (c *chimerax) launchArgs(u *ui, args []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--cmd" && i+1 < len(args):
			c.run(u, args[i+1])
			i++
		case strings.HasPrefix(a, "-"):
		default:
			if !strings.Contains(a, "«") {
				c.run(u, "open "+a)
			}
		}
	}
	u.status = ""
}

// Layout.

var cxToolbar = map[string][]string{
	"home":     {"Home View", "Close All", "Clear Log", "Clear Selection", "Model Info"},
	"molecule": {"Show Atoms", "Hide Atoms", "Show Cartoon", "Hide Cartoon", "Stick", "Ball and Stick", "Sphere", "Color by Chain", "Color by Element", "Rainbow", "Show Surface", "Hide Surface"},
	"graphics": {"Simple Lighting", "Soft Lighting", "Full Lighting", "Flat Lighting", "Black Background", "White Background", "Gray Background", "Silhouettes"},
}

// cxButtonCommand maps each toolbar button caption to the command it runs.
var cxButtonCommand = map[string]string{
	"Home View": "view", "Close All": "close", "Clear Log": "log clear", "Clear Selection": "select clear",
	"Model Info": "info models", "Show Atoms": "show atoms", "Hide Atoms": "hide atoms",
	"Show Cartoon": "cartoon", "Hide Cartoon": "cartoon hide", "Stick": "style stick",
	"Ball and Stick": "style ball", "Sphere": "style sphere", "Color by Chain": "color bychain",
	"Color by Element": "color byelement", "Rainbow": "rainbow", "Show Surface": "surface",
	"Hide Surface": "surface hide", "Simple Lighting": "lighting simple", "Soft Lighting": "lighting soft",
	"Full Lighting": "lighting full", "Flat Lighting": "lighting flat", "Black Background": "set bgColor black",
	"White Background": "set bgColor white", "Gray Background": "set bgColor gray",
	"Silhouettes": "graphics silhouettes toggle",
}

var (
	cxGraphicsBox = image.Rect(8, 122, 872, 716)
	cxLogBox      = image.Rect(878, 122, 1272, 716)
	cxCmdBox      = image.Rect(86, 722, 1272, 750)
)

func cxButtonID(tab, caption string) string {
	return "tb-" + tab + "-" + strings.ToLower(strings.ReplaceAll(caption, " ", "-"))
}

func chimeraxLayout() *appLayout {
	l := &appLayout{app: AppChimeraX}
	add := func(id, label, kind, caption string, r image.Rectangle) {
		l.elems = append(l.elems, &uiElement{Element: Element{ID: id, Label: label, Kind: kind, Box: r}, caption: caption})
	}
	add("graphics", "ChimeraX graphics window", "canvas", "", cxGraphicsBox)
	add("log", "ChimeraX log", "list", "", cxLogBox)
	x := 8
	for _, t := range []struct{ id, caption string }{{"home", "Home"}, {"molecule", "Molecule Display"}, {"graphics", "Graphics"}} {
		w := screen.TextW(t.caption) + 24
		add("tab-"+t.id, "ChimeraX "+t.caption+" tab", "tab", t.caption, image.Rect(x, 52, x+w, 72))
		x += w + 4
	}
	for _, tab := range []string{"home", "molecule", "graphics"} {
		x := 8
		for _, caption := range cxToolbar[tab] {
			w := max(72, screen.TextW(caption)+18)
			add(cxButtonID(tab, caption), "ChimeraX "+caption+" button", "button", caption, image.Rect(x, 76, x+w, 116))
			x += w + 4
		}
	}
	add("cmdline", "ChimeraX command line", "field", "", cxCmdBox)
	return l
}

func (c *chimerax) visible(id string) bool {
	if rest, ok := strings.CutPrefix(id, "tb-"); ok {
		return strings.HasPrefix(rest, c.tab+"-")
	}
	return true
}

func (c *chimerax) checked(id string) (bool, bool) {
	if id == cxButtonID("graphics", "Silhouettes") {
		return c.silhouettes, true
	}
	return false, false
}

func (c *chimerax) click(u *ui, el *uiElement, button string, clicks int, pt image.Point) {
	if button != "left" {
		return
	}
	if tab, ok := strings.CutPrefix(el.ID, "tab-"); ok {
		c.tab = tab
		return
	}
	if el.Kind == "button" {
		cmd := cxButtonCommand[el.caption]
		if cmd == "graphics silhouettes toggle" {
			cmd = "graphics silhouettes " + strconv.FormatBool(!c.silhouettes)
		}
		c.run(u, cmd)
	}
}

func (c *chimerax) submit(u *ui, id, text string) bool {
	if id == "cmdline" {
		c.run(u, text)
	}
	return false // ChimeraX keeps the command, selected
}

func (c *chimerax) shortcut(u *ui, keys []string) {}

func (c *chimerax) scroll(u *ui, el *uiElement, dx, dy int) {
	switch el.ID {
	case "log":
		c.logScroll = max(0, min(len(c.log), c.logScroll+dy))
	case "graphics":
		c.zoom = math.Max(0.05, math.Min(50, c.zoom*math.Pow(1.1, float64(dy))))
	}
}

func (c *chimerax) drag(u *ui, el *uiElement, from, to image.Point) {
	if el.ID != "graphics" {
		return
	}
	c.rot[1] = normDeg(c.rot[1] + float64(to.X-from.X)*0.5)
	c.rot[0] = normDeg(c.rot[0] + float64(to.Y-from.Y)*0.5)
}

// Rendering.

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

var chainColors = []color3{{0xd2, 0xb4, 0x8c}, {0x87, 0xce, 0xeb}, {0xe6, 0x9f, 0x00}, {0x98, 0xfb, 0x98}, {0xff, 0x69, 0xb4}, {0xbd, 0xb7, 0x6b}}

type color3 struct{ r, g, b uint8 }

func (c *chimerax) atomColor(m *cxModel, a atom3, i, n int) color3 {
	switch m.Color {
	case "bychain", "bypolymer":
		return chainColors[a.chain%len(chainColors)]
	case "byelement", "byhetero":
		switch a.elem {
		case 'N':
			return color3{0x30, 0x50, 0xf8}
		case 'O':
			return color3{0xff, 0x0d, 0x0d}
		case 'S':
			return color3{0xff, 0xff, 0x30}
		}
		return color3{0x90, 0x90, 0x90}
	case "rainbow":
		t := float64(i) / float64(max(1, n-1))
		return hsv(240*(1-t), 0.85, 0.95)
	}
	r, g, b := hexRGB(m.Color)
	return color3{r, g, b}
}

func hsv(h, s, v float64) color3 {
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
	return color3{uint8(r * 255), uint8(g * 255), uint8(b * 255)}
}

func (c *chimerax) render(cv *screen.Canvas, u *ui) {
	l := u.layout
	// Toolbar.
	cv.Fill(image.Rect(0, appTop, ScreenW, 120), screen.RGB(0xde, 0xde, 0xdc))
	for _, e := range l.elems {
		if !c.visible(e.ID) {
			continue
		}
		switch e.Kind {
		case "tab":
			cv.Tab(e.Box, e.caption, "tab-"+c.tab == e.ID)
		case "button":
			on, has := c.checked(e.ID)
			cv.Button(e.Box, e.caption, has && on)
		}
	}
	c.renderGraphics(cv)
	// Log.
	inner := cv.Panel(cxLogBox, "Log", screen.ColField)
	cv.Noise(inner, screen.Hash("cx-log"), screen.GrainPanel)
	cv.Lines(inner, c.log, c.logScroll, screen.ColText)
	// Command line and status.
	cv.Text(8, cxCmdBox.Min.Y+7, "Command:", screen.ColText)
	cv.Field(cxCmdBox, u.field("cmdline"), "", u.focus == "cmdline", u.selAll && u.focus == "cmdline")
	cv.Fill(image.Rect(0, 756, ScreenW, ScreenH), screen.RGB(0xd4, 0xd4, 0xd2))
	cv.TextClip(8, 768, u.status, screen.ColText, image.Rect(0, 756, ScreenW, ScreenH))
}

func (c *chimerax) renderGraphics(cv *screen.Canvas) {
	box := cxGraphicsBox
	r, g, b := hexRGB(c.bg)
	cv.Fill(box, screen.RGB(r, g, b))
	// Seed the texture from the visual state so that it changes with it.
	var sb strings.Builder
	fmt.Fprintf(&sb, "%s|%s|%v|%.3f|%.3f|%.3f|%.3f", c.bg, c.lighting, c.silhouettes, c.rot[0], c.rot[1], c.rot[2], c.zoom)
	for _, m := range c.models {
		fmt.Fprintf(&sb, "|%s %s %v %v %v %s %d", m.Name, m.Style, m.AtomsShown, m.Cartoon, m.Surface, m.Color, m.HBonds)
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
		col       color3
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
		if m.Surface && p.i%3 == 0 {
			cv.Disc(p.px, p.py, 16*c.zoom, screen.RGB(screen.Scale8(p.col.r, 0.8), screen.Scale8(p.col.g, 0.8), screen.Scale8(p.col.b, 0.8)), shade, box)
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
				col := screen.RGB(b.col.r, b.col.g, b.col.b)
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
				cv.Line(a.px, a.py, b.px, b.py, screen.RGB(a.col.r, a.col.g, a.col.b), w, box)
			}
		}
		if m.HBonds > 0 {
			for k := 0; k < m.HBonds && len(pts) > 10; k++ {
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
		col := screen.RGB(screen.Scale8(p.col.r, light), screen.Scale8(p.col.g, light), screen.Scale8(p.col.b, light))
		cv.Disc(p.px, p.py, rad, col, shade, box)
		if c.silhouettes && rad > 2 {
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
