// Package chimerax is part of codapipe's SIMULATOR (see package sim): the
// simulated UCSF ChimeraX, a molecule viewer with a toolbar (Home,
// Molecule Display, Graphics tabs), a graphics window, a log and a
// command line, and ChimeraX's REST server (/chimerax/run,
// /chimerax/state). Structures are simulated: any 4-character PDB id can
// be fetched, and its atom, residue and chain counts are fixed functions
// of the id.
package chimerax

import (
	"encoding/json"
	"fmt"
	"image"
	"math"
	"net/url"
	"path"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Name is the app's name, as task files spell their "type".
const Name = "ChimeraX"

// Spec describes the simulated ChimeraX, for a machine's catalogue: its
// program, its layout, its configuration folders.
func Spec() desktop.AppSpec {
	return desktop.AppSpec{
		Name: Name, Programs: []string{"chimerax", "chimerax-*", "chimerax.exe"}, Elements: layout(),
		Files: map[string]string{
			desktop.HomeDir + "/.config/ChimeraX/":                  "",
			desktop.HomeDir + "/.local/share/ChimeraX/":             "",
			desktop.HomeDir + "/.local/share/ChimeraX/commands":     "open 1a0m\n",
			desktop.HomeDir + "/.local/share/ChimeraX/file_history": "",
			"/app/bin/chimerax":                                     "#!/bin/sh\n# simulated\n",
		},
		Start: func(u *desktop.UI, args []string) desktop.App {
			c := newChimeraX()
			c.launchArgs(u, args)
			return c
		},
	}
}

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
func (c *chimerax) run(u *desktop.UI, line string) *cxResult {
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
			u.SetStatus(res.errors[len(res.errors)-1])
		case len(res.info) > 0:
			u.SetStatus(res.info[len(res.info)-1])
		default:
			u.SetStatus("")
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

func (c *chimerax) exec(u *desktop.UI, cmd string, res *cxResult) {
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
	// needModelsAndArg is needModels for a command that needs an argument.
	needModelsAndArg := func(what string) bool {
		if !needModels() {
			return false
		}
		if len(args) == 0 {
			res.errorf("Missing %s", what)
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
		if !needModelsAndArg("style: stick, sphere or ball") {
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
		if !needModelsAndArg("color") {
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
			if err := u.WriteFile(args[0], c.sessionText()); err != nil {
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

func (c *chimerax) open(u *desktop.UI, name string, res *cxResult) {
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
		p, content := name, ""
		if u != nil {
			p = u.Abs(name)
			var ok bool
			if content, ok = u.ReadFile(p); !ok {
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
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z') {
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

// State is the flat state dump (GET /chimerax/state).
func (c *chimerax) State() map[string]any {
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
		"log.tail":           append([]string{}, c.log[max(0, len(c.log)-12):]...),
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

// Serve serves /chimerax/run and /chimerax/state.
func (c *chimerax) Serve(_ *desktop.UI, _ string, p string, q url.Values, body []byte) ([]byte, int, bool) {
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
				return desktop.JSONError("bad JSON body: " + err.Error()), 400, true
			}
			cmd = req.Command
		}
		if cmd == "" {
			return desktop.JSONError("missing command"), 400, true
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
		return desktop.JSON(out), 200, true
	case "/chimerax/state", "/chimerax/states":
		return desktop.JSON(c.State()), 200, true
	}
	return nil, 0, false
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func (c *chimerax) launchArgs(u *desktop.UI, args []string) {
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
	u.SetStatus("")
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

func layout() []desktop.Element {
	var l []desktop.Element
	add := func(id, label, kind, caption string, r image.Rectangle) {
		l = append(l, desktop.Element{ID: id, Label: label, Kind: kind, Caption: caption, Box: r})
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

// Visible shows the toolbar buttons of the open toolbar tab only.
func (c *chimerax) Visible(id string) bool {
	if rest, ok := strings.CutPrefix(id, "tb-"); ok {
		return strings.HasPrefix(rest, c.tab+"-")
	}
	return true
}

// Checked: the Silhouettes button toggles.
func (c *chimerax) Checked(id string) (bool, bool) {
	if id == cxButtonID("graphics", "Silhouettes") {
		return c.silhouettes, true
	}
	return false, false
}

// Click opens toolbar tabs and runs the buttons' commands.
func (c *chimerax) Click(u *desktop.UI, el desktop.Element, button string, clicks int, pt image.Point) {
	if button != "left" {
		return
	}
	if tab, ok := strings.CutPrefix(el.ID, "tab-"); ok {
		c.tab = tab
		return
	}
	if el.Kind == "button" {
		cmd := cxButtonCommand[el.Caption]
		if cmd == "graphics silhouettes toggle" {
			cmd = "graphics silhouettes " + strconv.FormatBool(!c.silhouettes)
		}
		c.run(u, cmd)
	}
}

// Submit runs the command line.
func (c *chimerax) Submit(u *desktop.UI, id, text string) bool {
	if id == "cmdline" {
		c.run(u, text)
	}
	return false // ChimeraX keeps the command, selected
}

// Shortcut: the simulated ChimeraX has no shortcuts.
func (c *chimerax) Shortcut(u *desktop.UI, keys []string) {}

// Scroll scrolls the log and zooms the graphics window.
func (c *chimerax) Scroll(u *desktop.UI, el desktop.Element, dx, dy int) {
	switch el.ID {
	case "log":
		c.logScroll = max(0, min(len(c.log), c.logScroll+dy))
	case "graphics":
		c.zoom = math.Max(0.05, math.Min(50, c.zoom*math.Pow(1.1, float64(dy))))
	}
}

// Drag on the graphics window rotates the view.
func (c *chimerax) Drag(u *desktop.UI, el desktop.Element, from, to image.Point) {
	if el.ID != "graphics" {
		return
	}
	c.rot[1] = normDeg(c.rot[1] + float64(to.X-from.X)*0.5)
	c.rot[0] = normDeg(c.rot[0] + float64(to.Y-from.Y)*0.5)
}
