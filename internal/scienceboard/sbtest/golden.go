package sbtest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"reflect"
	"sort"
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
	Passed    *bool           `json:"passed,omitempty"`
	Covers    []string        `json:"covers"`
	Download  *Download       `json:"download,omitempty"`
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

// MatchRequest compares a request sent (server, method, path, query,
// content type, body) with the golden one; "" when they match, else what
// differs. {{STAMP}} in the golden stands for stamp. A multipart body is
// compared by its fields (BodyJSON maps field names to contents).
func (m Message) MatchRequest(stamp, server, method, path string, query url.Values, contentType string, body []byte) string {
	var diffs []string
	if server != m.Server || method != m.Method || path != m.Path {
		diffs = append(diffs, fmt.Sprintf("sent %s %s %s, want %s %s %s", method, server, path, m.Method, m.Server, m.Path))
	}
	if want := m.Values(stamp); !reflect.DeepEqual(normQuery(query), normQuery(want)) {
		diffs = append(diffs, fmt.Sprintf("query %v, want %v", query, want))
	}
	ct, _, _ := strings.Cut(contentType, ";")
	if ct != m.ContentType {
		diffs = append(diffs, fmt.Sprintf("content type %q, want %q", contentType, m.ContentType))
	}
	switch {
	case m.ContentType == "multipart/form-data":
		// compared by the caller, which can parse the form
	case m.Body != nil:
		if want := strings.ReplaceAll(*m.Body, "{{STAMP}}", stamp); string(body) != want {
			diffs = append(diffs, fmt.Sprintf("body %q, want %q", body, want))
		}
	case len(m.BodyJSON) > 0:
		want := bytes.ReplaceAll(m.BodyJSON, []byte("{{STAMP}}"), []byte(stamp))
		if !JSONEqual(body, want) {
			diffs = append(diffs, fmt.Sprintf("JSON body %s, want %s", body, want))
		}
	default:
		if len(body) > 0 {
			diffs = append(diffs, fmt.Sprintf("body %q, want none", body))
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
// text of Body, or for BodyJSON the same shape (every key of the golden
// object present with a value of the same JSON type, recursively; lists by
// their first element; extra keys allowed). "" when it matches.
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
		if d := shape("$", got, want); d != "" {
			return d
		}
	}
	return ""
}

func shape(at string, got, want any) string {
	kind := func(v any) string {
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
	if want == nil || got == nil {
		return "" // null in the golden (or the reply) stands for "may be empty"
	}
	if kind(got) != kind(want) {
		return fmt.Sprintf("%s is a %s, want a %s", at, kind(got), kind(want))
	}
	switch w := want.(type) {
	case map[string]any:
		g := got.(map[string]any)
		keys := make([]string, 0, len(w))
		for k := range w {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
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
		if len(w) > 0 && len(g) > 0 {
			return shape(at+"[0]", g[0], w[0])
		}
	}
	return ""
}
