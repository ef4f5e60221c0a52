// Package grass is part of codapipe's SIMULATOR (see package sim): the
// simulated GRASS GIS GUI, a map display with a toolbar and a layer
// manager (Layers, Console and Data tabs), and the Flask server of
// ScienceBoard's GRASS GUI (see server.go). It runs on the GRASS database
// of data.go (three locations, each with its PERMANENT mapset). The
// console runs a simulated subset of GRASS modules (g.region, g.list,
// g.mapset, g.remove, g.rename, g.copy, r.mapcalc, r.univar, r.info,
// r.slope.aspect, v.buffer, v.info, v.db.select, v.db.addcolumn,
// v.db.dropcolumn, v.to.db, d.rast, d.vect, d.erase). All rasters of a
// location share its grid; the computational region is state but does
// not resample maps.
package grass

import (
	"encoding/json"
	"fmt"
	"image"
	"maps"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/expr"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Name is the app's name, as task files spell their "type" (and the
// folder of ScienceBoard's GRASS tasks).
const Name = "GrassGIS"

// Spec describes the simulated GRASS GIS, for a machine's catalogue: the
// folders of its GRASS database come with it. It starts in the location
// of its last argument (grass --gui /home/user/grassdata/LOCATION/MAPSET),
// by default world_latlong_wgs84.
func Spec() desktop.AppSpec {
	files := map[string]string{GRASSDB + "/": "", "/app/bin/grass": "#!/bin/sh\n# simulated\n"}
	for name := range newDatabase() {
		files[GRASSDB+"/"+name+"/"] = ""
		files[GRASSDB+"/"+name+"/"+PermanentMapset+"/"] = ""
	}
	return desktop.AppSpec{Name: Name, Programs: []string{"grass", "grass8*", "grass7*"}, Elements: layout(), Files: files,
		ServeState: ServeState,
		Start: func(_ *desktop.UI, args []string) desktop.App {
			g := newGRASS()
			if len(args) > 0 {
				if loc, ok := g.db[path.Base(path.Dir(args[len(args)-1]))]; ok {
					g.switchTo(loc)
				}
			}
			return g
		}}
}

type grassRaster struct {
	Name    string
	Data    []float64 // row-major on the location's grid, NaN = null
	Type    string    // CELL, DCELL
	History string
}

type grassVector struct {
	Name     string
	Type     string // point, line, area
	Features int
	Columns  []grassColumn
	Records  []map[string]any // one per feature (cat 1..n): column → value
	Buffer   float64
	Source   string
	geomSeed string
}

type grassRegion struct {
	N, S, E, W, NSRes, EWRes float64
}

func (r grassRegion) rows() int { return int(math.Round((r.N - r.S) / r.NSRes)) }
func (r grassRegion) cols() int { return int(math.Round((r.E - r.W) / r.EWRes)) }

// grassLayer is one map layer of the map display (an item of the layer
// tree).
type grassLayer struct {
	Kind    string   // raster, vector
	Map     string   // NAME@MAPSET
	Cmd     []string // the display module and its options: d.vect map=...
	Opacity float64
	Checked bool
}

type grass struct {
	desktop.Tabs // 0 layers, 1 console, 2 data
	db           map[string]*grassLocation
	loc          *grassLocation // the current location (mapset PERMANENT)
	region       grassRegion    // the computational region
	layers       []*grassLayer  // the map display's layers, top first
	console      []string       // the console output
	cmdDisabled  bool           // /init/cmd disabled the console prompt
	outScroll    int
	history      []string
	// The map display's view: its centre and scale (map units per metre
	// of screen, GRASS's GetMapScale).
	centerE, centerN, scale float64
	toolbarShown            bool
	statusMode              int // the status bar's mode (0: coordinates)
}

func newGRASS() *grass {
	g := &grass{Tabs: desktop.Tabs{Of: grassTabOf}, db: newDatabase(), toolbarShown: true}
	g.console = []string{"Welcome to GRASS GIS 8.4 (SIMULATOR)"}
	g.switchTo(g.db[WorldLocation])
	return g
}

// switchTo makes a location current, as switching mapsets does: its
// default region, a new empty map display fitted to it.
func (g *grass) switchTo(l *grassLocation) {
	g.loc = l
	g.region = l.defaultRegion()
	g.layers = nil
	g.zoomToRegion()
	g.console = append(g.console, fmt.Sprintf("Current project <%s>, mapset <%s>", l.Name, PermanentMapset))
}

func (g *grass) rasters() map[string]*grassRaster { return g.loc.rasters }
func (g *grass) vectors() map[string]*grassVector { return g.loc.vectors }

// The map display's geometry: its size in pixels and GRASS's pixels per
// metre of screen (96 dpi).
const ppm = 96 / 2.54 * 100

func displayCols() int { return grassMapBox.Dx() }
func displayRows() int { return grassMapBox.Dy() }

// zoomToRegion fits the map display to the computational region.
func (g *grass) zoomToRegion() {
	r := g.region
	g.centerE, g.centerN = (r.E+r.W)/2, (r.N+r.S)/2
	g.scale = math.Max((r.E-r.W)*ppm/float64(displayCols()), (r.N-r.S)*ppm/float64(displayRows()))
}

// displayRegion is the map display's region (Map.region after
// AdjustRegion): its extent, the map units per pixel, the pixels.
func (g *grass) displayRegion() map[string]any {
	w := g.scale * float64(displayCols()) / ppm
	h := g.scale * float64(displayRows()) / ppm
	rows, cols := displayRows(), displayCols()
	return map[string]any{
		"projection": float64(g.loc.Proj), "zone": float64(g.loc.Zone),
		"n": g.centerN + h/2, "s": g.centerN - h/2, "e": g.centerE + w/2, "w": g.centerE - w/2,
		"nsres": h / float64(rows), "ewres": w / float64(cols), "rows": rows, "cols": cols, "cells": rows * cols,
		"center_easting": g.centerE, "center_northing": g.centerN,
	}
}

// setScale is the map display's SetMapScale: the scale about the centre.
func (g *grass) setScale(s float64) bool {
	if math.IsNaN(s) || math.IsInf(s, 0) || s <= 0 {
		return false
	}
	g.scale = s
	return true
}

func rasterStats(d []float64) (n int, mn, mx, mean, std, sum float64) {
	mn, mx = math.Inf(1), math.Inf(-1)
	for _, v := range d {
		if math.IsNaN(v) {
			continue
		}
		n++
		sum += v
		mn = math.Min(mn, v)
		mx = math.Max(mx, v)
	}
	if n == 0 {
		return 0, math.NaN(), math.NaN(), math.NaN(), math.NaN(), 0
	}
	mean = sum / float64(n)
	for _, v := range d {
		if !math.IsNaN(v) {
			std += (v - mean) * (v - mean)
		}
	}
	std = math.Sqrt(std / float64(n))
	return
}

// addLayer adds a map layer on top of the map display, as d.rast and
// d.vect in the console and a double click in the data catalog do.
func (g *grass) addLayer(kind, name string, cmd []string) {
	g.layers = append([]*grassLayer{{Kind: kind, Map: name + "@" + PermanentMapset, Cmd: cmd, Opacity: 1, Checked: true}}, g.layers...)
}

func (g *grass) removeLayers(kind, name string) {
	g.layers = slices.DeleteFunc(g.layers, func(l *grassLayer) bool {
		return l.Kind == kind && l.Map == name+"@"+PermanentMapset
	})
}

// mapName strips a map name's @MAPSET.
func mapName(s string) string {
	name, _, _ := strings.Cut(s, "@")
	return name
}

// gcmd is a parsed GRASS command line.
type gcmd struct {
	module string
	opts   map[string]string
	flags  map[byte]bool
	pos    []string
	over   bool
}

func parseGcmd(words []string) gcmd {
	c := gcmd{module: words[0], opts: map[string]string{}, flags: map[byte]bool{}}
	for _, w := range words[1:] {
		switch {
		case w == "--overwrite" || w == "--o":
			c.over = true
		case strings.HasPrefix(w, "--"):
		case strings.HasPrefix(w, "-") && len(w) > 1 && !strings.ContainsAny(w[1:2], "0123456789."):
			for i := 1; i < len(w); i++ {
				c.flags[w[i]] = true
			}
		case strings.Contains(w, "=") && expr.IsIdent(w[:1]) && !strings.Contains(strings.SplitN(w, "=", 2)[0], " "):
			k, v, _ := strings.Cut(w, "=")
			c.opts[strings.ToLower(k)] = v
		default:
			c.pos = append(c.pos, w)
		}
	}
	return c
}

// opt returns an option, or the first positional argument for the
// module's default option.
func (c gcmd) opt(name string, positional bool) string {
	if v, ok := c.opts[name]; ok {
		return v
	}
	if positional && len(c.pos) > 0 {
		return c.pos[0]
	}
	return ""
}

// runLine runs one console line and records it.
func (g *grass) runLine(u *desktop.UI, line string) (stdout string, stderr string, code int) {
	line = strings.TrimSpace(line)
	if line == "" {
		return "", "", 0
	}
	g.console = append(g.console, line)
	g.history = append(g.history, line)
	words, err := desktop.ShellWords(line)
	if err != nil || len(words) == 0 {
		stderr, code = "ERROR: cannot parse the command line\n", 1
	} else {
		stdout, stderr, code = g.run(parseGcmd(words))
	}
	for _, l := range strings.Split(strings.TrimRight(stdout+stderr, "\n"), "\n") {
		if l != "" {
			g.console = append(g.console, l)
		}
	}
	if code == 0 {
		g.console = append(g.console, "Command finished")
	}
	if len(g.console) > 2000 {
		g.console = g.console[len(g.console)-2000:]
	}
	g.outScroll = 0
	if u != nil {
		if code != 0 {
			u.SetStatus(strings.TrimSpace(strings.SplitN(stderr, "\n", 2)[0]))
		} else {
			u.SetStatus("Command finished: " + words[0])
		}
	}
	return stdout, stderr, code
}

func (g *grass) exists(kind, name string) bool {
	if kind == "raster" {
		_, ok := g.rasters()[name]
		return ok
	}
	_, ok := g.vectors()[name]
	return ok
}

func normType(t string) string {
	switch strings.ToLower(t) {
	case "raster", "rast", "cell":
		return "raster"
	case "vector", "vect":
		return "vector"
	}
	return ""
}

// moduleInput is, for the modules that read one map, the option that
// names it (or the first positional argument) and its kind.
var moduleInput = map[string]struct{ opt, kind string }{
	"r.univar": {"map", "raster"}, "r.info": {"map", "raster"}, "r.slope.aspect": {"elevation", "raster"},
	"v.buffer": {"input", "vector"}, "v.info": {"map", "vector"}, "v.db.select": {"map", "vector"},
	"v.db.addcolumn": {"map", "vector"}, "v.db.dropcolumn": {"map", "vector"}, "v.to.db": {"map", "vector"},
}

// run runs one module.
func (g *grass) run(c gcmd) (string, string, int) {
	errf := func(format string, args ...any) (string, string, int) {
		return "", "ERROR: " + fmt.Sprintf(format, args...) + "\n", 1
	}
	needOutput := func(kind, name string) (string, string, int, bool) {
		if name == "" {
			o, e, code := errf("Required parameter <output> not set")
			return o, e, code, false
		}
		if !expr.IsIdent(strings.ReplaceAll(name, ".", "_")) {
			o, e, code := errf("<%s> is an illegal file name", name)
			return o, e, code, false
		}
		if g.exists(kind, name) && !c.over {
			o, e, code := errf("option <output>: <%s> exists. To overwrite, use the --overwrite flag", name)
			return o, e, code, false
		}
		return "", "", 0, true
	}
	// A module that reads a map finds it first: name, and r or v.
	var (
		name string
		r    *grassRaster
		v    *grassVector
	)
	if in, ok := moduleInput[c.module]; ok {
		name = c.opt(in.opt, true)
		var found bool
		if in.kind == "raster" {
			r, found = g.rasters()[mapName(name)]
		} else {
			v, found = g.vectors()[mapName(name)]
		}
		if !found {
			return errf("%s map <%s> not found", strings.ToUpper(in.kind[:1])+in.kind[1:], name)
		}
	}
	switch c.module {
	case "g.version":
		return "GRASS 8.3.1 (SIMULATOR)\n", "", 0
	case "g.region":
		if r := c.opt("raster", false); r != "" {
			if !g.exists("raster", r) {
				return errf("Raster map <%s> not found", r)
			}
			g.region = g.loc.defaultRegion()
		}
		if c.flags['d'] {
			g.region = g.loc.defaultRegion()
		}
		set := func(key string, dst *float64) error {
			if v, ok := c.opts[key]; ok {
				f, err := strconv.ParseFloat(v, 64)
				if err != nil {
					return fmt.Errorf("illegal value for %s: %q", key, v)
				}
				*dst = f
			}
			return nil
		}
		r := g.region
		for _, kv := range []struct {
			k string
			d *float64
		}{{"n", &r.N}, {"s", &r.S}, {"e", &r.E}, {"w", &r.W}, {"nsres", &r.NSRes}, {"ewres", &r.EWRes}} {
			if err := set(kv.k, kv.d); err != nil {
				return errf("%v", err)
			}
		}
		if v, ok := c.opts["res"]; ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil || f <= 0 {
				return errf("illegal value for res: %q", v)
			}
			r.NSRes, r.EWRes = f, f
		}
		if r.N <= r.S || r.E <= r.W || r.NSRes <= 0 || r.EWRes <= 0 {
			return errf("invalid region: north must exceed south, east must exceed west, resolution must be positive")
		}
		if c.flags['a'] {
			// -a: align the extent to the resolution.
			r.N, r.S = math.Ceil(r.N/r.NSRes)*r.NSRes, math.Floor(r.S/r.NSRes)*r.NSRes
			r.E, r.W = math.Ceil(r.E/r.EWRes)*r.EWRes, math.Floor(r.W/r.EWRes)*r.EWRes
		}
		// Keep the extent, adjust the resolution to whole rows and
		// columns (G_adjust_Cell_head).
		r.NSRes = (r.N - r.S) / float64(max(1, int(math.Round((r.N-r.S)/r.NSRes))))
		r.EWRes = (r.E - r.W) / float64(max(1, int(math.Round((r.E-r.W)/r.EWRes))))
		g.region = r
		if c.flags['p'] || c.flags['g'] {
			return g.regionText(c.flags['g']), "", 0
		}
		return "", "", 0
	case "g.list":
		t := normType(c.opt("type", true))
		if t == "" {
			return errf("Required parameter <type> not set (raster, vector)")
		}
		var names []string
		if t == "raster" {
			names = slices.Sorted(maps.Keys(g.rasters()))
		} else {
			names = slices.Sorted(maps.Keys(g.vectors()))
		}
		return strings.Join(names, "\n") + "\n", "", 0
	case "g.remove":
		t := normType(c.opt("type", false))
		names := strings.Split(c.opt("name", false), ",")
		if t == "" || names[0] == "" {
			return errf("Required parameters <type> and <name> not set")
		}
		var out strings.Builder
		for _, n := range names {
			if !g.exists(t, n) {
				return errf("%s map <%s> not found", t, n)
			}
		}
		if !c.flags['f'] {
			out.WriteString("The following data base element files would be deleted:\n")
			for _, n := range names {
				fmt.Fprintf(&out, "%s/%s@PERMANENT\n", t, n)
			}
			return out.String(), "WARNING: Nothing removed. You must use the force flag (-f) to actually remove them. Exiting.\n", 0
		}
		for _, n := range names {
			if t == "raster" {
				delete(g.rasters(), n)
			} else {
				delete(g.vectors(), n)
			}
			g.removeLayers(t, n)
			fmt.Fprintf(&out, "Removing %s <%s>\n", t, n)
		}
		return out.String(), "", 0
	case "g.rename", "g.copy":
		for _, t := range []string{"raster", "vector"} {
			v := c.opt(t, false)
			if v == "" {
				continue
			}
			from, to, ok := strings.Cut(v, ",")
			if !ok || from == "" || to == "" {
				return errf("%s=old,new expected", t)
			}
			if !g.exists(t, from) {
				return errf("%s map <%s> not found", t, from)
			}
			if g.exists(t, to) && !c.over {
				return errf("<%s> already exists in mapset PERMANENT", to)
			}
			if t == "raster" {
				r := *g.rasters()[from]
				r.Name = to
				r.Data = append([]float64(nil), r.Data...)
				g.rasters()[to] = &r
				if c.module == "g.rename" {
					delete(g.rasters(), from)
				}
			} else {
				v := *g.vectors()[from]
				v.Name = to
				v.Records = cloneRecords(v.Records)
				v.Columns = slices.Clone(v.Columns)
				g.vectors()[to] = &v
				if c.module == "g.rename" {
					delete(g.vectors(), from)
				}
			}
			if c.module == "g.rename" {
				for _, l := range g.layers {
					if l.Kind == t && l.Map == from+"@"+PermanentMapset {
						l.Map = to + "@" + PermanentMapset
					}
				}
				return fmt.Sprintf("Rename %s <%s> to <%s>\n", t, from, to), "", 0
			}
			return fmt.Sprintf("Copy %s <%s> to <%s>\n", t, from, to), "", 0
		}
		return errf("Required parameter raster=old,new or vector=old,new not set")
	case "r.mapcalc":
		line := c.opt("expression", true)
		if line == "" {
			return errf("Required parameter <expression> not set")
		}
		return g.mapcalc(line, c.over)
	case "r.univar":
		n, mn, mx, mean, std, sum := rasterStats(r.Data)
		if strings.ToLower(c.opt("format", false)) == "json" {
			b, _ := json.Marshal(map[string]any{"n": n, "null_cells": len(r.Data) - n, "cells": len(r.Data), "min": mn, "max": mx,
				"range": mx - mn, "mean": mean, "stddev": std, "variance": std * std, "sum": sum})
			return string(b) + "\n", "", 0
		}
		if c.flags['g'] || strings.ToLower(c.opt("format", false)) == "shell" {
			return fmt.Sprintf("n=%d\nnull_cells=%d\ncells=%d\nmin=%s\nmax=%s\nrange=%s\nmean=%s\nstddev=%s\nsum=%s\n",
				n, len(r.Data)-n, len(r.Data), gnum(mn), gnum(mx), gnum(mx-mn), gnum(mean), gnum(std), gnum(sum)), "", 0
		}
		return fmt.Sprintf("total null and non-null cells: %d\ntotal null cells: %d\n\nOf the non-null cells:\n----------------------\nn: %d\nminimum: %s\nmaximum: %s\nrange: %s\nmean: %s\nstandard deviation: %s\nsum: %s\n",
			len(r.Data), len(r.Data)-n, n, gnum(mn), gnum(mx), gnum(mx-mn), gnum(mean), gnum(std), gnum(sum)), "", 0
	case "r.info":
		_, mn, mx, _, _, _ := rasterStats(r.Data)
		return fmt.Sprintf(" Map:      %s@PERMANENT\n Type of Map:  raster   Data Type: %s\n Rows: %d  Columns: %d  Total Cells: %d\n N: %g  S: %g  Res: %g\n E: %g  W: %g  Res: %g\n Range of data:  min = %s  max = %s\n Comments: %s\n",
			name, r.Type, g.loc.Rows, g.loc.Cols, g.loc.Rows*g.loc.Cols, g.loc.N, g.loc.S, g.loc.nsres(), g.loc.E, g.loc.W, g.loc.ewres(), gnum(mn), gnum(mx), r.History), "", 0
	case "r.slope.aspect":
		slope, aspect := c.opt("slope", false), c.opt("aspect", false)
		if slope == "" && aspect == "" {
			return errf("You must specify at least one of the parameters: <slope> or <aspect>")
		}
		for _, o := range []string{slope, aspect} {
			if o != "" {
				if out, e, code, ok := needOutput("raster", o); !ok {
					return out, e, code
				}
			}
		}
		sl, as := slopeAspect(g.loc, r.Data)
		if slope != "" {
			g.rasters()[slope] = &grassRaster{Name: slope, Data: sl, Type: "DCELL", History: "r.slope.aspect elevation=" + name}
		}
		if aspect != "" {
			g.rasters()[aspect] = &grassRaster{Name: aspect, Data: as, Type: "DCELL", History: "r.slope.aspect elevation=" + name}
		}
		return "", "", 0
	case "v.buffer":
		out := c.opt("output", false)
		if o, e, code, ok := needOutput("vector", out); !ok {
			return o, e, code
		}
		d, err := strconv.ParseFloat(c.opt("distance", false), 64)
		if err != nil || d <= 0 {
			return errf("Required parameter <distance> must be a positive number")
		}
		bufv := &grassVector{Name: out, Type: "area", Features: v.Features, Columns: nameColumns(), Buffer: d, Source: name, geomSeed: v.geomSeed}
		for i := 1; i <= v.Features; i++ {
			bufv.Records = append(bufv.Records, map[string]any{"cat": i})
		}
		g.vectors()[out] = bufv
		return fmt.Sprintf("Buffering features...\n%d areas created\n", v.Features), "", 0
	case "v.info":
		counts := map[string]int{"point": 0, "line": 0, "area": 0}
		counts[v.Type] = v.Features
		var cols []string
		for _, col := range v.Columns {
			cols = append(cols, col.Name)
		}
		return fmt.Sprintf(" Name:            %s\n Mapset:          PERMANENT\n Project:         %s\n Number of points:       %d\n Number of lines:        %d\n Number of areas:        %d\n Attribute columns: %s\n",
			name, g.loc.Name, counts["point"], counts["line"], counts["area"], strings.Join(cols, ", ")), "", 0
	case "v.db.select":
		return vdbSelect(v, c)
	case "v.db.addcolumn", "v.db.dropcolumn":
		spec := c.opt("columns", false)
		if spec == "" {
			return errf("Required parameter <columns> not set")
		}
		for _, col := range strings.Split(spec, ",") {
			f := strings.Fields(col)
			if len(f) == 0 {
				continue
			}
			i := slices.IndexFunc(v.Columns, func(x grassColumn) bool { return strings.EqualFold(x.Name, f[0]) })
			if c.module == "v.db.dropcolumn" {
				if i <= 0 {
					return errf("Column <%s> not found in table <%s>", f[0], name)
				}
				v.Columns = slices.Delete(v.Columns, i, i+1)
				for _, r := range v.Records {
					delete(r, f[0])
				}
				continue
			}
			if i >= 0 {
				return errf("Column <%s> is already in the table", f[0])
			}
			if len(f) < 2 {
				return errf("Missing type of column <%s>", f[0])
			}
			typ := sqlType(strings.Join(f[1:], " "))
			if typ == "" {
				return errf("Unknown column type <%s>", strings.Join(f[1:], " "))
			}
			v.Columns = append(v.Columns, grassColumn{f[0], typ})
			for _, r := range v.Records {
				r[f[0]] = nil
			}
		}
		return "", "", 0
	case "v.to.db":
		if !c.flags['p'] || c.opt("option", false) != "coor" {
			return errf("Only v.to.db -p option=coor is simulated")
		}
		if v.Type != "point" {
			return "cat|x|y|z\n", "", 0
		}
		var b strings.Builder
		b.WriteString("cat|x|y|z\n")
		for i := range v.Features {
			e, n := g.loc.point(v, i)
			fmt.Fprintf(&b, "%d|%s|%s|0\n", i+1, strconv.FormatFloat(e, 'f', -1, 64), strconv.FormatFloat(n, 'f', -1, 64))
		}
		return b.String(), "", 0
	case "g.mapset":
		loc := c.opt("location", false)
		if loc == "" {
			loc = c.opt("project", false)
		}
		if loc == "" {
			loc = g.loc.Name
		}
		l, ok := g.db[loc]
		if !ok || c.opt("mapset", true) != PermanentMapset {
			return errf("Mapset <%s> does not exist in project <%s>", c.opt("mapset", true), loc)
		}
		g.switchTo(l)
		return "", fmt.Sprintf("Mapset switched to <%s@%s>\n", PermanentMapset, loc), 0
	case "d.rast", "d.vect":
		t := "raster"
		if c.module == "d.vect" {
			t = "vector"
		}
		name := mapName(c.opt("map", true))
		if !g.exists(t, name) {
			return errf("%s map <%s> not found", t, name)
		}
		argv := []string{c.module, "map=" + name + "@" + PermanentMapset}
		for _, k := range slices.Sorted(maps.Keys(c.opts)) {
			if k != "map" {
				argv = append(argv, k+"="+c.opts[k])
			}
		}
		for _, f := range slices.Sorted(maps.Keys(c.flags)) {
			argv = append(argv, "-"+string(f))
		}
		g.addLayer(t, name, argv)
		return "", "", 0
	case "d.erase":
		g.layers = nil
		return "", "", 0
	case "help", "g.manual":
		return "Simulated modules: d.erase d.rast d.vect g.copy g.list g.mapset g.region g.remove g.rename g.version r.info r.mapcalc r.slope.aspect r.univar v.buffer v.db.addcolumn v.db.dropcolumn v.db.select v.info v.to.db\n", "", 0
	}
	if strings.Contains(c.module, ".") {
		return errf("Module <%s> is not available in the simulator", c.module)
	}
	return "", c.module + ": command not found\n", 127
}

