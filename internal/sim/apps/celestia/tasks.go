package celestia

import (
	"fmt"

	tg "github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// Tasks returns the simulator's Celestia tasks (see package taskgen);
// answers come from the simulated catalogue.
func Tasks() (tg.Set, error) {
	set := tg.Set{App: Spec(), Launch: tg.O("func", "launch", "wait", 10, "command", "LD_LIBRARY_PATH=/home/user/6.5.0/gcc_64/lib /app/bin/celestia-qt6 «PORTLIKE»", "shell", true)}
	const gotoF = "Celestia Go to object field"
	dist := func(name string) string { return "lambda dump: dump['entity']['" + name + "']['distance']" }
	goTo := func(name string) []tg.Step {
		return []tg.Step{tg.Click(gotoF, "I will travel there with the Go to object field."), tg.Enter(name)}
	}
	cat := func(name string) *celBody { b, _ := celestiaBody(name); return b }
	set.Add("S01", 5, "Go to Mars in Celestia.", nil,
		[]tg.Obj{tg.InfoPred(dist("Mars"), 0, tg.Near(50000))},
		append(goTo("Mars"), tg.Done("The view is centred on Mars."))...)
	set.Add("S02", 5, "Set the Julian date to 2451545 in Celestia.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['time']['value']", 2451545, tg.Near(0.1))},
		tg.Click("Celestia Julian date field", "The date is set in the Julian date field."),
		tg.Hotkey("The field holds the current date, so I select it first.", "ctrl", "a"), tg.Enter("2451545"), tg.Done(""))
	set.Add("S03", 5, "Make simulation time run 100 times faster than real time in Celestia.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['time']['scale']", 100, tg.Near(0.001))},
		tg.Click("Celestia 10x Faster button", "Each click multiplies the time rate by 10."),
		tg.Click("Celestia 10x Faster button", "Once more to reach 100x."), tg.Done(""))
	set.Add("S04", 5, "Pause the simulation time in Celestia.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['time']['pause']", true)},
		tg.Click("Celestia Pause button", ""), tg.Done(""))
	set.Add("S05", 5, "Show planet orbits and planet labels in Celestia.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['config']['render']['orbits']", true), tg.Info("lambda dump: dump['config']['label']['planet']", true)},
		tg.Click("Celestia Orbits checkbox", ""), tg.Click("Celestia Planet Labels checkbox", ""), tg.Done(""))
	set.Add("S06", 5, "Display the constellation lines and the constellation boundaries in Celestia.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['config']['render']['diagrams']", true), tg.Info("lambda dump: dump['config']['render']['boundaries']", true)},
		tg.Click("Celestia Constellation Lines checkbox", ""), tg.Click("Celestia Constellation Boundaries checkbox", ""), tg.Done(""))
	set.Add("S07", 10, "Go to Jupiter and make time run backwards in Celestia.", nil,
		[]tg.Obj{tg.InfoPred(dist("Jupiter"), 0, tg.Near(400000)), tg.InfoPred("lambda dump: dump['time']['scale']", -1, tg.Near(0.001))},
		append(goTo("Jupiter"), tg.Click("Celestia Reverse Time button", "Now reverse the time."), tg.Done(""))...)
	titan := fmt.Sprintf("%.0f", cat("Titan").Radius)
	set.Add("S08", 5, "What is the radius of Titan in kilometres according to Celestia? Submit the integer value via ANS.", nil,
		[]tg.Obj{tg.StopAns(titan)},
		append(goTo("Titan"), tg.Answer(titan, "The information overlay shows Radius: "+titan+" km."))...)
	set.Add("S09", 5, "Switch the star style to scaled discs in Celestia.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['config']['starStyle']", 2)},
		tg.Click("Celestia Scaled Discs radio", ""), tg.Done(""))
	set.Add("S10", 5, "Set the texture resolution to high in Celestia.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['config']['resolution']", 2)},
		tg.Click("Celestia High Texture radio", ""), tg.Done(""))
	set.Add("S11", 5, "Go to the exoplanet Kepler-452b in Celestia.", nil,
		[]tg.Obj{tg.StopFail()},
		append(goTo("Kepler-452b"), tg.Fail("Celestia reports that the object is not found."))...)
	set.Add("S12", 10, "Go to the Moon, show the ecliptic grid and make time run 10 times faster in Celestia.", nil,
		[]tg.Obj{tg.InfoPred(dist("Moon"), 0, tg.Near(20000)), tg.Info("lambda dump: dump['config']['render']['eclipticGrid']", true),
			tg.InfoPred("lambda dump: dump['time']['scale']", 10, tg.Near(0.001))},
		append(goTo("Moon"), tg.Click("Celestia Ecliptic Grid checkbox", ""), tg.Click("Celestia 10x Faster button", ""), tg.Done(""))...)
	marsRot := fmt.Sprintf("%.2f", cat("Mars").Rotation)
	set.Add("S13", 5, "What is the sidereal rotation period of Mars in hours according to Celestia? Submit it with two decimals via ANS.", nil,
		[]tg.Obj{tg.StopAns(marsRot)},
		append(goTo("Mars"), tg.Answer(marsRot, "The overlay shows a sidereal rotation period of "+marsRot+" hours."))...)
	set.Add("S14", 10, "Observe Saturn from its moon Titan with moon labels shown in Celestia.", nil,
		[]tg.Obj{tg.InfoPred(dist("Titan"), 0, tg.Near(15000)), tg.Info("lambda dump: dump['entity']['Saturn']['visible']", true),
			tg.Info("lambda dump: dump['config']['label']['moon']", true)},
		append(goTo("Titan"), tg.Click("Celestia Moon Labels checkbox", ""), tg.Done(""))...)
	// The dump holds only the queried objects: each task queries those
	// its checks read, as the real task files do.
	queries := map[string][]string{"S01": {"Mars"}, "S07": {"Jupiter"}, "S12": {"Moon"}, "S14": {"Titan", "Saturn"}}
	for _, t := range set.Tasks {
		t.Pre = []tg.Obj{tg.O("func", "opt", "depth", 6)} // every real Celestia task limits the a11y tree
		for _, name := range queries[t.ID] {
			t.Query = append(t.Query, tg.O("name", name, "type", selectionType(cat(name))))
		}
	}
	return set, nil
}
