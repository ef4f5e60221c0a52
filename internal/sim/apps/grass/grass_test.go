package grass

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
)

func TestGRASSCommands(t *testing.T) {
	m := desktoptest.Start(t, Spec(), "grass --gui")
	if r := m.Get("/gcmd", `{"cmd": "r.univar", "kwargs": {"map": "elevation", "format": "json"}}`); r["returncode"] != float64(0) {
		t.Fatalf("r.univar: %v", r)
	} else if st := r["stdout"].(map[string]any); st["n"] != float64(grassRows*grassCols) || st["max"].(float64) < st["min"].(float64) {
		t.Errorf("r.univar stdout %v", st)
	}
	dump := func() map[string]any { return m.Get("/dump", "") }
	m.Click("GRASS Console tab")
	m.Click("GRASS console")
	// want is what the console shows after the line, if anything.
	for _, c := range []struct{ line, want string }{
		{line: `r.mapcalc "double = elevation * 2"`},
		{line: `r.mapcalc expression="double = 1"`, want: "To overwrite, use the --overwrite flag"}, // exists without --overwrite
		{line: "g.region raster=elevation"},
		{line: "g.remove type=raster name=landuse", want: "Nothing removed"}, // no -f: nothing removed
		{line: "d.rast elevation"},
		{line: "d.vect map=roads"},
		{line: "v.buffer input=schools output=sb distance=50"},
		{line: "g.rename vector=sb,school_buffers"},
		{line: "g.copy raster=double,double2"},
		{line: "r.slope.aspect elevation=elevation slope=s aspect=a"},
		{line: "v.info nothere", want: "Vector map <nothere> not found"},
	} {
		m.Write(c.line + "\n")
		if console := fmt.Sprint(dump()["console"]); !strings.Contains(console, c.want) {
			t.Errorf("%s: console lacks %q:\n%s", c.line, c.want, console)
		}
	}
	d := dump()
	rasters := fmt.Sprint(d["raster_list"])
	if rasters != "[a double double2 elevation elevation_tmp landuse s]" {
		t.Errorf("rasters %s", rasters)
	}
	if fmt.Sprint(d["vector_list"]) != "[roads school_buffers schools streams]" {
		t.Errorf("vectors %v", d["vector_list"])
	}
	if fmt.Sprint(d["layers"]) != "[vector/roads raster/elevation]" {
		t.Errorf("layers %v", d["layers"])
	}
	region := d["region"].(map[string]any)
	if region["rows"] != float64(grassRows) || region["n"] != grassN {
		t.Errorf("region %v", region)
	}
	el := d["rasters"].(map[string]any)["elevation"].(map[string]any)
	dbl := d["rasters"].(map[string]any)["double"].(map[string]any)
	if math.Abs(dbl["max"].(float64)-2*el["max"].(float64)) > 1e-6 {
		t.Errorf("double max %v, elevation max %v", dbl["max"], el["max"])
	}
	m.Write("d.erase\n")
	if len(dump()["layers"].([]any)) != 0 {
		t.Error("d.erase kept layers")
	}
}