// gnum formats a number as GRASS prints it (up to 6 decimals).
func gnum(v float64) string {
	s := strconv.FormatFloat(v, 'f', 6, 64)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	if s == "-0" {
		s = "0"
	}
	return s
}

func (g *grass) regionText(shell bool) string {
	r := g.region
	if shell {
		return fmt.Sprintf("n=%g\ns=%g\nw=%g\ne=%g\nnsres=%g\newres=%g\nrows=%d\ncols=%d\ncells=%d\n", r.N, r.S, r.W, r.E, r.NSRes, r.EWRes, r.rows(), r.cols(), r.rows()*r.cols())
	}
	return fmt.Sprintf("projection: 99 (Lambert Conformal Conic)\nzone:       0\ndatum:      nad83\nellipsoid:  a=6378137 es=0.006694380022900787\nnorth:      %g\nsouth:      %g\nwest:       %g\neast:       %g\nnsres:      %g\newres:      %g\nrows:       %d\ncols:       %d\ncells:      %d\n",
		r.N, r.S, r.W, r.E, r.NSRes, r.EWRes, r.rows(), r.cols(), r.rows()*r.cols())
}

// mapcalc evaluates "out = expr" cell by cell.
func (g *grass) mapcalc(line string, over bool) (string, string, int) {
	i := -1
	for k := 0; k < len(line); k++ {
		if line[k] == '=' && (k+1 >= len(line) || line[k+1] != '=') && (k == 0 || !strings.ContainsRune("<>!=", rune(line[k-1]))) {
			i = k
			break
		}
	}
	if i < 0 {
		return "", "ERROR: expression must have the form: result = expression\n", 1
	}
	out := strings.TrimSpace(line[:i])
	if !expr.IsIdent(out) {
		return "", fmt.Sprintf("ERROR: <%s> is an illegal file name\n", out), 1
	}
	if _, exists := g.rasters()[out]; exists && !over {
		return "", fmt.Sprintf("ERROR: option <output>: <%s> exists. To overwrite, use the --overwrite flag\n", out), 1
	}
	node, err := expr.Parse(line[i+1:], expr.Mapcalc)
	if err != nil {
		return "", "ERROR: syntax error in expression: " + err.Error() + "\n", 1
	}
	env := expr.NewEnv(expr.Mapcalc)
	var refs []*grassRaster
	var refNames []string
	for _, v := range expr.FreeVars(node) {
		r, ok := g.rasters()[v]
		if !ok {
			if _, builtin := env.Lookup(v, nil); builtin {
				continue
			}
			return "", fmt.Sprintf("ERROR: Raster map <%s> not found\n", v), 1
		}
		refs = append(refs, r)
		refNames = append(refNames, v)
	}
	data := make([]float64, g.loc.Rows*g.loc.Cols)
	integral := true
	locals := map[string]expr.Value{}
	for cell := range data {
		for k, r := range refs {
			locals[refNames[k]] = expr.Number(r.Data[cell])
		}
		v, err := env.Num(node, locals)
		if err != nil {
			return "", "ERROR: " + err.Error() + "\n", 1
		}
		if math.IsInf(v, 0) {
			v = math.NaN()
		}
		data[cell] = v
		if !math.IsNaN(v) && v != math.Trunc(v) {
			integral = false
		}
	}
	typ := "DCELL"
	if integral {
		typ = "CELL"
	}
	g.rasters()[out] = &grassRaster{Name: out, Data: data, Type: typ, History: "r.mapcalc " + strings.TrimSpace(line)}
	return "", "", 0
}

