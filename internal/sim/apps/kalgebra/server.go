package kalgebra

// The HTTP server of ScienceBoard's KAlgebra build (the fork
// ShiinaHiiragi/kalgebra, src/main.cpp and src/kalgebra.cpp: a small C++
// HTTP server and nlohmann JSON, on the port of the app's first argument,
// 8000 in the benchmark). Every route answers HEAD too, running the same
// handler (the body is not sent); a known path with another method is 405
// with an empty body, as the fork's server answers.
//
//	GET  /version   "1.1"
//	GET  /vars      {NAME: "value as KAlgebra prints it"} (null: no variables)
//	POST /func/2d   body: JSON list of points [[x, y], ...] → one object per
//	                2D plot: {"expr", "color": "#rrggbb", "res": 832,
//	                "(x, y)": bool, ...}; 400 (empty body) on a bad body
//	POST /func/3d   body: the same, [[x, y, z], ...] → {"expr", "style": 2,
//	                "(x, y, z)": bool, ...} for the 3D plot ("expr": "": none)
//	POST /tab       body: an integer (C++ std::stoi) → "OK"; 400 if none
//	POST /add/calc  body: raw text → "OK", calculated as the console does
//	POST /add/2d    body: raw expression → "OK", plotted in 2D
//	POST /add/3d    body: raw expression → "OK", plotted in 3D
//
// The /add routes queue their work to the GUI thread and always answer
// "OK": an expression KAlgebra cannot plot is dropped (the status line
// says why). Point keys print the coordinates as nlohmann's json::dump
// does ("(-13, -15)", "(0.42, 0.5219615556186337)", "(0, -1.0)"). A point
// is on an explicit plot y = f(x) (z = f(x, y)) if |f(x) - y| ≤ 1e-4 and
// on an implicit one f(x, y[, z]) = 0 if |f(x, y[, z])| ≤ 1e-4, both sides
// as C++ floats and f(x) as KAlgebra prints it (12 significant digits).

import (
	"encoding/json"
	"errors"
	"math"
	"net/url"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/expr"
)

// ServerVersion is what GET /version answers (the fork's SERVER_VERSION).
const ServerVersion = "1.1"

// Resolution is the "res" of every 2D plot: the function model's
// resolution at the Normal setting of the 2D Graph menu (the simulator has
// no resolution menu).
const Resolution = 832

// Style is the "style" of the 3D plot: Analitza's Solid (0 dots, 1 lines,
// 2 solid; the simulator has no style menu).
const Style = 2

// kalRoutes maps each route to the method it is registered for.
var kalRoutes = map[string]string{
	"/version": "GET", "/vars": "GET", "/func/2d": "POST", "/func/3d": "POST",
	"/tab": "POST", "/add/calc": "POST", "/add/2d": "POST", "/add/3d": "POST",
}

// Serve serves the routes of the fork's server (see the top of server.go).
func (k *kalgebra) Serve(u *desktop.UI, method, p string, _ url.Values, body []byte) ([]byte, int, bool) {
	want, ok := kalRoutes[p]
	if !ok {
		return nil, 0, false
	}
	if method != want && method != "HEAD" {
		return nil, 405, true
	}
	switch p {
	case "/version", "/vars":
		return ServeState(nil, k.State(), method, p, nil, body)
	case "/func/2d", "/func/3d":
		points, err := parsePoints(body)
		if err != nil {
			return nil, 400, true
		}
		var v any
		if p == "/func/2d" {
			v, err = k.func2d(points)
		} else {
			v, err = k.func3d(points)
		}
		if err != nil {
			return nil, 400, true
		}
		return desktop.JSON(v), 200, true
	case "/tab":
		i, ok := stoi(string(body))
		if !ok {
			return nil, 400, true
		}
		if i >= 0 && i < len(kalTabs) { // QTabWidget ignores other indexes
			k.Open = i
		}
		return []byte("OK"), 200, true
	case "/add/calc":
		k.calculate(u, string(body))
	case "/add/2d", "/add/3d":
		dim := 2
		if p == "/add/3d" {
			dim = 3
		}
		if pl, err := k.addPlot(string(body), dim); err != nil {
			if u != nil {
				u.SetStatus("Error: " + err.Error())
			}
		} else {
			k.insert(pl)
		}
	}
	return []byte("OK"), 200, true
}

