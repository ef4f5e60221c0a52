package grass

// The GRASS database the simulator ships: /home/user/grassdata with the
// three locations (projects) the benchmark's VMs have, each with its
// PERMANENT mapset, holding the maps the benchmark's tasks use. The data
// are synthetic: the names, types, columns and a few attribute values
// follow the real datasets (the Piemonte provinces, for one); the rest is
// generated from fixed seeds.

import (
	"fmt"
	"math"
	"strconv"

	"github.com/codapipe/codapipe/internal/sim/screen"
)

// GRASSDB is the GRASS database folder.
const GRASSDB = "/home/user/grassdata"

// The locations.
const (
	WorldLocation     = "world_latlong_wgs84" // where the GUI starts
	NaturalEarth      = "natural_earth_dataset"
	PiemonteLocation  = "grassdata_piemonte_utm32n_wgs84_grass7"
	PermanentMapset   = "PERMANENT"
	projLatLong       = 3 // g.region's projection codes
	projUTM           = 1
	piemonteUTMZone   = 32
	latlongCellDegree = 2.0
)

// grassLocation is one location: its projection, default region (also
// the grid all its rasters share) and maps.
type grassLocation struct {
	Name       string
	Proj, Zone int
	N, S, E, W float64
	Rows, Cols int
	rasters    map[string]*grassRaster
	vectors    map[string]*grassVector
}

func (l *grassLocation) nsres() float64 { return (l.N - l.S) / float64(l.Rows) }
func (l *grassLocation) ewres() float64 { return (l.E - l.W) / float64(l.Cols) }

// defaultRegion is the location's default region.
func (l *grassLocation) defaultRegion() grassRegion {
	return grassRegion{N: l.N, S: l.S, E: l.E, W: l.W, NSRes: l.nsres(), EWRes: l.ewres()}
}

// grassColumn is one attribute column: its name and SQL type as
// db.describe reports it (INTEGER, DOUBLE PRECISION, CHARACTER, TEXT).
type grassColumn struct {
	Name, SQLType string
}

// newDatabase returns the three locations, fresh.
func newDatabase() map[string]*grassLocation {
	return map[string]*grassLocation{
		WorldLocation: world(), NaturalEarth: naturalEarth(), PiemonteLocation: piemonte(),
	}
}

func world() *grassLocation {
	l := &grassLocation{Name: WorldLocation, Proj: projLatLong, N: 90, S: -90, E: 180, W: -180,
		Rows: int(180 / latlongCellDegree), Cols: int(360 / latlongCellDegree),
		rasters: map[string]*grassRaster{}, vectors: map[string]*grassVector{}}
	l.addVector("country_boundaries", "area", 30, nameColumns("NAME"), func(i int) map[string]any {
		return map[string]any{"NAME": countryNames[(i-1)%len(countryNames)]}
	})
	return l
}

var countryNames = []string{"Argentina", "Australia", "Brazil", "Bulgaria", "Canada", "Chile", "China", "Egypt",
	"France", "Germany", "Greece", "India", "Indonesia", "Italy", "Japan", "Kenya", "Mexico", "Morocco", "Nigeria",
	"Norway", "Panama", "Peru", "Poland", "Romania", "South Africa", "South Korea", "Spain", "Sweden", "Turkey",
	"United States of America"}

var continents = map[string]string{"Argentina": "South America", "Brazil": "South America", "Chile": "South America",
	"Peru": "South America", "Australia": "Oceania", "Canada": "North America", "Mexico": "North America",
	"Panama": "North America", "United States of America": "North America", "China": "Asia", "India": "Asia",
	"Indonesia": "Asia", "Japan": "Asia", "South Korea": "Asia", "Turkey": "Asia", "Egypt": "Africa",
	"Kenya": "Africa", "Morocco": "Africa", "Nigeria": "Africa", "South Africa": "Africa"}