// slopeAspect computes slope and aspect in degrees (Horn's method on the
// 3×3 neighbourhood; edge cells are null).
func slopeAspect(l *grassLocation, e []float64) ([]float64, []float64) {
	sl := make([]float64, len(e))
	as := make([]float64, len(e))
	rows, cols := l.Rows, l.Cols
	nsres, ewres := l.nsres(), l.ewres()
	at := func(r, c int) float64 { return e[r*cols+c] }
	for r := 0; r < rows; r++ {
		for c := 0; c < cols; c++ {
			i := r*cols + c
			if r == 0 || c == 0 || r == rows-1 || c == cols-1 {
				sl[i], as[i] = math.NaN(), math.NaN()
				continue
			}
			dzdx := ((at(r-1, c+1) + 2*at(r, c+1) + at(r+1, c+1)) - (at(r-1, c-1) + 2*at(r, c-1) + at(r+1, c-1))) / (8 * ewres)
			dzdy := ((at(r+1, c-1) + 2*at(r+1, c) + at(r+1, c+1)) - (at(r-1, c-1) + 2*at(r-1, c) + at(r-1, c+1))) / (8 * nsres)
			sl[i] = math.Atan(math.Hypot(dzdx, dzdy)) * 180 / math.Pi
			a := math.Atan2(dzdy, -dzdx) * 180 / math.Pi
			if a < 0 {
				a += 360
			}
			as[i] = a
		}
	}
	return sl, as
}

