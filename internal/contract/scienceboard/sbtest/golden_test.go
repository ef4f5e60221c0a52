package sbtest

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMatchShape: the shape rules of README.md beside golden.json.
func TestMatchShape(t *testing.T) {
	for _, c := range []struct {
		want, got string
		ok        bool
	}{
		{`{"a": 1, "b": [{"c": "x"}]}`, `{"a": 2.5, "b": [{"c": "y", "d": 1}, 3], "e": null}`, true},
		{`{"a": 1}`, `{"b": 1}`, false},
		{`{"a": "1"}`, `{"a": 1}`, false},
		{`{"a": true}`, `{"a": 1}`, false},
		{`[{"a": 1}]`, `[]`, false},
		{`[]`, `[1]`, true},
		{`{"mark": null}`, `{"mark": {"x": true}}`, true},
		{`{"mark": {"x": true}}`, `{"mark": null}`, false},
		{`{"res": 1}`, `{"res": "..."}`, false},
	} {
		m := Message{Status: 200, BodyJSON: json.RawMessage(c.want)}
		if d := m.MatchShape(200, []byte(c.got)); (d == "") != c.ok {
			t.Errorf("shape of %s against %s: %q", c.got, c.want, d)
		}
	}
	text := "OK"
	m := Message{Status: 200, Body: &text}
	if d := m.MatchShape(200, []byte("OK")); d != "" {
		t.Error(d)
	}
	if d := m.MatchShape(200, []byte("OK\n")); d == "" {
		t.Error("a body that is not the golden's text matches")
	}
	if d := m.MatchShape(500, []byte("OK")); d == "" {
		t.Error("another status matches")
	}
}

// TestSentMatches: every golden request, as Sent builds it, matches
// itself, and a changed one does not.
func TestSentMatches(t *testing.T) {
	pairs, err := Golden()
	if err != nil {
		t.Fatal(err)
	}
	const stamp = "1700000000000"
	n := 0
	for _, p := range pairs {
		for i, ex := range p.Exchanges {
			r := ex.Request
			path, q, ct, body := r.Sent(stamp)
			if d := r.MatchRequest(stamp, r.Server, r.Method, path, q, ct, body); d != "" {
				t.Errorf("%s[%d]: %s", p.Name, i, d)
			}
			if strings.Contains(string(body)+path+q.Encode(), "{{STAMP}}") {
				t.Errorf("%s[%d]: {{STAMP}} sent", p.Name, i)
			}
			other := append(body, 'x')
			if r.ContentType == "multipart/form-data" {
				n++ // a multipart body's epilogue is not compared; its file is
				f := r.formFields()["file_data"]
				other = []byte(strings.Replace(string(body), f, f+"x", 1))
			}
			if d := r.MatchRequest(stamp, r.Server, r.Method, path, q, ct, other); d == "" {
				t.Errorf("%s[%d]: another body matches", p.Name, i)
			}
		}
	}
	if n == 0 {
		t.Error("no multipart request in the golden file")
	}
}
