package sbtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"mime/multipart"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
)

// Pair is one entry of testdata/scienceboard/contract/golden.json: a small
// task and every request the real harness sends for one phase of it, with
// replies of the real servers' shape (README.md beside the file).
type Pair struct {
	Name      string          `json:"name"`
	Phase     string          `json:"phase"` // "initialize" or "evaluate"
	Source    string          `json:"source"`
	Task      json.RawMessage `json:"task"`
	Final     *Final          `json:"final,omitempty"`
	Exchanges []Exchange      `json:"exchanges"`
	// Stage (evaluate pairs): requests the harness does not send that
	// bring a VM, after the task's setup, to the state the golden
	// replies describe; the simulator tests send them first.
	Stage    []Message `json:"stage,omitempty"`
	Passed   *bool     `json:"passed,omitempty"`
	Covers   []string  `json:"covers"`
	Download *Download `json:"download,omitempty"`
}

// Final is the agent's final action for an evaluate pair.
type Final struct {
	Kind   string `json:"kind"`
	Answer string `json:"answer,omitempty"`
}

// Download is the file a download pair's URL serves ("{{URL}}" in the task
// stands for the test server's base URL).
type Download struct {
	URL  string `json:"url"`
	Body string `json:"body"`
}

// Exchange is one request and its reply.
type Exchange struct {
	Request Message `json:"request"`
	Reply   Message `json:"reply"`
}

// Message is a request (Server, Method, Path, Query, ContentType, body) or
// a reply (Status, body). The body is Body (exact text) or BodyJSON (a
// JSON value).
type Message struct {
	Server      string            `json:"server,omitempty"`
	Method      string            `json:"method,omitempty"`
	Path        string            `json:"path,omitempty"`
	Query       map[string]string `json:"query,omitempty"`
	ContentType string            `json:"content_type,omitempty"`
	Status      int               `json:"status,omitempty"`
	Body        *string           `json:"body,omitempty"`
	BodyJSON    json.RawMessage   `json:"body_json,omitempty"`
}

// Golden returns the pairs of the repository's golden file.
func Golden() ([]Pair, error) {
	path := filepath.Join(filepath.Dir(Copy()), "contract", "golden.json")
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc struct {
		About string `json:"about"`
		Pairs []Pair `json:"pairs"`
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return doc.Pairs, nil
}

// TaskFile returns the pair's task as a task file (instruction and steps
// filled in), with {{URL}} replaced by baseURL.
func (p Pair) TaskFile(baseURL string) []byte {
	var m map[string]any
	if err := json.Unmarshal(p.Task, &m); err != nil {
		panic(err)
	}
	m["instruction"] = "golden pair: " + p.Name
	m["steps"] = 5
	if _, ok := m["sort"]; !ok {
		m["sort"] = "VM"
	}
	b, _ := json.Marshal(m)
	return bytes.ReplaceAll(b, []byte("{{URL}}"), []byte(baseURL))
}

// App returns the type of the pair's task: the app it is for
// ("KAlgebra", "ChimeraX", ...).
func (p Pair) App() string {
	var t struct {
		Type string `json:"type"`
	}
	if err := json.Unmarshal(p.Task, &t); err != nil {
		panic(err)
	}
	return t.Type
}

// BodyBytes returns the message's body as bytes (BodyJSON as compact
// JSON); nil when it has none.
func (m Message) BodyBytes() []byte {
	switch {
	case m.Body != nil:
		return []byte(*m.Body)
	case len(m.BodyJSON) > 0:
		var buf bytes.Buffer
		if json.Compact(&buf, m.BodyJSON) == nil {
			return buf.Bytes()
		}
		return m.BodyJSON
	}
	return nil
}

// Values returns the query as url.Values (nil when empty), with stamp put
// for {{STAMP}}.
func (m Message) Values(stamp string) url.Values {
	if len(m.Query) == 0 {
		return nil
	}
	q := url.Values{}
	for k, v := range m.Query {
		q.Set(k, strings.ReplaceAll(v, "{{STAMP}}", stamp))
	}
	return q
}

// stamped returns the message with stamp put for {{STAMP}} in its path,
// query and body.
func (m Message) stamped(stamp string) Message {
	put := func(s string) string { return strings.ReplaceAll(s, "{{STAMP}}", stamp) }
	m.Path = put(m.Path)
	if len(m.Query) > 0 {
		q := make(map[string]string, len(m.Query))
		for k, v := range m.Query {
			q[k] = put(v)
		}
		m.Query = q
	}
	if m.Body != nil {
		b := put(*m.Body)
		m.Body = &b
	}
	if len(m.BodyJSON) > 0 {
		m.BodyJSON = json.RawMessage(put(string(m.BodyJSON)))
	}
	return m
}

// formFile tells which field of a multipart/form-data body is a file
// part: file_data, as the guest server's /setup/upload reads it; the
// other fields are plain form fields.
func formFile(field string) bool { return field == "file_data" }

// formFields returns a multipart message's fields (BodyJSON maps field
// names to contents).
func (m Message) formFields() map[string]string {
	var fields map[string]string
	if err := json.Unmarshal(m.BodyJSON, &fields); err != nil {
		panic(fmt.Sprintf("golden multipart body_json: %v", err))
	}
	return fields
}

// Sent returns the request as the harness sends it, with stamp put for
// {{STAMP}}: its path, query (nil when none), content type and body
// (nil when none; BodyJSON as compact JSON; a multipart/form-data body
// built from BodyJSON's fields, its boundary in the content type).
func (m Message) Sent(stamp string) (path string, query url.Values, contentType string, body []byte) {
	m = m.stamped(stamp)
	if m.ContentType != "multipart/form-data" {
		return m.Path, m.Values(stamp), m.ContentType, m.BodyBytes()
	}
	fields := m.formFields()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		var w io.Writer
		if formFile(k) {
			w, _ = mw.CreateFormFile(k, "data")
		} else {
			w, _ = mw.CreateFormField(k)
		}
		_, _ = io.WriteString(w, fields[k])
	}
	_ = mw.Close()
	return m.Path, m.Values(stamp), mw.FormDataContentType(), buf.Bytes()
}