// sqlType is the SQL type db.describe reports for a column type of
// v.db.addcolumn; "" for an unknown one.
func sqlType(t string) string {
	t = strings.ToLower(strings.TrimSpace(t))
	switch {
	case t == "integer" || t == "int":
		return "INTEGER"
	case t == "double precision" || t == "double" || t == "real":
		return "DOUBLE PRECISION"
	case strings.HasPrefix(t, "varchar") || strings.HasPrefix(t, "char"):
		return "CHARACTER"
	case t == "text":
		return "TEXT"
	case t == "date":
		return "DATE"
	}
	return ""
}

func cloneRecords(rs []map[string]any) []map[string]any {
	out := make([]map[string]any, len(rs))
	for i, r := range rs {
		out[i] = maps.Clone(r)
	}
	return out
}

// vdbSelect is v.db.select: the attribute table as text (columns
// separated by |, a header line unless -c) or, with format=json, GRASS
// 8.4's JSON {"info": {"columns": [{"name", "sql_type", "is_number"}]},
// "records": [...]}; where=COL='VALUE' (or COL=NUMBER) filters the rows.
func vdbSelect(v *grassVector, c gcmd) (string, string, int) {
	rows := v.Records
	if w := c.opt("where", false); w != "" {
		col, val, ok := strings.Cut(w, "=")
		col, val = strings.TrimSpace(col), strings.Trim(strings.TrimSpace(val), "'\"")
		if !ok || !slices.ContainsFunc(v.Columns, func(x grassColumn) bool { return x.Name == col }) {
			return "", fmt.Sprintf("ERROR: Error in db_open_select_cursor(): no such column: %s\n", col), 1
		}
		rows = nil
		for _, r := range v.Records {
			if cellText(r[col]) == val {
				rows = append(rows, r)
			}
		}
	}
	if strings.EqualFold(c.opt("format", false), "json") {
		var cols []any
		for _, col := range v.Columns {
			cols = append(cols, map[string]any{"name": col.Name, "sql_type": col.SQLType,
				"is_number": col.SQLType == "INTEGER" || col.SQLType == "DOUBLE PRECISION"})
		}
		recs := []any{}
		for _, r := range rows {
			rec := map[string]any{}
			for _, col := range v.Columns {
				rec[col.Name] = r[col.Name]
			}
			recs = append(recs, rec)
		}
		b, err := json.Marshal(map[string]any{"info": map[string]any{"columns": cols}, "records": recs})
		if err != nil {
			return "", "ERROR: " + err.Error() + "\n", 1
		}
		return string(b) + "\n", "", 0
	}
	var b strings.Builder
	var names []string
	for _, col := range v.Columns {
		names = append(names, col.Name)
	}
	if !c.flags['c'] {
		b.WriteString(strings.Join(names, "|") + "\n")
	}
	for _, r := range rows {
		var cells []string
		for _, n := range names {
			cells = append(cells, cellText(r[n]))
		}
		b.WriteString(strings.Join(cells, "|") + "\n")
	}
	return b.String(), "", 0
}