// ServeState answers the routes of the fork's server that only read
// KAlgebra from a state State returned (see desktop.AppSpec.ServeState):
// GET /version, and GET /vars, the state's "vars". ok is false for the
// other routes (the /func queries among them: the state does not carry
// the plots' functions).
func ServeState(_ desktop.Files, state map[string]any, method, p string, _ url.Values, _ []byte) ([]byte, int, bool) {
	if p != "/version" && p != "/vars" {
		return nil, 0, false
	}
	if method != kalRoutes[p] && method != "HEAD" {
		return nil, 405, true
	}
	if p == "/version" {
		return []byte(ServerVersion), 200, true
	}
	vars, ok := state["vars"]
	if !ok {
		return nil, 0, false
	}
	return desktop.JSON(vars), 200, true
}

// vars is GET /vars: every variable's value as KAlgebra prints it; nil
// (JSON null, as nlohmann prints an empty json) when there is none.
func (k *kalgebra) vars() map[string]any {
	vs := k.env.Vars()
	if len(vs) == 0 {
		return nil
	}
	out := map[string]any{}
	for name, v := range vs {
		out[name] = v.String()
	}
	return out
}

// stoi parses the leading integer of s as C++'s std::stoi does (leading
// white space, a sign, digits; the rest ignored); ok is false when there
// are no digits or the number does not fit an int.
func stoi(s string) (int, bool) {
	s = strings.TrimLeft(s, " \t\n\v\f\r")
	end := 0
	if end < len(s) && (s[end] == '+' || s[end] == '-') {
		end++
	}
	digits := end
	for end < len(s) && '0' <= s[end] && s[end] <= '9' {
		end++
	}
	if end == digits {
		return 0, false
	}
	n, err := strconv.ParseInt(s[:end], 10, 32)
	return int(n), err == nil
}

// A kpoint is one point of a /func request: its coordinates (nil where a
// coordinate is not a number) and their texts as nlohmann prints them.
type kpoint struct {
	coords []*float64
	texts  []string
}

// parsePoints reads a /func body as nlohmann's json::parse and the range
// loop over it do (desktop.RangeJSON), numbers as written. An element that
// is not a list is an error only once the server indexes it, so it is kept as a
// point without coordinates.
func parsePoints(body []byte) ([]kpoint, error) {
	elems, err := desktop.RangeJSON(body, true)
	if err != nil {
		return nil, err
	}
	out := make([]kpoint, len(elems))
	for i, e := range elems {
		list, isList := e.([]any)
		if !isList {
			continue
		}
		out[i].coords = make([]*float64, len(list))
		out[i].texts = make([]string, len(list))
		for j, c := range list {
			out[i].texts[j] = nlohmannDump(c)
			if n, isNum := c.(json.Number); isNum {
				f, _ := strconv.ParseFloat(string(n), 64)
				out[i].coords[j] = &f
			}
		}
	}
	return out, nil
}

// key is the point's key in a /func reply: "(x, y)" or "(x, y, z)" from
// its first dim coordinates; ok is false when the point lacks one (the
// server fails on it).
func (p kpoint) key(dim int) (key string, coords []float64, ok bool) {
	if len(p.coords) < dim {
		return "", nil, false
	}
	coords = make([]float64, dim)
	for i := range dim {
		if p.coords[i] == nil {
			return "", nil, false
		}
		coords[i] = *p.coords[i]
	}
	return "(" + strings.Join(p.texts[:dim], ", ") + ")", coords, true
}

// func2d is POST /func/2d: one object per 2D plot.
func (k *kalgebra) func2d(points []kpoint) ([]any, error) {
	out := []any{}
	for _, pl := range k.plotsOf(2) {
		obj := map[string]any{"expr": pl.Expr, "color": pl.Color, "res": Resolution}
		for _, pt := range points {
			key, coords, ok := pt.key(2)
			if !ok {
				return nil, errors.New("bad point")
			}
			obj[key] = k.onPlot(pl, coords)
		}
		out = append(out, obj)
	}
	return out, nil
}