// MatchRequest compares a request sent or received (server, method,
// path, query, content type, body) with the golden one; "" when they
// match, else what differs. {{STAMP}} in the golden stands for stamp. A
// multipart body is compared by its fields (BodyJSON maps field names to
// contents; file_data is a file part, the others plain fields).
func (m Message) MatchRequest(stamp, server, method, path string, query url.Values, contentType string, body []byte) string {
	m = m.stamped(stamp)
	var diffs []string
	if server != m.Server || method != m.Method || path != m.Path {
		diffs = append(diffs, fmt.Sprintf("sent %s %s %s, want %s %s %s", method, server, path, m.Method, m.Server, m.Path))
	}
	if want := m.Values(stamp); !reflect.DeepEqual(normQuery(query), normQuery(want)) {
		diffs = append(diffs, fmt.Sprintf("query %v, want %v", query, want))
	}
	ct, params, _ := mime.ParseMediaType(contentType)
	if ct != m.ContentType {
		diffs = append(diffs, fmt.Sprintf("content type %q, want %q", contentType, m.ContentType))
	}
	switch {
	case m.ContentType == "multipart/form-data":
		if d := m.matchForm(params["boundary"], body); d != "" {
			diffs = append(diffs, d)
		}
	case m.Body != nil:
		if string(body) != *m.Body {
			diffs = append(diffs, fmt.Sprintf("body %q, want %q", body, *m.Body))
		}
	case len(m.BodyJSON) > 0:
		if !JSONEqual(body, m.BodyJSON) {
			diffs = append(diffs, fmt.Sprintf("JSON body %s, want %s", body, m.BodyBytes()))
		}
	default:
		if len(body) > 0 {
			diffs = append(diffs, fmt.Sprintf("body %q, want none", body))
		}
	}
	return strings.Join(diffs, "; ")
}

// matchForm compares a multipart/form-data body with the golden fields:
// each a plain field, or for file_data a file part, with that content.
func (m Message) matchForm(boundary string, body []byte) string {
	form, err := multipart.NewReader(bytes.NewReader(body), boundary).ReadForm(1 << 20)
	if err != nil {
		return fmt.Sprintf("multipart body %q: %v", body, err)
	}
	defer func() { _ = form.RemoveAll() }()
	fields := m.formFields()
	var diffs []string
	for _, k := range slices.Sorted(maps.Keys(fields)) {
		var got []string
		if formFile(k) {
			for _, fh := range form.File[k] {
				f, err := fh.Open()
				if err != nil {
					return fmt.Sprintf("multipart file %q: %v", k, err)
				}
				b, _ := io.ReadAll(f)
				f.Close()
				got = append(got, string(b))
			}
		} else {
			got = form.Value[k]
		}
		if len(got) != 1 || got[0] != fields[k] {
			diffs = append(diffs, fmt.Sprintf("multipart %s %q, want %q", k, got, fields[k]))
		}
	}
	return strings.Join(diffs, "; ")
}

func normQuery(q url.Values) url.Values {
	if len(q) == 0 {
		return nil
	}
	return q
}

// JSONEqual reports whether a and b hold equal JSON values.
func JSONEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// MatchShape checks a reply against the golden's: the status, the exact
// text of Body, or for BodyJSON the same shape. "" when it matches, else
// the first difference. The shape, recursively: a null in the golden
// matches any value (it stands for a value that may be empty or an
// object, such as Celestia's mark); any other golden value needs one of
// its JSON type (object, list, string, number, bool; a null in the reply
// matches only a golden null); an object needs every key of the golden's
// (more are allowed); a list is compared by its first element, and must
// not be empty where the golden's is not.
func (m Message) MatchShape(status int, body []byte) string {
	if m.Status != 0 && status != m.Status {
		return fmt.Sprintf("status %d, want %d", status, m.Status)
	}
	switch {
	case m.Body != nil:
		if string(body) != *m.Body {
			return fmt.Sprintf("body %q, want %q", body, *m.Body)
		}
	case len(m.BodyJSON) > 0:
		var got, want any
		if err := json.Unmarshal(body, &got); err != nil {
			return fmt.Sprintf("body %q is not JSON: %v", body, err)
		}
		if err := json.Unmarshal(m.BodyJSON, &want); err != nil {
			return "golden body_json: " + err.Error()
		}
		return shape("$", got, want)
	}
	return ""
}

// kind names a decoded JSON value's type.
func kind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case bool:
		return "bool"
	case float64:
		return "number"
	case string:
		return "string"
	case []any:
		return "list"
	case map[string]any:
		return "object"
	}
	return "?"
}

func shape(at string, got, want any) string {
	if want == nil {
		return "" // null in the golden: any value
	}
	if kind(got) != kind(want) {
		return fmt.Sprintf("%s is a %s (%.80v), want a %s", at, kind(got), got, kind(want))
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(w)) {
			gv, ok := g[k]
			if !ok {
				return fmt.Sprintf("%s has no key %q", at, k)
			}
			if d := shape(at+"."+k, gv, w[k]); d != "" {
				return d
			}
		}
	case []any:
		g := got.([]any)
		if len(w) > 0 {
			if len(g) == 0 {
				return fmt.Sprintf("%s is an empty list, want elements", at)
			}
			return shape(at+"[0]", g[0], w[0])
		}
	}
	return ""
}