// cellText prints an attribute value as v.db.select does.
func cellText(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case int:
		return strconv.Itoa(v)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}

// Layout.

var (
	grassMapBox     = image.Rect(8, 84, 760, 720)
	grassPanelBox   = image.Rect(768, 82, 1272, 720)
	grassOutputBox  = image.Rect(768, 82, 1272, 680)
	grassConsoleBox = image.Rect(768, 688, 1180, 716)
	grassTabs       = []string{"Layers", "Console", "Data"}
	grassTools      = []struct{ id, caption string }{{"zoomin", "Zoom In"}, {"zoomout", "Zoom Out"}, {"zoomregion", "Zoom to Region"}, {"erase", "Erase Display"}, {"render", "Render"}}
)

func layout() []desktop.Element {
	var l []desktop.Element
	add := func(id, label, kind, caption string, r image.Rectangle) {
		l = append(l, desktop.Element{ID: id, Label: label, Kind: kind, Caption: caption, Box: r})
	}
	add("map", "GRASS map display", "canvas", "", grassMapBox)
	for i, t := range grassTools {
		w := screen.TextW(t.caption) + 20
		x := 8
		for _, p := range grassTools[:i] {
			x += screen.TextW(p.caption) + 24
		}
		add(t.id, "GRASS "+t.caption+" button", "button", t.caption, image.Rect(x, 54, x+w, 78))
	}
	for i, t := range grassTabs {
		add(fmt.Sprintf("tab-%d", i), "GRASS "+t+" tab", "tab", t, image.Rect(768+i*96, 54, 768+i*96+92, 78))
	}
	add("layers", "GRASS layer list", "list", "", grassPanelBox)
	add("output", "GRASS console output", "list", "", grassOutputBox)
	add("console", "GRASS console", "field", "", grassConsoleBox)
	add("run", "GRASS Run button", "button", "Run", image.Rect(1186, 688, 1272, 716))
	add("catalog", "GRASS data catalog", "list", "", grassPanelBox)
	return l
}

