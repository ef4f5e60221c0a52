package chimerax

import (
	"strconv"

	tg "github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// Tasks returns the simulator's ChimeraX tasks (see package taskgen);
// counts come from the simulated structures.
func Tasks() (tg.Set, error) {
	set := tg.Set{App: Spec(), Launch: tg.O("func", "launch", "wait", 7.5, "command", []string{"chimerax", "--cmd", "remotecontrol rest start json true port «PORTLIKE»"})}
	const (
		cmdline = "ChimeraX command line"
		runCmd  = "I will use the command line."
		molTab  = "ChimeraX Molecule Display tab"
		gfxTab  = "ChimeraX Graphics tab"
	)
	rmUI := tg.O("func", "execute", "command", "rm -f /home/user/.config/ChimeraX/ui-*", "shell", true)
	clearLog := tg.O("func", "clear_log")
	cxOpen := func(name string) tg.Obj { return tg.O("func", "open", "name", name) }
	open := func(name string) []tg.Obj { return []tg.Obj{clearLog, cxOpen(name)} }
	set.Add("S01", 5, "Fetch the structure 2OLX from the PDB in ChimeraX.", []tg.Obj{clearLog},
		[]tg.Obj{tg.States("_state_containers.models._models.(1,)._name", "2olx"), tg.States("models.count", 1)},
		tg.Click(cmdline, runCmd), tg.Enter("open 2olx"), tg.Done("The log shows 2olx was fetched."))
	set.Add("S02", 5, "Show all atoms of the open model in sphere style in ChimeraX.", open("1crn"),
		[]tg.Obj{tg.States("models.(1,).atoms_shown", true), tg.States("models.(1,).style", "sphere")},
		tg.Click(molTab, "The display buttons are on the Molecule Display toolbar."),
		tg.Click("ChimeraX Show Atoms button", ""), tg.Click("ChimeraX Sphere button", ""), tg.Done(""))
	set.Add("S03", 5, "Color the open model red in ChimeraX.", open("3ppd"),
		[]tg.Obj{tg.States("models.(1,).color", "#ff0000")},
		tg.Click(cmdline, runCmd), tg.Enter("color red"), tg.Done("The model is red now."))
	set.Add("S04", 5, "Change the background color to white in ChimeraX.", open("4hhb"),
		[]tg.Obj{tg.States("view.background", "#ffffff")},
		tg.Click(gfxTab, "Background colors are on the Graphics toolbar."), tg.Click("ChimeraX White Background button", ""), tg.Done(""))
	set.Add("S05", 5, "Switch ChimeraX to soft lighting.", open("2olx"),
		[]tg.Obj{tg.States("view.lighting", "soft")},
		tg.Click(gfxTab, "Lighting presets are on the Graphics toolbar."), tg.Click("ChimeraX Soft Lighting button", ""), tg.Done(""))
	set.Add("S06", 10, "Close all open models and then fetch 6VXX from the PDB in ChimeraX.", open("1ubq"),
		[]tg.Obj{tg.States("models.count", 1), tg.States("models.(1,).name", "6vxx")},
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
	set.Add("S09", 5, "Rotate the view by 90 degrees about the y axis in ChimeraX.", open("1dns"),
		[]tg.Obj{tg.States("view.turn.y", 90), tg.States("view.turn.x", 0)},
		tg.Click(cmdline, runCmd), tg.Enter("turn y 90"), tg.Done(""))
	set.Add("S10", 5, "Show the hydrogen bonds of chain Z of the open structure in ChimeraX.", open("2olx"),
		[]tg.Obj{tg.StopFail()},
		tg.Click(cmdline, "First I check which chains exist."), tg.Enter("info chains"),
		tg.Fail("The structure has only chain A, there is no chain Z."))
	set.Add("S11", 10, "Show the molecular surface of the open model and color it with a rainbow scheme in ChimeraX.", open("1crn"),
		[]tg.Obj{tg.States("models.(1,).surface", true), tg.States("models.(1,).color", "rainbow")},
		tg.Click(molTab, "Surfaces and coloring are on the Molecule Display toolbar."),
		tg.Click("ChimeraX Show Surface button", ""), tg.Click("ChimeraX Rainbow button", ""), tg.Done(""))
	set.Add("S12", 5, "Clear the ChimeraX log.", []tg.Obj{cxOpen("2olx")},
		[]tg.Obj{tg.States("log.lines", 0)},
		tg.Click("ChimeraX Clear Log button", "The Home toolbar has a button for this."), tg.Done(""))
	set.Add("S13", 5, "Open the file ~/Downloads/lysozyme.pdb in ChimeraX.",
		[]tg.Obj{tg.O("func", "touch", "path", "/home/user/Downloads/lysozyme.pdb", "text", "HEADER    HYDROLASE (SIMULATED)\nEND\n"), clearLog},
		[]tg.Obj{tg.States("models.(1,).name", "lysozyme.pdb")},
		tg.Click(cmdline, runCmd), tg.Enter("open ~/Downloads/lysozyme.pdb"), tg.Done(""))
	set.Add("S14", 10, "Find the hydrogen bonds in the open structure in ChimeraX.", open("4hhb"),
		[]tg.Obj{tg.StatesPattern("models.(1,).hbonds", "^[1-9][0-9]*$")},
		tg.Click(cmdline, runCmd), tg.Enter("hbonds"), tg.Done("The log reports the hydrogen bonds found."))
	for _, t := range set.Tasks {
		t.Pre = []tg.Obj{rmUI}
	}
	return set, nil
}
