package chimerax

// The simulated session as State carries it, and ServeState: the REST
// server's commands that only read the session, answered by the same
// Serve on the session rebuilt from a state.

import (
	"encoding/json"
	"fmt"
	"net/url"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
)

// cxState is what State carries: every field of the running app but the
// coordinates cache (which the models determine) and files, so that
// restore gives back an app that answers every command as this one does.
// It is compact: the states dump, the info command's lines and the
// rendering are derived from it by the app's own code.
type cxState struct {
	Models       []cxModel    `json:"models"`
	Background   string       `json:"background"`
	Lighting     string       `json:"lighting"` // the last lighting preset
	Light        cxLighting   `json:"light"`
	Silhouette   cxSilhouette `json:"silhouette"`
	Rotation     [3]float64   `json:"rotation"`
	Zoom         float64      `json:"zoom"`
	Selection    []cxSelected `json:"selection"`
	Log          []string     `json:"log"`
	LogScroll    int          `json:"log_scroll"`
	Tab          string       `json:"tab"` // the open toolbar tab
	RestPort     int          `json:"rest_port"`
	CLIDestroyed bool         `json:"cli_destroyed"`
}

// cxSelected is the selection of one model: its id and the ranges
// [from, to) of the selected atoms' indexes in the model's atoms.
type cxSelected struct {
	Model int      `json:"model"`
	Atoms [][2]int `json:"atoms"`
}

// State is the session and the window (cxState) as plain JSON values:
//
//	models        the open models (id, name, atom/residue/water counts,
//	              chains, style, what is shown, color, submodels)
//	background, lighting, light, silhouette, rotation, zoom   the view
//	selection     the selected atoms per model
//	log           the Log's lines; log_scroll how far it is scrolled up
//	tab           the open toolbar tab
//	rest_port, cli_destroyed   the REST server's port, the states
//	              bundle's destroy
//
// ServeState rebuilds the session from it to answer the states dump and
// info.
func (c *chimerax) State() map[string]any {
	st := cxState{
		Background: c.bg, Lighting: c.lighting, Light: c.light, Silhouette: c.sil, Rotation: c.rot, Zoom: c.zoom,
		Log: c.log, LogScroll: c.logScroll, Tab: c.tab, RestPort: c.restPort, CLIDestroyed: c.cliDestroyed,
	}
	for _, m := range c.models {
		st.Models = append(st.Models, *m)
	}
	for _, s := range c.sel {
		sel := cxSelected{Model: s.model.ID}
		for i, x := range s.idx {
			if i > 0 && x == s.idx[i-1]+1 {
				sel.Atoms[len(sel.Atoms)-1][1] = x + 1
				continue
			}
			sel.Atoms = append(sel.Atoms, [2]int{x, x + 1})
		}
		st.Selection = append(st.Selection, sel)
	}
	// Through JSON: plain values, shared with nothing, the same as a
	// screenshot's state chunk decodes to. The fields are plain and their
	// numbers finite (parseFloat), so this does not fail; if it did, the
	// state would say so and answer nothing.
	var out map[string]any
	b, err := json.Marshal(st)
	if err == nil {
		err = json.Unmarshal(b, &out)
	}
	if err != nil {
		return map[string]any{"error": "chimerax: encoding the state: " + err.Error()}
	}
	return out
}

// restore rebuilds the app from a state State returned.
func restore(state map[string]any) (*chimerax, error) {
	if _, ok := state["models"]; !ok {
		return nil, fmt.Errorf("not a ChimeraX state")
	}
	b, err := json.Marshal(state)
	if err != nil {
		return nil, err
	}
	var st cxState
	if err := json.Unmarshal(b, &st); err != nil {
		return nil, err
	}
	c := newChimeraX()
	c.bg, c.lighting, c.light, c.sil, c.rot, c.zoom = st.Background, st.Lighting, st.Light, st.Silhouette, st.Rotation, st.Zoom
	c.log, c.logScroll, c.tab, c.restPort, c.cliDestroyed = st.Log, st.LogScroll, st.Tab, st.RestPort, st.CLIDestroyed
	c.models = nil
	for i := range st.Models {
		c.models = append(c.models, &st.Models[i])
	}
	for _, sel := range st.Selection {
		var m *cxModel
		for _, x := range c.models {
			if x.ID == sel.Model {
				m = x
			}
		}
		if m == nil {
			return nil, fmt.Errorf("the selection has atoms of #%d, which is not open", sel.Model)
		}
		s := selection{model: m}
		atoms := m.atoms()
		for _, r := range sel.Atoms {
			if r[0] < 0 || r[0] >= r[1] || r[1] > len(atoms) {
				return nil, fmt.Errorf("selected atoms %v of #%d out of range", r, m.ID)
			}
			for i := r[0]; i < r[1]; i++ {
				s.atoms = append(s.atoms, atoms[i])
				s.idx = append(s.idx, i)
			}
		}
		c.sel = append(c.sel, s)
	}
	return c, nil
}

// ServeState answers, from a state State returned (see
// desktop.AppSpec.ServeState), the REST server's /run requests whose
// commands only read the session — info (any target) and the states
// bundle's states, whose files go to files — by running Serve on the
// session rebuilt from the state. ok is false for a request with any
// other command (one that changes the session: its reply alone would not
// be what the machine answers next), another path, or a state that is
// not ChimeraX's. The states command takes its folder to exist (the
// state does not carry the file system).
func ServeState(files desktop.Files, state map[string]any, method, p string, q url.Values, body []byte) ([]byte, int, bool) {
	if p != "/run" {
		return nil, 0, false
	}
	for _, line := range restCommands(method, q, body) {
		for _, cmd := range strings.Split(line, ";") {
			if words := strings.Fields(cmd); len(words) > 0 && !readOnlyVerbs[strings.ToLower(words[0])] {
				return nil, 0, false
			}
		}
	}
	c, err := restore(state)
	if err != nil {
		return nil, 0, false
	}
	c.files = files
	return c.Serve(nil, method, p, q, body)
}

// readOnlyVerbs are the commands that change nothing the session shows
// but the log they write to.
var readOnlyVerbs = map[string]bool{"info": true, "states": true}