var grassTabOf = map[string]int{"layers": 0, "output": 1, "console": 1, "run": 1, "catalog": 2}

// Click runs the console and the toolbar and displays a map
// double-clicked in the data catalog (the machine opens the tabs; only
// left clicks arrive).
func (g *grass) Click(u *desktop.UI, el desktop.Element, button string, clicks int, pt image.Point) {
	switch el.ID {
	case "run":
		u.SubmitField("console")
	case "zoomin":
		g.scale /= 2
	case "zoomout":
		g.scale *= 2
	case "zoomregion":
		g.zoomToRegion()
	case "erase":
		g.layers = nil
	case "catalog":
		if clicks < 2 {
			return
		}
		row := (pt.Y - el.Box.Min.Y - 18) / screen.LineH
		rows := g.catalogRows()
		if row < 0 || row >= len(rows) {
			return
		}
		switch n := rows[row]; n.Type {
		case "raster", "vector":
			g.displayNode(n)
		case "location", "mapset":
			if n.Location != g.loc.Name {
				g.switchTo(g.db[n.Location])
				u.SetStatus("Current project <" + n.Location + ">, mapset <PERMANENT>")
			}
		}
	}
}

// catalogNode is a node of the data catalog: its data (what /init/layer
// queries match) and where it is.
type catalogNode struct {
	Type, Name string // grassdb, location, mapset, raster, vector
	Location   string
}