func naturalEarth() *grassLocation {
	l := &grassLocation{Name: NaturalEarth, Proj: projLatLong, N: 90, S: -90, E: 180, W: -180,
		Rows: int(180 / latlongCellDegree), Cols: int(360 / latlongCellDegree),
		rasters: map[string]*grassRaster{}, vectors: map[string]*grassVector{}}
	relief := make([]float64, l.Rows*l.Cols)
	for r := 0; r < l.Rows; r++ {
		for c := 0; c < l.Cols; c++ {
			v := 128 + 90*math.Sin(float64(c)*0.11+0.7)*math.Cos(float64(r)*0.13) + 30*math.Sin(float64(r+c)*0.05)
			relief[r*l.Cols+c] = math.Round(math.Max(0, math.Min(255, v)))
		}
	}
	l.rasters["natural_earth"] = &grassRaster{Name: "natural_earth", Data: relief, Type: "CELL", History: "Natural Earth shaded relief (SIMULATOR)"}
	cols := append(nameColumns("NAME"), grassColumn{"CONTINENT", "CHARACTER"}, grassColumn{"POP_EST", "DOUBLE PRECISION"})
	l.addVector("countries", "area", len(countryNames), cols, func(i int) map[string]any {
		name := countryNames[i-1]
		cont := continents[name]
		if cont == "" {
			cont = "Europe"
		}
		return map[string]any{"NAME": name, "CONTINENT": cont, "POP_EST": float64(1e6 + screen.Hash("pop", name)%200_000_000)}
	})
	return l
}

// piemonteProvinces are the provinces of Piemonte with their ISTAT codes.
var piemonteProvinces = []struct {
	Name  string
	ISTAT int
}{{"TORINO", 1}, {"VERCELLI", 2}, {"NOVARA", 3}, {"CUNEO", 4}, {"ASTI", 5}, {"ALESSANDRIA", 6}, {"BIELLA", 96}, {"VERBANO-CUSIO-OSSOLA", 103}}

