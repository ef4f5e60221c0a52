// Package grass is part of codapipe's SIMULATOR (see package sim): the
// simulated GRASS GIS, a map display with a toolbar and a layer manager
// (Layers, Console and Data tabs), and the state server of ScienceBoard's
// GRASS build (/dump, /gcmd). The console runs a simulated subset of
// GRASS modules (g.region, g.list, g.remove, g.rename, g.copy, r.mapcalc,
// r.univar, r.info, r.slope.aspect, v.buffer, v.info, v.db.select,
// d.rast, d.vect, d.erase). All rasters share one 90×100 grid of 150 m
// cells; the computational region is state but does not resample maps.
package grass

import (
	"encoding/json"
	"fmt"
	"image"
	"maps"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/expr"
	"github.com/codapipe/codapipe/internal/sim/screen"
)

// Name is the app's name, as task files spell their "type".
const Name = "GRASS GIS"

// Spec describes the simulated GRASS GIS, for a machine's catalogue: the
// GRASS database folders of its location come with it. Its arguments (the
// GUI flag, the mapset) are ignored.
func Spec() desktop.AppSpec {
	dbase := desktop.HomeDir + "/grassdata/"
	files := map[string]string{dbase: "", dbase + "nc_spm_sim/": "", dbase + "nc_spm_sim/PERMANENT/": "", "/app/bin/grass": "#!/bin/sh\n# simulated\n"}
	return desktop.AppSpec{Name: Name, Programs: []string{"grass", "grass8*", "grass7*"}, Elements: layout(), Files: files,
		Start: func(*desktop.UI, []string) desktop.App { return newGRASS() }}
}

const (
	grassRows = 90
	grassCols = 100
	grassRes  = 150.0
	grassN    = 228500.0
	grassS    = grassN - grassRows*grassRes
	grassW    = 630000.0
	grassE    = grassW + grassCols*grassRes
)

type grassRaster struct {
	Name    string
	Data    []float64 // row-major, NaN = null
	Type    string    // CELL, DCELL
	History string
}

type grassVector struct {
	Name     string
	Type     string // point, line, area
	Features int
	Columns  []string
	Buffer   float64
	Source   string
	geomSeed string
}

type grassRegion struct {
	N, S, E, W, NSRes, EWRes float64
}

func (r grassRegion) rows() int { return int(math.Round((r.N - r.S) / r.NSRes)) }
func (r grassRegion) cols() int { return int(math.Round((r.E - r.W) / r.EWRes)) }

type grass struct {
	rasters      map[string]*grassRaster
	vectors      map[string]*grassVector
	region       grassRegion
	layers       []string // "raster/name" or "vector/name", top first
	desktop.Tabs          // 0 layers, 1 console, 2 data
	console      []string
	outScroll    int
	history      []string
	zoom         float64
	panX         float64 // map units
	panY         float64
	catalogue    []string // rows of the data catalog as drawn: "raster/name"
}

// grassElevation returns the fixed synthetic elevation surface.
func grassElevation() []float64 {
	d := make([]float64, grassRows*grassCols)
	for r := 0; r < grassRows; r++ {
		for c := 0; c < grassCols; c++ {
			fr, fc := float64(r), float64(c)
			f := math.Sin(fc*0.07+1.3)*math.Cos(fr*0.05+0.4)*0.5 + math.Sin((fr+fc)*0.031)*0.35 +
				math.Cos(fc*0.13-fr*0.09)*0.15 + math.Sin(fr*0.21)*math.Sin(fc*0.17)*0.08
			d[r*grassCols+c] = math.Round((103+48*f)*1e4) / 1e4
		}
	}
	return d
}

