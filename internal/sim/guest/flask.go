package guest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"sort"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/contract/pystr"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
)

// The real guest server is a Flask app started with app.run(debug=True)
// (vm_config/server.py run by the osworld.service unit). This file holds
// how such a server answers besides its views' own replies:
//
//   - a view's str is the body, Content-Type text/html; charset=utf-8;
//   - a view's dict or list goes through jsonify, which in debug mode
//     indents by 2 spaces, sorts the keys, escapes non-ASCII (ensure_ascii)
//     and ends with a newline;
//   - an unknown path is Werkzeug's 404 page, a known path with another
//     method its 405 page (with an Allow header), OPTIONS on a route
//     answers 200 with Allow, HEAD is served wherever GET is;
//   - request.json refuses a body whose Content-Type is not JSON (415) or
//     that does not parse (400), each with Werkzeug's HTML error page;
//   - an exception the view does not catch is a 500 with the Werkzeug
//     debugger's HTML traceback page, titled "ExcType: message // Werkzeug
//     Debugger" (writeException).

// writeText answers a view's str return: 200, text/html.
func writeText(w http.ResponseWriter, status int, s string) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, s)
}

// writeFlaskJSON answers v through jsonify in debug mode. v holds maps,
// slices, strings, json.Number, float64, int, bool and nil.
func writeFlaskJSON(w http.ResponseWriter, status int, v any) {
	b, err := pyJSON(v)
	if err != nil {
		writeException(w, "TypeError", err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// pyJSON encodes v as Flask's debug-mode jsonify does: json.dumps(v,
// indent=2, sort_keys=True, ensure_ascii=True) plus a newline.
func pyJSON(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil { // maps encode with sorted keys
		return nil, err
	}
	b := buf.Bytes()
	var out bytes.Buffer
	for len(b) > 0 {
		r, n := utf8.DecodeRune(b)
		if r < utf8.RuneSelf {
			out.WriteByte(b[0])
		} else if r > 0xffff {
			r1, r2 := utf16.EncodeRune(r)
			fmt.Fprintf(&out, `\u%04x\u%04x`, r1, r2)
		} else {
			fmt.Fprintf(&out, `\u%04x`, r)
		}
		b = b[n:]
	}
	return out.Bytes(), nil
}

// werkzeugPage answers Werkzeug's HTML page for an HTTP error.
func werkzeugPage(w http.ResponseWriter, status int, description string) {
	name := http.StatusText(status)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprintf(w, "<!doctype html>\n<html lang=en>\n<title>%d %s</title>\n<h1>%s</h1>\n<p>%s</p>\n",
		status, pyEscape(name), pyEscape(name), description)
}

// notFound is Flask's answer for a path no route serves.
func notFound(w http.ResponseWriter) {
	werkzeugPage(w, http.StatusNotFound, "The requested URL was not found on the server. If you entered the URL manually please check your spelling and try again.")
}

// methodNotAllowed is Flask's answer for a route asked with another
// method.
func methodNotAllowed(w http.ResponseWriter, allow string) {
	w.Header().Set("Allow", allow)
	werkzeugPage(w, http.StatusMethodNotAllowed, "The method is not allowed for the requested URL.")
}

// debuggerPage is the outline of the Werkzeug debugger's traceback page.
const debuggerPage = `<!doctype html>
<html lang=en>
  <head>
    <title>%[1]s // Werkzeug Debugger</title>
  </head>
  <body style="background-color: #fff">
    <div class="debugger">
<h1>%[2]s</h1>
<div class="detail">
  <p class="errormsg">%[1]s</p>
</div>
<!-- codapipe SIMULATOR: the real guest server runs Flask with debug=True, so an
exception its view does not catch answers the Werkzeug debugger's interactive
traceback page with HTTP 500; this is its outline, without the traceback. -->
    </div>
  </body>
</html>
`

// writeException answers an exception the view does not catch: HTTP 500
// with the debugger page, whose title is "exc: msg // Werkzeug Debugger".
func writeException(w http.ResponseWriter, exc, msg string) {
	line := exc
	if msg != "" {
		line += ": " + msg
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(http.StatusInternalServerError)
	fmt.Fprintf(w, debuggerPage, pyEscape(line), pyEscape(exc))
}

// pyEscape is Python's html.escape(s, quote=True).
func pyEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;", `"`, "&quot;", "'", "&#x27;").Replace(s)
}

// requestJSON reads request.json as a view that calls data.get(...)
// needs it: a JSON object. It answers the request (415, 400, or 500 for a
// body that is JSON but no object, which has no .get) and returns false
// when there is none.
func requestJSON(w http.ResponseWriter, r *http.Request) (map[string]any, bool) {
	mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if mt != "application/json" && !(strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")) {
		werkzeugPage(w, http.StatusUnsupportedMediaType, "Did not attempt to load JSON data because the request Content-Type was not &#x27;application/json&#x27;.")
		return nil, false
	}
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	var v any
	err := dec.Decode(&v)
	if err == nil && dec.More() {
		err = fmt.Errorf("extra data after the JSON value")
	}
	if err != nil {
		werkzeugPage(w, http.StatusBadRequest, "Failed to decode JSON object: "+pyEscape(err.Error()))
		return nil, false
	}
	obj, ok := v.(map[string]any)
	if !ok {
		writeException(w, "AttributeError", fmt.Sprintf("'%s' object has no attribute 'get'", pyType(v)))
		return nil, false
	}
	return obj, true
}

// dictGet is Python's data.get(key, def) on a request's JSON object.
func dictGet(data map[string]any, key string, def any) any {
	if v, has := data[key]; has {
		return v
	}
	return def
}

// pyType is the Python type name of a decoded JSON value.
func pyType(v any) string {
	switch x := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string:
		return "str"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	case json.Number:
		if _, err := x.Int64(); err == nil {
			return "int"
		}
		return "float"
	case float64:
		return "float"
	case int:
		return "int"
	}
	return fmt.Sprintf("%T", v)
}

// pyStr is Python's str() of a decoded JSON value, as an f-string or
// requests' params render it. (GRASS's make_command renders its kwargs
// otherwise, lists joined by commas: internal/sim/apps/grass's pyStr.)
func pyStr(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case nil:
		return "None"
	case bool:
		if x {
			return "True"
		}
		return "False"
	case json.Number:
		return x.String()
	}
	return pyRepr(v)
}

// pyRepr is Python's repr() of a decoded JSON value (strings quoted the
// way Python quotes them). It is not scienceboard's message rendering
// (Go-quoted strings, JSON for the rest), which speaks to the operator, not
// as the guest's Python would.
func pyRepr(v any) string {
	switch x := v.(type) {
	case string:
		q := byte('\'')
		if strings.Contains(x, "'") && !strings.Contains(x, `"`) {
			q = '"'
		}
		return pystr.Quote(x, q, false)
	case []any:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case []string:
		parts := make([]string, len(x))
		for i, e := range x {
			parts[i] = pyRepr(e)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = pyRepr(k) + ": " + pyRepr(x[k])
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case float64:
		return scienceboard.PyFloatRepr(x)
	}
	return pyStr(v)
}