// data is the node's data dictionary as the data catalog holds it.
func (n catalogNode) data(current string) map[string]any {
	d := map[string]any{"type": n.Type, "name": n.Name}
	if n.Type == "mapset" {
		d["current"], d["lock"], d["owner"], d["is_different_owner"] = n.Location == current, n.Location == current, "user", false
	}
	return d
}

// catalogNodes is the data catalog in depth-first order: the database,
// each location (by name) with its PERMANENT mapset and that mapset's
// rasters then vectors (by name).
func (g *grass) catalogNodes() []catalogNode {
	out := []catalogNode{{Type: "grassdb", Name: GRASSDB}}
	for _, ln := range slices.Sorted(maps.Keys(g.db)) {
		l := g.db[ln]
		out = append(out, catalogNode{"location", ln, ln}, catalogNode{"mapset", PermanentMapset, ln})
		for _, r := range slices.Sorted(maps.Keys(l.rasters)) {
			out = append(out, catalogNode{"raster", r, ln})
		}
		for _, v := range slices.Sorted(maps.Keys(l.vectors)) {
			out = append(out, catalogNode{"vector", v, ln})
		}
	}
	return out
}

// catalogRows lists the rows of the data catalog as drawn: the
// locations, the current one expanded with its mapset and maps.
func (g *grass) catalogRows() []catalogNode {
	var rows []catalogNode
	for _, n := range g.catalogNodes() {
		if n.Type == "location" || n.Location == g.loc.Name && n.Type != "grassdb" {
			rows = append(rows, n)
		}
	}
	return rows
}