// func3d is POST /func/3d: the 3D plot's object.
func (k *kalgebra) func3d(points []kpoint) (map[string]any, error) {
	ps := k.plotsOf(3)
	if len(ps) == 0 {
		return map[string]any{"expr": "", "style": Style}, nil
	}
	pl := ps[len(ps)-1]
	obj := map[string]any{"expr": pl.Expr, "style": Style}
	for _, pt := range points {
		key, coords, ok := pt.key(3)
		if !ok {
			return nil, errors.New("bad point")
		}
		obj[key] = k.onPlot(pl, coords)
	}
	return obj, nil
}

// onPlot reports whether the point (as many coordinates as the plot's
// dimension) lies on the plot, as the fork's server decides it: f at the
// point's leading coordinates (explicit) or at all of them (implicit),
// printed with 12 significant digits, compared with the last coordinate
// (explicit) or 0 (implicit) as C++ floats within 1e-4.
func (k *kalgebra) onPlot(p *kplot, pt []float64) bool {
	if len(pt) != p.Dim {
		return false
	}
	v, err := k.plotValue(p, pt)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return false
	}
	v = expr.RoundSig(v, 12)
	want := 0.0
	if p.Kind == "explicit" {
		want = pt[p.Dim-1]
	}
	d := float32(v) - float32(want)
	return math.Abs(float64(d)) <= 1e-4
}

// nlohmannDump prints a JSON value (decoded with UseNumber) as nlohmann's
// json::dump does; only numbers matter for point keys.
func nlohmannDump(v any) string {
	switch v := v.(type) {
	case json.Number:
		return NlohmannNumber(string(v))
	case nil:
		return "null"
	case bool:
		return strconv.FormatBool(v)
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// NlohmannNumber prints a JSON number literal as nlohmann's json::dump
// prints the number json::parse reads from it: an integer literal (no
// fraction, no exponent) that fits 64 bits as is ("-13", "-0" as "0"),
// any other as a double in the shortest form that reads back, in decimal
// notation when its decimal point falls within 15 digits of the first
// digit and no more than 4 zeros after the point ("0.42", "-1.0",
// "16852337.69353376", "0.0001"), else in exponent notation with at least
// two exponent digits ("1e-05", "1.5e+16").
func NlohmannNumber(lit string) string {
	if !strings.ContainsAny(lit, ".eE") {
		if i, err := strconv.ParseInt(lit, 10, 64); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if u, err := strconv.ParseUint(lit, 10, 64); err == nil {
			return strconv.FormatUint(u, 10)
		}
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return lit
	}
	return nlohmannFloat(f)
}

// nlohmannFloat is nlohmann's to_chars for a double (dtoa_impl::
// format_buffer with kMinExp -4 and kMaxExp 15).
func nlohmannFloat(f float64) string {
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		return "null"
	case f == 0:
		if math.Signbit(f) {
			return "-0.0"
		}
		return "0.0"
	}
	sign := ""
	if f < 0 {
		sign, f = "-", -f
	}
	// Shortest digits and the decimal exponent: f = 0.DIGITS × 10^n.
	e := strconv.FormatFloat(f, 'e', -1, 64) // d.ddde±XX
	mant, exp, _ := strings.Cut(e, "e")
	digits := strings.Replace(mant, ".", "", 1)
	x, _ := strconv.Atoi(exp)
	k, n := len(digits), x+1
	var s string
	switch {
	case k <= n && n <= 15:
		s = digits + strings.Repeat("0", n-k) + ".0"
	case 0 < n && n <= 15:
		s = digits[:n] + "." + digits[n:]
	case -4 < n && n <= 0:
		s = "0." + strings.Repeat("0", -n) + digits
	default:
		s = digits[:1]
		if k > 1 {
			s += "." + digits[1:]
		}
		e := n - 1
		es := "+"
		if e < 0 {
			es, e = "-", -e
		}
		if e < 10 {
			es += "0"
		}
		s += "e" + es + strconv.Itoa(e)
	}
	return sign + s
}