func piemonte() *grassLocation {
	l := &grassLocation{Name: PiemonteLocation, Proj: projUTM, Zone: piemonteUTMZone,
		N: 5150000, S: 4880000, E: 520000, W: 310000, Rows: 90, Cols: 70,
		rasters: map[string]*grassRaster{}, vectors: map[string]*grassVector{}}
	elev := make([]float64, l.Rows*l.Cols)
	lakes := make([]float64, len(elev))
	for r := 0; r < l.Rows; r++ {
		for c := 0; c < l.Cols; c++ {
			fr, fc := float64(r), float64(c)
			f := math.Sin(fc*0.07+1.3)*math.Cos(fr*0.05+0.4)*0.5 + math.Sin((fr+fc)*0.031)*0.35 +
				math.Cos(fc*0.13-fr*0.09)*0.15 + math.Sin(fr*0.21)*math.Sin(fc*0.17)*0.08
			// Alps in the north and west, plain in the east.
			v := 150 + 1800*math.Max(0, 1-fc/float64(l.Cols)-0.3*fr/float64(l.Rows)) + 400*f
			elev[r*l.Cols+c] = math.Round(math.Max(80, v)*1e4) / 1e4
			lakes[r*l.Cols+c] = math.NaN()
			if h := screen.Hash("lake", strconv.Itoa(r/6), strconv.Itoa(c/6)); h%9 == 0 && (r+c)%3 != 0 {
				lakes[r*l.Cols+c] = float64(1 + h%4)
			}
		}
	}
	l.rasters["elevation"] = &grassRaster{Name: "elevation", Data: elev, Type: "DCELL", History: "digital terrain model (SIMULATOR)"}
	l.rasters["lakes"] = &grassRaster{Name: "lakes", Data: lakes, Type: "CELL", History: "lakes (SIMULATOR)"}
	province := func(i int) string {
		return piemonteProvinces[int(screen.Hash("prov", strconv.Itoa(i))%uint64(len(piemonteProvinces)))].Name
	}
	l.addVector("boundary_region", "area", len(piemonteProvinces),
		append(nameColumns("NOME"), grassColumn{"ISTAT", "INTEGER"}), func(i int) map[string]any {
			p := piemonteProvinces[i-1]
			return map[string]any{"NOME": p.Name, "ISTAT": p.ISTAT}
		})
	l.addVector("roadsmajor", "line", 120, append(nameColumns("NAME"), grassColumn{"TYPE", "CHARACTER"}), func(i int) map[string]any {
		return map[string]any{"NAME": fmt.Sprintf("SS%d", 10+i), "TYPE": []string{"motorway", "trunk", "primary"}[i%3]}
	})
	l.addVector("railroads", "line", 40, nameColumns("NAME"), func(i int) map[string]any {
		return map[string]any{"NAME": fmt.Sprintf("Linea %d", i)}
	})
	l.addVector("firestations", "point", 61, append(nameColumns("NOME"), grassColumn{"INDIRIZZO", "CHARACTER"}, grassColumn{"PROVINCIA", "CHARACTER"}),
		func(i int) map[string]any {
			return map[string]any{"NOME": "Vigili del Fuoco " + strconv.Itoa(i), "INDIRIZZO": fmt.Sprintf("Via Roma %d", i), "PROVINCIA": province(i)}
		})
	l.addVector("hospitals", "point", 44, append(nameColumns("NOME"), grassColumn{"PROVINCIA", "CHARACTER"}),
		func(i int) map[string]any {
			return map[string]any{"NOME": "Ospedale " + strconv.Itoa(i), "PROVINCIA": province(i + 100)}
		})
	l.addVector("schools", "point", 200, append(nameColumns("name"), grassColumn{"wheelchair", "CHARACTER"}, grassColumn{"postcode", "CHARACTER"}),
		func(i int) map[string]any {
			return map[string]any{"name": "Scuola " + strconv.Itoa(i), "wheelchair": []string{"yes", "no", "limited", ""}[screen.Hash("wc", strconv.Itoa(i))%4],
				"postcode": strconv.Itoa(10000 + int(screen.Hash("pc", strconv.Itoa(i))%5000))}
		})
	l.addVector("points_of_interest", "point", 360, append(nameColumns("name"), grassColumn{"religion", "CHARACTER"}, grassColumn{"start_date", "CHARACTER"}),
		func(i int) map[string]any {
			return map[string]any{"name": "POI " + strconv.Itoa(i), "religion": []string{"christian", "", "", "jewish", ""}[i%5],
				"start_date": strconv.Itoa(1500 + int(screen.Hash("sd", strconv.Itoa(i))%500))}
		})
	return l
}

// nameColumns is the cat column and text columns.
func nameColumns(names ...string) []grassColumn {
	out := []grassColumn{{"cat", "INTEGER"}}
	for _, n := range names {
		out = append(out, grassColumn{n, "CHARACTER"})
	}
	return out
}

// addVector adds a vector map of n features (cats 1..n) whose attribute
// row i is row(i) plus its cat.
func (l *grassLocation) addVector(name, typ string, n int, cols []grassColumn, row func(i int) map[string]any) {
	v := &grassVector{Name: name, Type: typ, Features: n, Columns: cols, geomSeed: l.Name + "/" + name}
	for i := 1; i <= n; i++ {
		r := row(i)
		r["cat"] = i
		v.Records = append(v.Records, r)
	}
	l.vectors[name] = v
}

// point returns the coordinates of point feature i (0-based) of a vector
// map, inside the location's extent.
func (l *grassLocation) point(v *grassVector, i int) (e, n float64) {
	h := screen.Hash("pt", v.geomSeed, strconv.Itoa(i))
	fe := float64(h%100000) / 100000
	fn := float64((h>>20)%100000) / 100000
	// Keep to the middle of the extent (the land of the dataset).
	return l.W + (0.1+0.8*fe)*(l.E-l.W), l.S + (0.1+0.8*fn)*(l.N-l.S)
}
