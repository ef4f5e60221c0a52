package chimerax

import (
	"strconv"
	"strings"

	tg "github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// Keys of the states dump (see session.go) the tasks check.
const (
	model1 = "_state_containers.models._models.(1,)."
	view1  = model1 + "_atoms_drawing._draw_shape.bindings._opengl_context.window.view."
)

// Tasks returns the simulator's ChimeraX tasks (see package taskgen), set
// up and checked as the benchmark's are: the setup clears ChimeraX's
// history and UI state, launches it with the REST server, clears the log,
// opens a structure and turns it by 1°; the checks read the states dump
// (literal keys, key lambdas, find lambdas, patterns) and info's log
// lines. Expected values come from the simulated structures.
func Tasks() (tg.Set, error) {
	set := tg.Set{App: Spec(), Launch: tg.O("func", "launch", "wait", 7.5, "command", []string{"chimerax", "--cmd", "remotecontrol rest start json true port «PORTLIKE»"})}
	const (
		cmdline = "ChimeraX command line"
		runCmd  = "I will use the command line."
		molTab  = "ChimeraX Molecule Display tab"
		gfxTab  = "ChimeraX Graphics tab"
	)
	pre := []tg.Obj{
		tg.O("func", "execute", "command", []string{"rm", "/home/user/.local/share/ChimeraX/commands", "/home/user/.local/share/ChimeraX/file_history", "/home/user/.local/share/ChimeraX/preregistration"}),
		tg.O("func", "execute", "command", "rm -f /home/user/.config/ChimeraX/ui-*", "shell", true),
	}
	clearLog := tg.O("func", "clear_log")
	turn := func(axis string, angle int) tg.Obj { return tg.O("func", "turn", "axis", axis, "angle", angle) }
	open := func(name string) []tg.Obj {
		return []tg.Obj{clearLog, tg.O("func", "open", "name", name), turn("y", 1)}
	}
	noModel2 := tg.States("lambda key: key.startswith('_state_containers.models._models.(2,)')", nil)
	find := func(find, key string, value any) tg.Obj {
		return tg.Obj{{K: "type", V: "states"}, {K: "find", V: find}, {K: "key", V: key}, {K: "value", V: value}}
	}
	findPattern := func(find, key, pattern string) tg.Obj {
		return tg.Obj{{K: "type", V: "states"}, {K: "find", V: find}, {K: "key", V: key}, {K: "pattern", V: pattern}}
	}
	sibling := func(path ...string) string {
		q := ""
		for _, p := range path {
			q += ", '" + p + "'"
		}
		return "lambda key: '.'.join(key.split('.')[:-1] + [" + q[2:] + "])"
	}
	// after replays commands on a fresh session set up as the tasks are.
	after := func(name string, cmds ...string) *chimerax {
		c := newChimeraX()
		for _, cmd := range append([]string{"open " + name, "turn y 1"}, cmds...) {
			c.run(nil, cmd, false)
		}
		return c
	}
	rescolor := func(c *chimerax) []string {
		res := &cxResult{}
		c.info("rescolor /a", "", res)
		var lines []string
		for _, n := range res.notes {
			lines = append(lines, splitLines(n)...)
		}
		return lines
	}

	set.Add("S01", 5, "Fetch the structure 2OLX from the PDB in ChimeraX.", []tg.Obj{clearLog},
		[]tg.Obj{tg.States(model1+"_name", "2olx"), noModel2},
		tg.Click(cmdline, runCmd), tg.Enter("open 2olx"), tg.Done("The log shows 2olx was fetched."))
	sphere := after("1crn", "show atoms", "style sphere")
	lo, _, _ := sphere.bounds(sphere.models[0])
	set.Add("S02", 5, "Show all atoms of the open model in sphere style in ChimeraX.", open("1crn"),
		[]tg.Obj{tg.States(model1+"_redraw_needed.cached_drawing_bounds.xyz_min", vector32(lo[:]...).String())},
		tg.Click(molTab, "The display buttons are on the Molecule Display toolbar."),
		tg.Click("ChimeraX Show Atoms button", ""), tg.Click("ChimeraX Sphere button", ""), tg.Done(""))
	set.Add("S03", 5, "Color the open model red in ChimeraX.", open("2olx"),
		[]tg.Obj{tg.Info("rescolor /A", rescolor(after("2olx", "color red")))},
		tg.Click(cmdline, runCmd), tg.Enter("color red"), tg.Done("The model is red now."))
	set.Add("S04", 5, "Change the background color to white in ChimeraX.", open("4hhb"),
		[]tg.Obj{tg.States(view1+"_background_rgba", rgba("#ffffff").String())},
		tg.Click(gfxTab, "Background colors are on the Graphics toolbar."), tg.Click("ChimeraX White Background button", ""), tg.Done(""))
	set.Add("S05", 5, "Switch ChimeraX to soft lighting.", open("2olx"),
		[]tg.Obj{tg.States(view1+"_render.lighting.ambient_light_intensity", 1.5), tg.States(view1+"_render.lighting.multishadow", 64)},
		tg.Click(gfxTab, "Lighting presets are on the Graphics toolbar."), tg.Click("ChimeraX Soft Lighting button", ""), tg.Done(""))
	set.Add("S06", 10, "Close all open models and then fetch 6VXX from the PDB in ChimeraX.", open("1ubq"),
		[]tg.Obj{tg.States(model1+"_name", "6vxx"), noModel2},
		tg.Click(cmdline, runCmd), tg.Enter("close"), tg.Enter("open 6vxx"), tg.Done(""))
	atoms := strconv.Itoa(chimeraxStructure("3ppd").Atoms)
	set.Add("S07", 5, "How many atoms does the open structure have in ChimeraX? Submit the number via ANS.", open("3ppd"),
		[]tg.Obj{tg.StopAns(atoms)},
		tg.Click(cmdline, "The model information command reports the atom count."), tg.Enter("info models"),
		tg.Answer(atoms, "The log reports "+atoms+" atoms."))
	chains := strconv.Itoa(len(chimeraxStructure("4hhb").Chains))
	set.Add("S08", 5, "How many chains does the open structure have in ChimeraX? Submit the number via ANS.", open("4hhb"),
		[]tg.Obj{tg.StopAns(chains)},
		tg.Click(cmdline, "I will list the chains."), tg.Enter("info chains"), tg.Answer(chains, "The log lists "+chains+" chains."))
	set.Add("S09", 5, "Rotate the view back to the standard orientation in ChimeraX.",
		[]tg.Obj{clearLog, tg.O("func", "open", "name", "1dns"), turn("y", 114), turn("x", 514)},
		[]tg.Obj{tg.StatesPattern(view1+"_render.current_model_view_matrix._m44",
			`^\[\[ +1\. +0\. +0\. +0. +\] \[ +0\. +1\. +0\. +0. +\] \[ +0\. +0\. +1\. +0. +\]`)},
		tg.Click(cmdline, runCmd), tg.Enter("view"), tg.Done("The view command restores the standard orientation.")).
		Alternatives = []string{"ChimeraX Home View button"} // runs view too
	set.Add("S10", 5, "Show the hydrogen bonds of chain Z of the open structure in ChimeraX.", open("2olx"),
		[]tg.Obj{tg.StopFail()},
		tg.Click(cmdline, "First I check which chains exist."), tg.Enter("info chains"),
		tg.Fail("The structure has only chain A, there is no chain Z."))
	set.Add("S11", 10, "Show the molecular surface of the open model and color it with a rainbow scheme in ChimeraX.", open("2olx"),
		[]tg.Obj{find("lambda key, value: key.endswith(')._name') and value == '2olx_A SES surface'", sibling("_display"), true),
			tg.Info("rescolor /A", rescolor(after("2olx", "rainbow")))},
		tg.Click(molTab, "Surfaces and coloring are on the Molecule Display toolbar."),
		tg.Click("ChimeraX Show Surface button", ""), tg.Click("ChimeraX Rainbow button", ""), tg.Done(""))
	set.Add("S12", 5, "Clear the ChimeraX log.", []tg.Obj{clearLog, tg.O("func", "open", "name", "2olx")},
		[]tg.Obj{findPattern("lambda key, value: key.endswith('page_source')", "lambda key: key", "<body></body>")},
		tg.Click("ChimeraX Clear Log button", "The Home toolbar has a button for this."), tg.Done(""))
	set.Add("S13", 5, "Open the file ~/Downloads/lysozyme.pdb in ChimeraX.",
		[]tg.Obj{tg.O("func", "touch", "path", "/home/user/Downloads/lysozyme.pdb", "text", "HEADER    HYDROLASE (SIMULATED)\nEND\n"), clearLog},
		[]tg.Obj{tg.States(model1+"_name", "lysozyme.pdb")},
		tg.Click(cmdline, runCmd), tg.Enter("open ~/Downloads/lysozyme.pdb"), tg.Done(""))
	hbonds := "lambda key, value: key.endswith('._name') and value == 'hydrogen bonds'"
	set.Add("S14", 10, "Find the hydrogen bonds in the open structure in ChimeraX.", open("4hhb"),
		[]tg.Obj{find(hbonds, sibling("_pbond_drawing", "name"), "pbonds"),
			findPattern(hbonds, sibling("_pbond_drawing", "_opaque_color_count"), "^[1-9][0-9]*$")},
		tg.Click(cmdline, runCmd), tg.Enter("hbonds"), tg.Done("The log reports the hydrogen bonds found."))
	af := after("1crn", "close", "alphafold match A8Z1J3").models[0]
	residues := strconv.Itoa(af.Residues)
	set.Add("S15", 5, "How many residues does the open AlphaFold model have in ChimeraX? Submit the number via ANS.",
		[]tg.Obj{clearLog, tg.O("func", "alphafold_match", "name", "A8Z1J3"), turn("y", 1), tg.O("func", "color", "style", "bypolymer")},
		[]tg.Obj{tg.StopAns(residues)},
		tg.Click(cmdline, "The model information command reports the residue count."), tg.Enter("info models"),
		tg.Answer(residues, "The log reports "+residues+" residues."))
	for _, t := range set.Tasks {
		t.Pre = pre
	}
	return set, nil
}

// splitLines splits a log message into its lines, as the harness's info
// check does.
func splitLines(msg string) []string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(msg), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}