func newGRASS() *grass {
	g := &grass{Tabs: desktop.Tabs{Of: grassTabOf}, rasters: map[string]*grassRaster{}, vectors: map[string]*grassVector{}, zoom: 1}
	elev := grassElevation()
	g.rasters["elevation"] = &grassRaster{Name: "elevation", Data: elev, Type: "DCELL", History: "generated elevation model (SIMULATOR)"}
	lu := make([]float64, len(elev))
	for i, v := range elev {
		r, c := i/grassCols, i%grassCols
		cat := 1 + int(math.Floor((v-55)/15))
		if (r*7+c*3)%11 == 0 {
			cat = 7
		}
		lu[i] = float64(max(1, min(7, cat)))
	}
	g.rasters["landuse"] = &grassRaster{Name: "landuse", Data: lu, Type: "CELL", History: "land use classes 1-7"}
	tmp := append([]float64(nil), elev...)
	for i := range tmp {
		tmp[i] = math.Round(tmp[i])
	}
	g.rasters["elevation_tmp"] = &grassRaster{Name: "elevation_tmp", Data: tmp, Type: "CELL", History: "scratch copy"}
	g.vectors["roads"] = &grassVector{Name: "roads", Type: "line", Features: 42, Columns: []string{"cat", "ROAD_NAME", "SPEED"}, geomSeed: "roads"}
	g.vectors["streams"] = &grassVector{Name: "streams", Type: "line", Features: 87, Columns: []string{"cat", "STREAM_ORDER"}, geomSeed: "streams"}
	g.vectors["schools"] = &grassVector{Name: "schools", Type: "point", Features: 167, Columns: []string{"cat", "NAMESHORT", "CAPACITY"}, geomSeed: "schools"}
	g.region = grassRegion{N: 230000, S: 210000, E: 650000, W: 625000, NSRes: 500, EWRes: 500}
	g.console = []string{"Welcome to GRASS GIS 8.3.1 (SIMULATOR)", "Location nc_spm_sim, mapset PERMANENT"}
	return g
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

// r6 rounds to 6 decimals for the state dump.
func r6(v float64) float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return 0
	}
	return math.Round(v*1e6) / 1e6
}

// State is what /dump serves.
func (g *grass) State() map[string]any {
	rasters := map[string]any{}
	for name, r := range g.rasters {
		n, mn, mx, mean, _, _ := rasterStats(r.Data)
		rasters[name] = map[string]any{"min": r6(mn), "max": r6(mx), "mean": r6(mean), "cells": n, "type": r.Type,
			"rows": grassRows, "cols": grassCols, "history": r.History}
	}
	vectors := map[string]any{}
	for name, v := range g.vectors {
		vectors[name] = map[string]any{"type": v.Type, "features": v.Features, "columns": v.Columns, "buffer": v.Buffer, "source": v.Source}
	}
	display := map[string]any{}
	layers := []any{}
	for _, l := range g.layers {
		typ, name, _ := strings.Cut(l, "/")
		display[name] = typ
		layers = append(layers, l)
	}
	return map[string]any{
		"location": "nc_spm_sim", "mapset": "PERMANENT",
		"region": map[string]any{"n": g.region.N, "s": g.region.S, "e": g.region.E, "w": g.region.W,
			"nsres": g.region.NSRes, "ewres": g.region.EWRes, "rows": g.region.rows(), "cols": g.region.cols()},
		"rasters": rasters, "vectors": vectors,
		"raster_list": append([]string{}, slices.Sorted(maps.Keys(g.rasters))...), "vector_list": append([]string{}, slices.Sorted(maps.Keys(g.vectors))...),
		"layers": layers, "display": display,
		"tab":     []string{"layers", "console", "data"}[g.Open],
		"history": append([]string{}, g.history[max(0, len(g.history)-20):]...),
		"console": append([]string{}, g.console[max(0, len(g.console)-12):]...),
		"view":    map[string]any{"zoom": r6(g.zoom), "pan_x": r6(g.panX), "pan_y": r6(g.panY)},
	}
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
	g.console = append(g.console, "> "+line)
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
		_, ok := g.rasters[name]
		return ok
	}
	_, ok := g.vectors[name]
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

func (g *grass) removeLayer(kind, name string) {
	keep := g.layers[:0]
	for _, l := range g.layers {
		if l != kind+"/"+name {
			keep = append(keep, l)
		}
	}
	g.layers = keep
}