// displayNode displays a map of the data catalog (a double click on it):
// in the current location it adds the layer; a map of another location
// asks whether to switch (a modal dialog) and displays nothing.
func (g *grass) displayNode(n catalogNode) bool {
	if n.Location != g.loc.Name {
		return false
	}
	mod := "d.rast"
	if n.Type == "vector" {
		mod = "d.vect"
	}
	g.addLayer(n.Type, n.Name, []string{mod, "map=" + n.Name + "@" + PermanentMapset})
	return true
}

// Submit runs the console's command (unless /init/cmd disabled it).
func (g *grass) Submit(u *desktop.UI, id, text string) bool {
	if id == "console" && !g.cmdDisabled {
		g.runLine(u, text)
		return true
	}
	return false
}

// Shortcut: the simulated GRASS has no shortcuts.
func (g *grass) Shortcut(u *desktop.UI, keys []string) {}

// Scroll scrolls the console output and zooms the map.
func (g *grass) Scroll(u *desktop.UI, el desktop.Element, dx, dy int) {
	switch el.ID {
	case "output":
		g.outScroll = max(0, min(len(g.console), g.outScroll+dy))
	case "map":
		g.scale = expr.RoundSig(g.scale*math.Pow(1.25, float64(-dy)), 10)
	}
}

// Drag on the map pans it.
func (g *grass) Drag(u *desktop.UI, el desktop.Element, from, to image.Point) {
	if el.ID != "map" {
		return
	}
	per := g.scale / ppm // map units per pixel
	g.centerE = expr.RoundSig(g.centerE-float64(to.X-from.X)*per, 10)
	g.centerN = expr.RoundSig(g.centerN+float64(to.Y-from.Y)*per, 10)
}
