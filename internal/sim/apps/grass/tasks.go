package grass

import (
	"fmt"
	"math"
	"strconv"

	tg "github.com/codapipe/codapipe/internal/sim/tasks/taskgen"
)

// Tasks returns the simulator's GRASS GIS tasks (see package taskgen);
// expected values come from the simulated maps, computed by the
// simulated modules.
func Tasks() (tg.Set, error) {
	set := tg.Set{App: Spec(), Launch: tg.O("func", "launch", "wait", 5, "command", "FLASK_PORT=«PORTLIKE» /app/bin/grass --gui ~/grassdata/nc_spm_sim/PERMANENT", "shell", true)}
	const grassCon = "GRASS Console tab"
	console := func(cmds ...string) []tg.Step {
		out := []tg.Step{tg.Click(grassCon, "I will use the command console."), tg.Click("GRASS console", "")}
		for _, c := range cmds {
			out = append(out, tg.Enter(c))
		}
		return out
	}
	round6 := func(v float64) float64 { return math.Round(v*1e6) / 1e6 }
	g := newGRASS()
	_, _, elevMax, _, _, _ := rasterStats(g.rasters["elevation"].Data)
	for _, e := range []string{"elev_ft = elevation * 3.28084", "high = if(elevation > 120, 1, 0)"} {
		if _, stderr, code := g.run(parseGcmd([]string{"r.mapcalc", "expression=" + e})); code != 0 {
			return tg.Set{}, fmt.Errorf("sim: GRASS tasks: r.mapcalc %s: %s", e, stderr)
		}
	}
	_, _, ftMax, ftMean, _, _ := rasterStats(g.rasters["elev_ft"].Data)
	_, _, _, highMean, _, _ := rasterStats(g.rasters["high"].Data)
	sl, _ := slopeAspect(g.rasters["elevation"].Data)
	_, _, slopeMax, _, _, _ := rasterStats(sl)
	set.Add("S01", 5, "Display the elevation raster map in the GRASS GIS map display.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['display']['elevation']", "raster")},
		append(console("d.rast map=elevation"), tg.Done(""))...)
	set.Add("S02", 5, "Set the computational region to match the elevation raster map in GRASS GIS.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['region']['rows']", grassRows), tg.Info("lambda dump: dump['region']['nsres']", grassRes),
			tg.Info("lambda dump: dump['region']['n']", grassN)},
		append(console("g.region raster=elevation"), tg.Done(""))...)
	set.Add("S03", 10, "Create a raster map named elev_ft holding the elevation in feet (elevation × 3.28084) in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['rasters']['elev_ft']['max']", round6(ftMax), tg.Near(0.01)),
			tg.DB("r.univar", tg.O("map", "elev_ft", "format", "json"), "lambda out: out['mean']", round6(ftMean), tg.Near(0.01))},
		append(console(`r.mapcalc expression="elev_ft = elevation * 3.28084"`), tg.Done(""))...)
	set.Add("S04", 10, "Create a 100 m buffer around the roads vector map and name it roads_buf in GRASS GIS.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['vectors']['roads_buf']['buffer']", 100), tg.Info("lambda dump: dump['vectors']['roads_buf']['source']", "roads")},
		append(console("v.buffer input=roads output=roads_buf distance=100"), tg.Done(""))...)
	maxText := fmt.Sprintf("%.2f", elevMax)
	set.Add("S05", 5, "What is the maximum value of the elevation raster map in GRASS GIS? Submit it with two decimals via ANS.", nil,
		[]tg.Obj{tg.StopAns(maxText)},
		append(console("r.univar map=elevation"), tg.Answer(maxText, "r.univar reports the maximum."))...)
	set.Add("S06", 5, "Remove the scratch raster map elevation_tmp from the GRASS GIS mapset.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['raster_list']", []string{"elevation", "landuse"})},
		append(console("g.remove -f type=raster name=elevation_tmp"), tg.Done(""))...)
	set.Add("S07", 10, "Compute the slope in degrees of the elevation raster into a new raster map named slope in GRASS GIS.", nil,
		[]tg.Obj{tg.InfoPred("lambda dump: dump['rasters']['slope']['max']", round6(slopeMax), tg.Near(0.001))},
		append(console("r.slope.aspect elevation=elevation slope=slope"), tg.Done(""))...)
	set.Add("S08", 5, "Display the roads vector map in the GRASS GIS map display.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['display']['roads']", "vector")},
		append(console("d.vect map=roads"), tg.Done(""))...)
	set.Add("S09", 5, "Set the resolution of the computational region to 30 meters in GRASS GIS.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['region']['nsres']", 30), tg.Info("lambda dump: dump['region']['ewres']", 30)},
		append(console("g.region res=30"), tg.Done(""))...)
	set.Add("S10", 5, "Import the Landsat scene ~/Downloads/LC08_scene.tif into GRASS GIS.", nil,
		[]tg.Obj{tg.StopFail()},
		tg.Click(grassCon, "I check the console first."), tg.Fail("There is no such file and no import module in this session."))
	set.Add("S11", 10, "Rename the raster map landuse to land_cover in GRASS GIS.", nil,
		[]tg.Obj{tg.Info("lambda dump: dump['raster_list']", []string{"elevation", "elevation_tmp", "land_cover"})},
		append(console("g.rename raster=landuse,land_cover"), tg.Done(""))...)
	set.Add("S12", 10, "Create a raster map named high that is 1 where the elevation is above 120 and 0 elsewhere in GRASS GIS.", nil,
		[]tg.Obj{tg.DB("r.univar", tg.O("map", "high", "format", "json"), "lambda out: out['max']", 1, ""),
			tg.InfoPred("lambda dump: dump['rasters']['high']['mean']", round6(highMean), tg.Near(0.0001))},
		append(console(`r.mapcalc expression="high = if(elevation > 120, 1, 0)"`), tg.Done(""))...)
	schools := strconv.Itoa(newGRASS().vectors["schools"].Features)
	set.Add("S13", 5, "How many point features does the schools vector map have in GRASS GIS? Submit the number via ANS.", nil,
		[]tg.Obj{tg.StopAns(schools)},
		append(console("v.info map=schools"), tg.Answer(schools, "v.info reports the number of points."))...)
	return set, nil
}