// moduleInput is, for the modules that read one map, the option that
// names it (or the first positional argument) and its kind.
var moduleInput = map[string]struct{ opt, kind string }{
	"r.univar": {"map", "raster"}, "r.info": {"map", "raster"}, "r.slope.aspect": {"elevation", "raster"},
	"v.buffer": {"input", "vector"}, "v.info": {"map", "vector"}, "v.db.select": {"map", "vector"},
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
			r, found = g.rasters[name]
		} else {
			v, found = g.vectors[name]
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
			g.region = grassRegion{N: grassN, S: grassS, E: grassE, W: grassW, NSRes: grassRes, EWRes: grassRes}
		}
		if c.flags['d'] {
			g.region = grassRegion{N: 230000, S: 210000, E: 650000, W: 625000, NSRes: 500, EWRes: 500}
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
		// Align the extent to the resolution, as GRASS does.
		r.S = r.N - float64(max(1, int(math.Round((r.N-r.S)/r.NSRes))))*r.NSRes
		r.E = r.W + float64(max(1, int(math.Round((r.E-r.W)/r.EWRes))))*r.EWRes
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
			names = slices.Sorted(maps.Keys(g.rasters))
		} else {
			names = slices.Sorted(maps.Keys(g.vectors))
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
				delete(g.rasters, n)
			} else {
				delete(g.vectors, n)
			}
			g.removeLayer(t, n)
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
				r := *g.rasters[from]
				r.Name = to
				r.Data = append([]float64(nil), r.Data...)
				g.rasters[to] = &r
				if c.module == "g.rename" {
					delete(g.rasters, from)
				}
			} else {
				v := *g.vectors[from]
				v.Name = to
				g.vectors[to] = &v
				if c.module == "g.rename" {
					delete(g.vectors, from)
				}
			}
			if c.module == "g.rename" {
				for i, l := range g.layers {
					if l == t+"/"+from {
						g.layers[i] = t + "/" + to
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
			name, r.Type, grassRows, grassCols, grassRows*grassCols, grassN, grassS, grassRes, grassE, grassW, grassRes, gnum(mn), gnum(mx), r.History), "", 0
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
		sl, as := slopeAspect(r.Data)
		if slope != "" {
			g.rasters[slope] = &grassRaster{Name: slope, Data: sl, Type: "DCELL", History: "r.slope.aspect elevation=" + name}
		}
		if aspect != "" {
			g.rasters[aspect] = &grassRaster{Name: aspect, Data: as, Type: "DCELL", History: "r.slope.aspect elevation=" + name}
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
		g.vectors[out] = &grassVector{Name: out, Type: "area", Features: v.Features, Columns: []string{"cat"}, Buffer: d, Source: name, geomSeed: v.geomSeed}
		return fmt.Sprintf("Buffering features...\n%d areas created\n", v.Features), "", 0
	case "v.info":
		counts := map[string]int{"point": 0, "line": 0, "area": 0}
		counts[v.Type] = v.Features
		return fmt.Sprintf(" Name:            %s\n Mapset:          PERMANENT\n Number of points:       %d\n Number of lines:        %d\n Number of areas:        %d\n Attribute columns: %s\n",
			name, counts["point"], counts["line"], counts["area"], strings.Join(v.Columns, ", ")), "", 0
	case "v.db.select":
		var b strings.Builder
		b.WriteString(strings.Join(v.Columns, "|") + "\n")
		for i := 1; i <= v.Features; i++ {
			row := []string{strconv.Itoa(i)}
			for _, col := range v.Columns[1:] {
				h := screen.Hash(v.geomSeed, col, strconv.Itoa(i))
				if strings.ToUpper(col) == col && strings.Contains(col, "NAME") {
					row = append(row, fmt.Sprintf("%s_%d", strings.ToUpper(v.geomSeed[:3]), i))
				} else {
					row = append(row, strconv.Itoa(int(h%900)+100))
				}
			}
			b.WriteString(strings.Join(row, "|") + "\n")
		}
		return b.String(), "", 0
	case "d.rast", "d.vect":
		t := "raster"
		if c.module == "d.vect" {
			t = "vector"
		}
		name := c.opt("map", true)
		if !g.exists(t, name) {
			return errf("%s map <%s> not found", t, name)
		}
		g.removeLayer(t, name)
		g.layers = append([]string{t + "/" + name}, g.layers...)
		return "", "", 0
	case "d.erase":
		g.layers = nil
		return "", "", 0
	case "help", "g.manual":
		return "Simulated modules: d.erase d.rast d.vect g.copy g.list g.region g.remove g.rename g.version r.info r.mapcalc r.slope.aspect r.univar v.buffer v.db.select v.info\n", "", 0
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
	if _, exists := g.rasters[out]; exists && !over {
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
		r, ok := g.rasters[v]
		if !ok {
			if _, builtin := env.Lookup(v, nil); builtin {
				continue
			}
			return "", fmt.Sprintf("ERROR: Raster map <%s> not found\n", v), 1
		}
		refs = append(refs, r)
		refNames = append(refNames, v)
	}
	data := make([]float64, grassRows*grassCols)
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
	g.rasters[out] = &grassRaster{Name: out, Data: data, Type: typ, History: "r.mapcalc " + strings.TrimSpace(line)}
	return "", "", 0
}

// slopeAspect computes slope and aspect in degrees (Horn's method on the
// 3×3 neighbourhood; edge cells are null).
func slopeAspect(e []float64) ([]float64, []float64) {
	sl := make([]float64, len(e))
	as := make([]float64, len(e))
	at := func(r, c int) float64 { return e[r*grassCols+c] }
	for r := 0; r < grassRows; r++ {
		for c := 0; c < grassCols; c++ {
			i := r*grassCols + c
			if r == 0 || c == 0 || r == grassRows-1 || c == grassCols-1 {
				sl[i], as[i] = math.NaN(), math.NaN()
				continue
			}
			dzdx := ((at(r-1, c+1) + 2*at(r, c+1) + at(r+1, c+1)) - (at(r-1, c-1) + 2*at(r, c-1) + at(r+1, c-1))) / (8 * grassRes)
			dzdy := ((at(r+1, c-1) + 2*at(r+1, c) + at(r+1, c+1)) - (at(r-1, c-1) + 2*at(r-1, c) + at(r-1, c+1))) / (8 * grassRes)
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

// Serve serves /dump, /version and /gcmd.
func (g *grass) Serve(_ *desktop.UI, _ string, p string, q url.Values, body []byte) ([]byte, int, bool) {
	switch p {
	case "/dump":
		return desktop.JSON(g.State()), 200, true
	case "/version":
		return []byte("0.1"), 200, true
	case "/gcmd":
		var req struct {
			Cmd    string         `json:"cmd"`
			Kwargs map[string]any `json:"kwargs"`
		}
		if err := json.Unmarshal(body, &req); err != nil || req.Cmd == "" {
			return desktop.JSONError(`expected {"cmd": "module", "kwargs": {...}}`), 400, true
		}
		words := []string{req.Cmd}
		for _, k := range slices.Sorted(maps.Keys(req.Kwargs)) {
			v := req.Kwargs[k]
			switch k {
			case "flags":
				words = append(words, "-"+fmt.Sprint(v))
			case "overwrite":
				if b, _ := v.(bool); b {
					words = append(words, "--overwrite")
				}
			default:
				var s string
				switch v := v.(type) {
				case string:
					s = v
				case float64:
					s = strconv.FormatFloat(v, 'f', -1, 64)
				default:
					s = fmt.Sprint(v)
				}
				words = append(words, k+"="+s)
			}
		}
		stdout, stderr, code := g.run(parseGcmd(words))
		g.history = append(g.history, strings.Join(words, " "))
		var out any = stdout
		var parsed any
		if json.Unmarshal([]byte(stdout), &parsed) == nil && strings.HasPrefix(strings.TrimSpace(stdout), "{") {
			out = parsed
		}
		return desktop.JSON(map[string]any{"stdout": out, "stderr": stderr, "returncode": code}), 200, true
	}
	return nil, 0, false
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
		g.zoom = math.Min(64, g.zoom*2)
	case "zoomout":
		g.zoom = math.Max(1.0/64, g.zoom/2)
	case "zoomregion":
		g.zoom, g.panX, g.panY = 1, 0, 0
	case "erase":
		g.layers = nil
	case "catalog":
		if clicks < 2 {
			return
		}
		row := (pt.Y - el.Box.Min.Y - 18) / screen.LineH
		rows := g.catalogRows()
		if row >= 0 && row < len(rows) && strings.Contains(rows[row], "/") {
			kind, name, _ := strings.Cut(rows[row], "/")
			mod := "d.rast"
			if kind == "vector" {
				mod = "d.vect"
			}
			g.runLine(u, mod+" map="+name)
		}
	}
}

// catalogRows lists the rows of the data catalog: headers and maps.
func (g *grass) catalogRows() []string {
	rows := []string{"PERMANENT", "raster"}
	for _, n := range slices.Sorted(maps.Keys(g.rasters)) {
		rows = append(rows, "raster/"+n)
	}
	rows = append(rows, "vector")
	for _, n := range slices.Sorted(maps.Keys(g.vectors)) {
		rows = append(rows, "vector/"+n)
	}
	return rows
}

// Submit runs the console's command.
func (g *grass) Submit(u *desktop.UI, id, text string) bool {
	if id == "console" {
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
		g.zoom = math.Max(1.0/64, math.Min(64, g.zoom*math.Pow(1.25, float64(dy))))
		g.zoom = expr.RoundSig(g.zoom, 10)
	}
}

// Drag on the map pans it.
func (g *grass) Drag(u *desktop.UI, el desktop.Element, from, to image.Point) {
	if el.ID != "map" {
		return
	}
	per := (grassE - grassW) / float64(grassMapBox.Dx()) / g.zoom
	g.panX = expr.RoundSig(g.panX-float64(to.X-from.X)*per, 10)
	g.panY = expr.RoundSig(g.panY+float64(to.Y-from.Y)*per, 10)
}
