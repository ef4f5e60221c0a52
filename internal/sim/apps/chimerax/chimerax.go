// Package chimerax is part of codapipe's SIMULATOR (see package sim): the
// simulated UCSF ChimeraX, a molecule viewer with a toolbar (Home,
// Molecule Display, Graphics tabs), a graphics window, a log and a
// command line, ChimeraX's REST server (see server.go) and the states
// command of the chimerax-states bundle (see session.go). Structures are
// simulated: any 4-character PDB id can be fetched, and its atom, residue
// and chain counts are fixed functions of the id.
package chimerax

import (
	"fmt"
	"image"
	"math"
	"path"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Name is the app's name, as task files spell their "type".
const Name = "ChimeraX"

// Folders of ChimeraX's download caches (fetched PDB entries, AlphaFold
// models) in the user's home.
const (
	PDBCache       = desktop.HomeDir + "/Downloads/ChimeraX/PDB"
	AlphaFoldCache = desktop.HomeDir + "/Downloads/ChimeraX/AlphaFold"
)

// Spec describes the simulated ChimeraX, for a machine's catalogue: its
// program, its layout, its configuration folders and download caches
// (with the AlphaFold model of A8Z1J3 the benchmark's VMs have cached).
func Spec() desktop.AppSpec {
	return desktop.AppSpec{
		Name: Name, Programs: []string{"chimerax", "chimerax-*", "chimerax.exe"}, Elements: layout(),
		Files: map[string]string{
			desktop.HomeDir + "/.config/ChimeraX/":                  "",
			desktop.HomeDir + "/.local/share/ChimeraX/":             "",
			desktop.HomeDir + "/.local/share/ChimeraX/commands":     "open 1a0m\n",
			desktop.HomeDir + "/.local/share/ChimeraX/file_history": "",
			desktop.HomeDir + "/Downloads/ChimeraX/":                "",
			PDBCache + "/":                                          "",
			AlphaFoldCache + "/":                                    "",
			alphaFoldFile("A8Z1J3"):                                 alphaFoldCIF("A8Z1J3"),
			"/app/bin/chimerax":                                     "#!/bin/sh\n# simulated\n",
		},
		ServeState: ServeState,
		Start: func(u *desktop.UI, args []string) desktop.App {
			c := newChimeraX()
			c.launchArgs(u, args)
			return c
		},
	}
}

// alphaFoldFile is where ChimeraX caches the AlphaFold database model of
// a UniProt entry.
func alphaFoldFile(uniprot string) string {
	return AlphaFoldCache + "/AF-" + uniprot + "-F1-model_v4.cif"
}

// alphaFoldCIF is the (simulated) mmCIF text of an AlphaFold model.
func alphaFoldCIF(uniprot string) string {
	id := "AF-" + uniprot + "-F1"
	return "data_" + id + "\n#\n_entry.id " + id + "\n#\n_struct.title \"AlphaFold monomer v2.0 prediction for " + uniprot +
		" (SIMULATOR)\"\n#\n_ma_data.name \"Model " + id + "\"\n#\n"
}

// cxModel is one open atomic structure.
type cxModel struct {
	ID         int       `json:"id"`
	Name       string    `json:"name"`
	Atoms      int       `json:"atoms"`
	Residues   int       `json:"residues"`
	Chains     []string  `json:"chains"`
	Waters     int       `json:"waters"`
	Hydrogens  int       `json:"hydrogens"`
	Style      string    `json:"style"` // stick, sphere, ball
	AtomsShown bool      `json:"atoms_shown"`
	Cartoon    bool      `json:"cartoon"`
	Color      string    `json:"color"`    // ribbon color: #rrggbb or bychain, rainbow, bypolymer
	Children   []cxChild `json:"children"` // submodels (N, K): surfaces, hydrogen bonds
}

// child returns the submodel with this name, or nil.
func (m *cxModel) child(name string) *cxChild {
	for i := range m.Children {
		if m.Children[i].Name == name {
			return &m.Children[i]
		}
	}
	return nil
}

// addChild adds a submodel with the next free id.
func (m *cxModel) addChild(ch cxChild) *cxChild {
	ch.ID = 1
	for _, x := range m.Children {
		ch.ID = max(ch.ID, x.ID+1)
	}
	m.Children = append(m.Children, ch)
	return &m.Children[len(m.Children)-1]
}

// removeChild closes the submodel with this name.
func (m *cxModel) removeChild(name string) {
	keep := m.Children[:0]
	for _, x := range m.Children {
		if x.Name != name {
			keep = append(keep, x)
		}
	}
	m.Children = keep
}

// surfaces reports whether the model's chain surfaces are shown.
func (m *cxModel) surfaces() bool {
	for _, ch := range m.Children {
		if ch.Display && strings.HasSuffix(ch.Name, " SES surface") {
			return true
		}
	}
	return false
}

// hbonds is the number of hydrogen bonds found (0: none).
func (m *cxModel) hbonds() int {
	if ch := m.child("hydrogen bonds"); ch != nil {
		return ch.Count
	}
	return 0
}

// selection is the selected atoms of one model.
type selection struct {
	model *cxModel
	atoms []cxAtom
	idx   []int // their indexes in model.atoms()
}

type chimerax struct {
	models       []*cxModel
	bg           string
	lighting     string // the last lighting preset (how the graphics look)
	light        cxLighting
	sil          cxSilhouette
	rot          [3]float64
	zoom         float64
	sel          []selection
	log          []string
	logScroll    int
	tab          string
	restPort     int
	cliDestroyed bool               // the states bundle's destroy: no command line
	cache        map[string][]atom3 // per model name: simulated coordinates
	// files is where the states command writes when no UI is given: the
	// files of ServeState's caller (nil for a running app, which writes
	// through its UI).
	files desktop.Files
}

func newChimeraX() *chimerax {
	return &chimerax{bg: "#000000", lighting: "default", light: defaultLighting(), sil: defaultSilhouette(),
		zoom: 1, tab: "home", cache: map[string][]atom3{},
		log: []string{"UCSF ChimeraX version: 1.9 (SIMULATOR)", "How to cite UCSF ChimeraX"}}
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

// cxError is the exception a command raised: ChimeraX's UserError for a
// command it refuses, or another Python exception.
type cxError struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}

// cxResult collects what one command line logged, by ChimeraX's log
// levels, and the exception that stopped it.
type cxResult struct {
	notes, warnings, errors []string
	err                     *cxError
	commands                int // commands that ran to the end
}

func (r *cxResult) infof(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

// errorf raises a UserError, which stops the command line.
func (r *cxResult) errorf(format string, args ...any) {
	if r.err == nil {
		r.err = &cxError{Type: "UserError", Message: fmt.Sprintf(format, args...)}
	}
}

// run executes a command line (commands separated by ';') and logs its
// messages; echo logs the command first, as the command line does (the
// REST server runs commands with log=False).
func (c *chimerax) run(u *desktop.UI, line string, echo bool) *cxResult {
	res := &cxResult{}
	line = strings.TrimSpace(line)
	if line == "" {
		return res
	}
	if echo {
		c.logf("> %s", line)
	}
	for _, cmd := range strings.Split(line, ";") {
		cmd = strings.TrimSpace(cmd)
		if cmd == "" {
			continue
		}
		c.exec(u, cmd, res)
		if res.err != nil {
			break // ChimeraX stops at the first error
		}
		res.commands++
	}
	for _, l := range res.notes {
		c.logf("%s", l)
	}
	for _, l := range res.warnings {
		c.logf("Warning: %s", l)
	}
	if res.err != nil {
		c.logf("Error: %s", res.err.Message)
	}
	if u != nil {
		switch {
		case res.err != nil:
			u.SetStatus(res.err.Message)
		case len(res.notes) > 0:
			u.SetStatus(lastLine(res.notes[len(res.notes)-1]))
		default:
			u.SetStatus("")
		}
	}
	return res
}

func lastLine(s string) string {
	s = strings.TrimRight(s, "\n")
	return s[strings.LastIndexByte(s, '\n')+1:]
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
	"mediumslateblue": "#7b68ee", "darkred": "#8b0000",
}

// parseColor returns a color name or #rgb/#rrggbb as lower-case #rrggbb.
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

// parseFloat parses a command's number; NaN and the infinities are
// invalid (the simulated session holds finite numbers only, so that its
// state encodes as JSON).
func parseFloat(s string) (float64, error) {
	f, err := strconv.ParseFloat(s, 64)
	if err == nil && (math.IsNaN(f) || math.IsInf(f, 0)) {
		return 0, fmt.Errorf("not a finite number: %q", s)
	}
	return f, err
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

// specVerbs are the commands whose first argument may be an atom spec.
var specVerbs = map[string]bool{
	"close": true, "show": true, "hide": true, "display": true, "~display": true, "cartoon": true, "~cartoon": true,
	"surface": true, "~surface": true, "style": true, "color": true, "colour": true, "rainbow": true,
	"select": true, "sel": true, "~select": true, "~sel": true, "hbonds": true, "~hbonds": true, "addh": true,
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
	// Optional leading atom spec, for the commands that take one.
	spec := ""
	if len(args) > 0 && isSpec(args[0]) && specVerbs[verb] {
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
		c.sel = nil
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
				c.surface(m, on, res)
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
				c.surface(m, on, res)
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
		case "bychain", "bypolymer", "rainbow":
		case "byelement", "byhetero": // atoms only: ribbons keep their color
			return
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
		c.lightingCmd(args, res)
	case "graphics":
		if len(args) >= 2 && strings.ToLower(args[0]) == "silhouettes" {
			b, ok := parseBool(args[1])
			if !ok {
				res.errorf("Expected true or false, got %q", args[1])
				return
			}
			c.sil.Enabled = b
			for i := 2; i+1 < len(args); i += 2 {
				v, err := parseFloat(args[i+1])
				if err != nil {
					res.errorf("Invalid %s value %q", args[i], args[i+1])
					return
				}
				switch strings.ToLower(args[i]) {
				case "width":
					c.sil.Thickness = v
				case "depthjump":
					c.sil.DepthJump = v
				}
			}
			return
		}
		res.errorf("Usage: graphics silhouettes true|false [width W] [depthJump D]")
	case "turn", "roll":
		axis, angle := "y", 90.0
		if verb == "roll" {
			angle = 1
		}
		if len(args) > 0 {
			axis = strings.ToLower(args[0])
		}
		if len(args) > 1 {
			a, err := parseFloat(args[1])
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
			v, err := parseFloat(args[0])
			if err != nil || v <= 0 {
				res.errorf("Invalid zoom factor %q", args[0])
				return
			}
			f = v
		}
		c.zoom = math.Max(0.05, math.Min(50, c.zoom*f))
	case "select", "sel", "~select", "~sel":
		if verb[0] == '~' || len(args) > 0 && strings.ToLower(args[0]) == "clear" {
			c.sel = nil
			return
		}
		if !needModels() {
			return
		}
		target := spec
		if target == "" && len(args) > 0 {
			target = args[0]
		}
		sel, err := c.selectSpec(target)
		if err != nil {
			res.errorf("%v", err)
			return
		}
		c.sel = sel
		n, r, ms := 0, 0, 0
		for _, s := range sel {
			n += len(s.atoms)
			r += len(distinctResidues(s.atoms))
			if len(s.atoms) > 0 {
				ms++
			}
		}
		res.infof("%d atoms, %d residues, %d models selected", n, r, ms)
	case "info":
		c.info(strings.ToLower(strings.Join(args, " ")), spec, res)
	case "hbonds", "~hbonds":
		if !needModels() {
			return
		}
		for _, m := range models {
			if verb == "~hbonds" {
				m.removeChild("hydrogen bonds")
				continue
			}
			n := 4 + int(screen.Hash("hb", m.Name)%uint64(max(8, m.Residues/2)))
			if ch := m.child("hydrogen bonds"); ch != nil {
				ch.Count, ch.Display = n, true
			} else {
				m.addChild(cxChild{Name: "hydrogen bonds", Display: true, Count: n})
			}
			res.infof("%d hydrogen bonds found", n)
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
			res.infof("Summary of feedback from adding hydrogens to %s #%d\n---\nnotes | No usable SEQRES records for %s (#%d) chain %s; guessing termini instead\nChain-initial residues that are actual N termini: \nChain-final residues that are actual C termini: \n%d hydrogens added", m.Name, m.ID, m.Name, m.ID, m.Chains[0], m.Hydrogens)
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
	case "states": // the chimerax-states bundle
		if len(args) != 2 {
			res.errorf("Missing or invalid arguments: usage: states dir_path filename")
			return
		}
		files := c.files
		if u != nil {
			files = u
		}
		if err := c.writeStates(files, args[0], args[1]); err != nil {
			res.err = &cxError{Type: "FileNotFoundError", Message: err.Error()}
		}
	case "destroy": // the chimerax-states bundle: disable the command line
		c.cliDestroyed = true
		if u != nil {
			u.SetField("cmdline", "")
		}
	case "clear": // the chimerax-states bundle: clear the file history
		if u != nil {
			if _, ok := u.ReadFile(desktop.HomeDir + "/.local/share/ChimeraX/file_history"); ok {
				_ = u.WriteFile(desktop.HomeDir+"/.local/share/ChimeraX/file_history", "")
			}
		}
	case "alphafold":
		if len(args) != 2 || strings.ToLower(args[0]) != "match" {
			res.errorf("Usage: alphafold match UNIPROT_ID")
			return
		}
		c.alphafoldMatch(u, strings.ToUpper(args[1]), res)
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
		res.infof("UCSF ChimeraX version: 1.9 (SIMULATOR)")
	default:
		res.errorf("Unknown command: %s", cmd)
	}
}

// lightingCmd is the lighting command: a preset and keyword options, or
// with no argument the report of the current parameters.
func (c *chimerax) lightingCmd(args []string, res *cxResult) {
	if len(args) == 0 {
		res.infof("%s", c.lightingReport())
		return
	}
	if len(args)%2 == 1 {
		mode := strings.ToLower(args[0])
		switch mode {
		case "simple", "soft", "full", "flat", "default", "gentle":
		default:
			res.errorf("Invalid lighting preset %q: expected default, full, soft, gentle, simple or flat", args[0])
			return
		}
		c.preset(mode)
		args = args[1:]
	}
	for i := 0; i+1 < len(args); i += 2 {
		key, val := strings.ToLower(args[i]), args[i+1]
		f, ferr := parseFloat(val)
		b, bok := parseBool(val)
		switch {
		case key == "shadows" && bok:
			c.light.Shadows = b
		case key == "depthcue" && bok:
			c.light.DepthCue = b
		case key == "intensity" && ferr == nil:
			c.light.Key = f
		case key == "fillintensity" && ferr == nil:
			c.light.Fill = f
		case key == "ambientintensity" && ferr == nil:
			c.light.Ambient = f
		case key == "multishadow" && ferr == nil:
			c.light.Multishadow = int(f)
		case key == "msmapsize" && ferr == nil:
			c.light.MSMapSize = int(f)
		case key == "msdepthbias" && ferr == nil:
			c.light.MSDepthBias = f
		case key == "depthbias" && ferr == nil:
			c.light.ShadowDepthBias = f
		default:
			res.errorf("Invalid lighting option %s %s", args[i], val)
			return
		}
	}
}

// surface shows or hides the molecular surfaces of the model's chains
// (one submodel per chain, made the first time).
func (c *chimerax) surface(m *cxModel, on bool, res *cxResult) {
	made := 0
	for _, ch := range m.Chains {
		name := m.Name + "_" + ch + " SES surface"
		if s := m.child(name); s != nil {
			s.Display = on
		} else if on {
			m.addChild(cxChild{Name: name, Display: true})
			made++
		}
	}
	if made > 0 {
		res.infof("%d surfaces computed for #%d", made, m.ID)
	}
}

// alphafoldMatch opens the AlphaFold database model of a UniProt entry
// from ChimeraX's cache, writing it there first when it is not cached.
func (c *chimerax) alphafoldMatch(u *desktop.UI, uniprot string, res *cxResult) {
	if len(uniprot) < 6 || len(uniprot) > 10 || !isAlnum(uniprot) {
		res.errorf("Invalid UniProt accession %q", uniprot)
		return
	}
	file := alphaFoldFile(uniprot)
	if u != nil {
		if _, cached := u.ReadFile(file); !cached {
			if err := u.WriteFile(file, alphaFoldCIF(uniprot)); err != nil {
				res.errorf("Cannot write %s: %v", file, err)
				return
			}
		}
	}
	st := chimeraxStructure("af-" + uniprot)
	st.Waters, st.Chains = 0, []string{"A"}
	m := c.addModel("AlphaFold "+uniprot, st)
	m.Color = "bypolymer"
	res.infof("1 AlphaFold model found using UniProt identifier: %s (UniProt %s)", uniprot, uniprot)
	res.infof("Opened AlphaFold %s containing %d atoms, %d residues (#%d)", uniprot, m.Atoms, m.Residues, m.ID)
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

// addModel opens a structure as a new model with the lowest free id.
func (c *chimerax) addModel(name string, st cxStruct) *cxModel {
	id := 1
	for taken := true; taken; {
		taken = false
		for _, m := range c.models {
			if m.ID == id {
				taken = true
				id++
			}
		}
	}
	m := &cxModel{ID: id, Name: name, Atoms: st.Atoms, Residues: st.Residues, Chains: st.Chains, Waters: st.Waters,
		Style: "stick", Cartoon: true, Color: "bypolymer"}
	if st.Residues < 20 {
		m.Cartoon, m.AtomsShown = false, true
	}
	c.models = append(c.models, m)
	return m
}

func (c *chimerax) open(u *desktop.UI, name string, res *cxResult) {
	var st cxStruct
	var mname string
	lower := strings.ToLower(name)
	switch {
	case len(name) == 4 && isAlnum(name) && !strings.Contains(name, "."):
		mname = lower
		st = chimeraxStructure(lower)
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
	m := c.addModel(mname, st)
	res.infof("%s title:\nSimulated structure %s [more info...]", mname, strings.ToUpper(mname))
	res.infof("Chain information for %s #%d\n---\nChain | Description\n%s", mname, m.ID, strings.Join(st.Chains, " "))
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

// selectSpec returns the atoms a spec covers, per model: all, #N, /A,
// #N/A, :HOH (or solvent), protein; "ligand" covers none (the simulated
// structures have no ligands).
func (c *chimerax) selectSpec(spec string) ([]selection, error) {
	var out []selection
	for _, m := range c.models {
		var keep func(a cxAtom) bool
		chainOf := func(s string) func(a cxAtom) bool {
			return func(a cxAtom) bool { return strings.EqualFold(a.Chain, s) && a.ResName != "HOH" }
		}
		prefix := "#" + strconv.Itoa(m.ID)
		switch {
		case spec == "" || spec == "all" || spec == prefix:
			keep = func(cxAtom) bool { return true }
		case strings.HasPrefix(spec, "/"):
			keep = chainOf(spec[1:])
		case strings.HasPrefix(spec, prefix+"/"):
			keep = chainOf(spec[len(prefix)+1:])
		case strings.EqualFold(spec, ":hoh") || spec == "solvent":
			keep = func(a cxAtom) bool { return a.ResName == "HOH" }
		case spec == "protein":
			keep = func(a cxAtom) bool { return a.ResName != "HOH" }
		case spec == "ligand" || strings.HasPrefix(spec, "#"):
			continue
		default:
			return nil, fmt.Errorf("Invalid atom specifier %q", spec)
		}
		s := selection{model: m}
		for i, a := range m.atoms() {
			if keep(a) {
				s.atoms = append(s.atoms, a)
				s.idx = append(s.idx, i)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

func distinctResidues(atoms []cxAtom) []cxAtom {
	var out []cxAtom
	for i, a := range atoms {
		if i == 0 || a.Chain != atoms[i-1].Chain || a.ResNum != atoms[i-1].ResNum {
			out = append(out, a)
		}
	}
	return out
}

// info is the info command: models, chains, sel (selected atoms, one line
// each), rescolor SPEC (each residue's ribbon color).
func (c *chimerax) info(what, spec string, res *cxResult) {
	switch {
	case what == "" || what == "models":
		if len(c.models) == 0 {
			res.infof("No models open")
			return
		}
		for _, m := range c.models {
			res.infof("model id #%d type AtomicStructure name %s", m.ID, m.Name)
			res.infof("#%d %s: %d atoms, %d residues, %d chains (%s)", m.ID, m.Name, m.Atoms, m.Residues,
				len(m.Chains), strings.Join(m.Chains, ","))
		}
	case what == "chains":
		for _, m := range c.models {
			for _, ch := range m.Chains {
				res.infof("chain id #%d/%s chain_id %s", m.ID, ch, ch)
			}
		}
		if len(c.models) == 0 {
			res.infof("No models open")
		}
	case what == "sel" || what == "selection":
		var lines []string
		for _, s := range c.sel {
			prefix := ""
			if len(c.models) > 1 {
				prefix = fmt.Sprintf("#!%d", s.model.ID)
			}
			for _, a := range s.atoms {
				lines = append(lines, fmt.Sprintf("atom id %s/%s:%d@%s idatm_type %s", prefix, a.Chain, a.ResNum, a.Name, a.Type))
			}
		}
		if len(lines) > 0 {
			res.infof("%s", strings.Join(lines, "\n"))
		}
	case what == "rescolor" || strings.HasPrefix(what, "rescolor "):
		target := spec
		if target == "" {
			target = strings.TrimSpace(strings.TrimPrefix(what, "rescolor"))
		}
		sel, err := c.selectSpec(target)
		if err != nil {
			res.errorf("%v", err)
			return
		}
		var lines []string
		for _, s := range sel {
			residues := distinctResidues(s.atoms)
			for i, r := range residues {
				if r.ResName == "HOH" {
					continue
				}
				chainIdx := max(0, indexOf(s.model.Chains, r.Chain))
				lines = append(lines, fmt.Sprintf("#%d/%s:%d color %s", s.model.ID, r.Chain, r.ResNum, s.model.residueColor(chainIdx, i, len(residues))))
			}
		}
		if len(lines) > 0 {
			res.infof("%s", strings.Join(lines, "\n"))
		}
	default:
		res.errorf("Unknown info target %q", what)
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

func (c *chimerax) sessionText() string {
	var b strings.Builder
	b.WriteString("# ChimeraX session (SIMULATOR)\n")
	for _, m := range c.models {
		fmt.Fprintf(&b, "model #%d %s atoms=%d\n", m.ID, m.Name, m.Atoms)
	}
	return b.String()
}

func (c *chimerax) launchArgs(u *desktop.UI, args []string) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--cmd" && i+1 < len(args):
			c.run(u, args[i+1], true)
			i++
		case strings.HasPrefix(a, "-"):
		default:
			if !strings.Contains(a, "«") {
				c.run(u, "open "+a, true)
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

// Visible shows the toolbar buttons of the open toolbar tab only, and no
// command line after the states bundle's destroy.
func (c *chimerax) Visible(id string) bool {
	if id == "cmdline" {
		return !c.cliDestroyed
	}
	if rest, ok := strings.CutPrefix(id, "tb-"); ok {
		return strings.HasPrefix(rest, c.tab+"-")
	}
	return true
}

// Checked: the Silhouettes button toggles.
func (c *chimerax) Checked(id string) (bool, bool) {
	if id == cxButtonID("graphics", "Silhouettes") {
		return c.sil.Enabled, true
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
			cmd = "graphics silhouettes " + strconv.FormatBool(!c.sil.Enabled)
		}
		c.run(u, cmd, true)
	}
}

// Submit runs the command line.
func (c *chimerax) Submit(u *desktop.UI, id, text string) bool {
	if id == "cmdline" && !c.cliDestroyed {
		c.run(u, text, true)
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
