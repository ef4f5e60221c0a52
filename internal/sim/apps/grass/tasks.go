package grass

import (
	"fmt"
	"math"
	"strconv"

	tg "github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// Tasks returns the simulator's GRASS GIS tasks (see package taskgen), set
// up as the benchmark's are (remove the locks, launch the GUI in
// world_latlong_wgs84, switch to the task's location, display a layer,
// set the scale) and checked on the real dump schema and through /gcmd;
// expected values come from the simulated maps, computed by the simulated
// modules.
func Tasks() (tg.Set, error) {
	set := tg.Set{App: Spec(), Launch: tg.O("func", "launch", "wait", 5, "command",
		`gnome-terminal -- /bin/bash -ic "FLASK_PORT=«PORTLIKE» grass --gui /home/user/grassdata/world_latlong_wgs84/PERMANENT"`, "shell", true)}
	const grassCon = "GRASS Console tab"
	console := func(cmds ...string) []tg.Step {
		out := []tg.Step{tg.Click(grassCon, "I will use the command console."), tg.Click("GRASS console", "")}
		for _, c := range cmds {
			out = append(out, tg.Enter(c))
		}
		return out
	}
	mapInit := func(location string) tg.Obj {
		return tg.O("func", "map", "grassdb", GRASSDB, "location", location, "mapset", PermanentMapset)
	}
	layer := func(name string) tg.Obj { return tg.O("func", "layer", "wait", 5, "query", tg.O("name", name)) }
	param := func(m, p string) string {
		return "lambda dump: [param for param in [item for item in dump['windows'] if item['name'] == '" + m +
			"@PERMANENT'][0]['_data'][1]['params'] if param['name'] == '" + p + "']"
	}
	paramIs := "lambda key, value: key[0]['value'] == value"
	hasLayer := "lambda key, value: any([item['name'] == value for item in key])"
	round6 := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }

	pie := newDatabase()[PiemonteLocation]

	set.Add("S01", 10, "Switch to the natural_earth_dataset project and display the countries vector map in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['layers']", "countries@PERMANENT", hasLayer)},
		append(console("g.mapset mapset=PERMANENT location=natural_earth_dataset", "d.vect map=countries"), tg.Done(""))...)
	set.Add("S02", 10, "Remove the displayed layer and display countries@PERMANENT instead in GRASS GIS.",
		nil, []tg.Obj{
			tg.InfoPred("lambda dump: dump['layers']", "natural_earth@PERMANENT", "lambda key, value: all([item['name'] != value for item in key])"),
			tg.InfoPred("lambda dump: dump['layers']", "countries@PERMANENT", hasLayer)},
		append(console("d.erase", "d.vect map=countries"), tg.Done(""))...).Init = []tg.Obj{mapInit(NaturalEarth), layer("natural_earth")}
	set.Add("S03", 5, "Zoom the GRASS GIS map display in once, halving its map scale.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['statusbar']['scale']", 25, "lambda key, value: abs(key - value) < 0.1")},
		tg.Click("GRASS Zoom In button", "The toolbar zooms in by a factor of 2."), tg.Done("")).Init =
		[]tg.Obj{mapInit(NaturalEarth), layer("countries"), tg.O("func", "scale", "scale", 50)}
	set.Add("S04", 10, "Set the computational region to 41°N–44°N, 22°E–29°E and zoom the map display to it in GRASS GIS.", nil,
		[]tg.Obj{
			tg.InfoPred("lambda dump: dump['region']['n']", 43.5, "lambda key, value: key > value"),
			tg.InfoPred("lambda dump: dump['region']['s']", 41.5, "lambda key, value: key < value"),
			tg.InfoPred("lambda dump: dump['region']['e']", 28, "lambda key, value: key > value"),
			tg.InfoPred("lambda dump: dump['region']['w']", 23, "lambda key, value: key < value"),
			tg.InfoPred("lambda dump: dump['region']['center_northing']", 42.5, "lambda key, value: abs(key - value) < 0.1")},
		append(console("g.region n=44 s=41 e=29 w=22"), tg.Click("GRASS Zoom to Region button", "Now fit the display to the region."), tg.Done(""))...).Init =
		[]tg.Obj{mapInit(NaturalEarth), layer("countries")}
	set.Add("S05", 5, "Display the railways of Piemonte (railroads) with a line width of 2 in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred(param("railroads", "width"), "2", paramIs)},
		append(console("d.vect map=railroads width=2"), tg.Done(""))...).Init = []tg.Obj{mapInit(PiemonteLocation), layer("boundary_region")}
	set.Add("S06", 5, "Display the provinces of Piemonte (boundary_region) filled in gray, RGB (191, 191, 191), in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred(param("boundary_region", "fill_color"), "191:191:191:255", paramIs)},
		append(console("d.vect map=boundary_region fill_color=191:191:191:255"), tg.Done(""))...).Init = []tg.Obj{mapInit(PiemonteLocation)}
	set.Add("S07", 5, "Display the fire stations of Piemonte (firestations) with the basic/marker icon in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred(param("firestations", "icon"), "basic/marker", paramIs)},
		append(console("d.vect map=firestations icon=basic/marker"), tg.Done(""))...).Init = []tg.Obj{mapInit(PiemonteLocation), layer("boundary_region")}
	set.Add("S08", 5, "Output the metadata of the boundary_region vector map in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['output']", "v.info map=boundary_region@PERMANENT", "lambda key, value: value in key")},
		append(console("v.info map=boundary_region@PERMANENT"), tg.Done(""))...).Init = []tg.Obj{mapInit(PiemonteLocation), layer("boundary_region")}
	n, _, _, _, _, _ := rasterStats(pie.rasters["lakes"].Data)
	set.Add("S09", 5, "Compute univariate statistics of the lakes raster map in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['output']", "n: "+strconv.Itoa(n), "lambda key, value: value in key")},
		append(console("r.univar map=lakes"), tg.Done(""))...).Init = []tg.Obj{mapInit(PiemonteLocation), layer("boundary_region")}
	selectJSON := func(m string) tg.Obj { return tg.O("map", m+"@PERMANENT", "format", "json") }
	set.Add("S10", 10, "Add a column named 'COLOR' of type varchar to the boundary_region vector map in GRASS GIS.", nil,
		[]tg.Obj{tg.DB("v.db.select", selectJSON("boundary_region"), "lambda out: out['info']['columns']",
			tg.O("name", "COLOR", "sql_type", "CHARACTER"),
			"lambda key, value: any([item['name'] == value['name'] and item['sql_type'] == value['sql_type'] for item in key])")},
		append(console(`v.db.addcolumn map=boundary_region columns="COLOR varchar"`), tg.Done(""))...).Init =
		[]tg.Obj{mapInit(PiemonteLocation), layer("boundary_region")}
	set.Add("S11", 10, "Delete the column named 'ISTAT' of the boundary_region vector map in GRASS GIS.", nil,
		[]tg.Obj{tg.DB("v.db.select", selectJSON("boundary_region"), "lambda out: out['info']['columns']", "ISTAT",
			"lambda key, value: all([item['name'] != value for item in key])")},
		append(console("v.db.dropcolumn map=boundary_region columns=ISTAT"), tg.Done(""))...).Init =
		[]tg.Obj{mapInit(PiemonteLocation), layer("boundary_region")}
	provinces := strconv.Itoa(pie.vectors["boundary_region"].Features)
	set.Add("S12", 5, "How many provinces are there in Piemonte (the boundary_region vector map)? Submit the number via ANS.", nil,
		[]tg.Obj{tg.StopAns(provinces)},
		append(console("v.info map=boundary_region"), tg.Answer(provinces, "v.info reports the number of areas."))...).Init =
		[]tg.Obj{mapInit(PiemonteLocation), layer("boundary_region")}
	set.Add("S13", 5, "Import the Landsat scene ~/Downloads/LC08_scene.tif into GRASS GIS.", nil,
		[]tg.Obj{tg.StopFail()},
		tg.Click(grassCon, "I check the console first."), tg.Fail("There is no such file and no import module in this session.")).Init =
		[]tg.Obj{mapInit(PiemonteLocation)}
	asti := 0
	for _, r := range pie.vectors["hospitals"].Records {
		if r["PROVINCIA"] == "ASTI" {
			asti++
		}
	}
	set.Add("S14", 10, "How many hospitals are in the province of ASTI according to the hospitals vector map? Submit the number via ANS.", nil,
		[]tg.Obj{tg.StopAns(strconv.Itoa(asti))},
		append(console(`v.db.select -c map=hospitals columns=PROVINCIA`),
			tg.Answer(strconv.Itoa(asti), fmt.Sprintf("The query lists %d rows with ASTI.", asti)))...).Init = []tg.Obj{mapInit(PiemonteLocation)}
	g := newGRASS()
	g.switchTo(g.db[PiemonteLocation])
	if _, stderr, code := g.run(parseGcmd([]string{"r.mapcalc", "expression=elev_ft = elevation * 3.28084"})); code != 0 {
		return tg.Set{}, fmt.Errorf("sim: GRASS tasks: r.mapcalc: %s", stderr)
	}
	_, _, ftMax, ftMean, _, _ := rasterStats(g.rasters()["elev_ft"].Data)
	set.Add("S15", 10, "Create a raster map named elev_ft holding the elevation in feet (elevation × 3.28084) in GRASS GIS.", nil,
		[]tg.Obj{tg.DB("r.univar", tg.O("map", "elev_ft", "format", "json"), "lambda out: out['mean']", round6(ftMean), tg.Near(0.01)),
			tg.DB("r.univar", tg.O("map", "elev_ft", "format", "json"), "lambda out: out['max']", round6(ftMax), tg.Near(0.01))},
		append(console(`r.mapcalc expression="elev_ft = elevation * 3.28084"`), tg.Done(""))...).Init = []tg.Obj{mapInit(PiemonteLocation)}
	for _, t := range set.Tasks {
		t.Pre = []tg.Obj{tg.O("func", "execute", "command", "rm -rf /home/user/grassdata/*/*/.gislock", "shell", true)}
	}
	return set, nil
}
