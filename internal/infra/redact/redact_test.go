package redact

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"testing"
)

func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"nats://h:4222":                     "nats://h:4222",
		"nats://u:p@h:4222":                 "nats://***@h:4222",
		"nats://h1:4222,nats://u:p@h2:4222": "nats://h1:4222,nats://***@h2:4222",
		"tls://token@h":                     "tls://***@h",
		"http://u:p%40ss@judge:8000/v1":     "http://***@judge:8000/v1",
		"http://u:p@ss@judge:8000/v1":       "http://***@judge:8000/v1",
		"http://judge:8000/v1/a@b":          "http://judge:8000/v1/a@b",
		"u:p@h:4222":                        "***@h:4222",
		"https://h/v1?api_key=K&model=m":    "https://h/v1?api_key=***&model=m",
		"https://b.s3/x?X-Amz-Signature=S&X-Amz-Credential=C&partNumber=1#f": "https://b.s3/x?X-Amz-Signature=***&X-Amz-Credential=***&partNumber=1#f",
		"https://h/v1?Token=T": "https://h/v1?Token=***",
		"":                     "",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestText(t *testing.T) {
	for in, want := range map[string]string{
		`judge at http://u:hunter2@j:8000/v1: connection refused`: `judge at http://***@j:8000/v1: connection refused`,
		`Post "https://k:s@h/v1/chat/completions?key=abc": EOF`:   `Post "https://***@h/v1/chat/completions?key=***": EOF`,
		`no URL here, user@example.com`:                           `no URL here, user@example.com`,
		`two: nats://a:b@h1, s3 http://c:d@h2/`:                   `two: nats://***@h1, s3 http://***@h2/`,
	} {
		if got := Text(in); got != want {
			t.Errorf("Text(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecrets(t *testing.T) {
	var s Secrets
	s.Add("sk-planner-123", "ab", "")
	s.AddUserinfo("alice", "pa55word")
	s.AddURL("http://bob:b0bsecret@h/v1,nats://tok3n@h2")
	basic := base64.StdEncoding.EncodeToString([]byte("alice:pa55word"))
	in := fmt.Sprintf("key sk-planner-123 pw pa55word basic %s bob b0bsecret tok3n ab", basic)
	want := "key *** pw *** basic *** bob *** *** ab"
	if got := s.Strip(in); got != want {
		t.Errorf("Strip = %q, want %q", got, want)
	}
	var buf bytes.Buffer
	fmt.Fprintf(s.Writer(&buf), "err: Post http://x:y@h/: key sk-planner-123\n")
	if got, want := buf.String(), "err: Post http://***@h/: key ***\n"; got != want {
		t.Errorf("Writer wrote %q, want %q", got, want)
	}
	var nilS *Secrets
	if got := nilS.Strip("http://a:b@h"); got != "http://***@h" {
		t.Errorf("nil Strip = %q", got)
	}
}

func TestUserinfo(t *testing.T) {
	bare, u, p, ok := Userinfo("http://al%40ice:p%3Aw@h:1/v1")
	if !ok || bare != "http://h:1/v1" || u != "al@ice" || p != "p:w" {
		t.Errorf("Userinfo = %q %q %q %v", bare, u, p, ok)
	}
	if bare, _, _, ok := Userinfo("http://h/v1"); ok || bare != "http://h/v1" {
		t.Errorf("Userinfo without = %q %v", bare, ok)
	}
}

func TestWriterUnwrap(t *testing.T) {
	var buf bytes.Buffer
	w := (&Secrets{}).Writer(&buf)
	if u, ok := w.(interface{ Unwrap() io.Writer }); !ok || u.Unwrap() != &buf {
		t.Errorf("Writer(w) does not unwrap to w")
	}
}

// TestStripEscapedSecret: a secret with a quote or a backslash is masked
// in a JSON log line and in %q output too, where it stands escaped.
func TestStripEscapedSecret(t *testing.T) {
	var s Secrets
	pw := `qz"ok\vy`
	s.Add(pw)
	var b strings.Builder
	slog.New(slog.NewJSONHandler(s.Writer(&b), nil)).Info("login", "password", pw)
	fmt.Fprintf(s.Writer(&b), "%q\n", "x"+pw)
	if strings.Contains(b.String(), `qz\"ok\\vy`) || strings.Contains(b.String(), "vy") {
		t.Fatalf("secret shown escaped:\n%s", b.String())
	}
	if !json.Valid([]byte(strings.SplitN(b.String(), "\n", 2)[0])) {
		t.Fatalf("JSON line broken: %s", b.String())
	}
}

// TestSecretsMaskWholeValues (issue 36): a secret is masked where it
// stands as a secret, not inside a bucket, folder or word that happens
// to hold it. With the access key ID codapipe (an identifier) and the
// plain-word password prod, s3://codapipe-prod and .codapipe print
// intact; the secret key is masked everywhere.
func TestSecretsMaskWholeValues(t *testing.T) {
	var s Secrets
	const secretKey = "Xk9-s3cret-Key-0f3a" // long and mixed: anywhere
	s.AddIdentifier("codapipe")
	s.Add(secretKey, "prod", "tok3n")
	for _, tc := range []struct{ in, want string }{
		// identifiers and plain words: only as a credential's value
		{"put s3://codapipe-prod/blobs/ab: ok", "put s3://codapipe-prod/blobs/ab: ok"},
		{"mkdir .codapipe: permission denied", "mkdir .codapipe: permission denied"},
		{"open /home/u/.codapipe/nats", "open /home/u/.codapipe/nats"},
		{"module github.com/codapipe/codapipe", "module github.com/codapipe/codapipe"},
		{"bucket=codapipe-prod dir=.codapipe user=codapipe", "bucket=codapipe-prod dir=.codapipe user=codapipe"},
		{"AWS_ACCESS_KEY_ID=codapipe", "AWS_ACCESS_KEY_ID=***"},
		{`{"access_key": "codapipe", "bucket": "codapipe"}`, `{"access_key": "***", "bucket": "codapipe"}`},
		{"password=prod stage=prod", "password=*** stage=prod"},
		{"password: prod.", "password: ***."},
		{"Authorization: Bearer prod", "Authorization: Bearer ***"},
		{"api_key=codapipe2", "api_key=codapipe2"},
		{"nats://codapipe@h:4222", "nats://***@h:4222"},
		{"https://h/x?X-Amz-Credential=codapipe", "https://h/x?X-Amz-Credential=***"},
		// a short mixed secret: as a whole token
		{"token tok3n, tok3n. (tok3n)", "token ***, ***. (***)"},
		{"retok3ned a-tok3n tok3n.x tok3n_1", "retok3ned a-tok3n tok3n.x tok3n_1"},
		// a long mixed secret: anywhere
		{"s3: " + secretKey + " x" + secretKey + "y", "s3: *** x***y"},
		{`{"secret":"` + secretKey + `"}`, `{"secret":"***"}`},
	} {
		if got := s.Strip(tc.in); got != tc.want {
			t.Errorf("Strip(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// A password with a '#', '/' or '?' that the URL does not percent-encode
// (the cases of issue 40): the authority seems to end early, but the
// user information is still masked, in URL and in Text.
func TestURLUnencodedPassword(t *testing.T) {
	for in, want := range map[string]string{
		"nats://u:ab#SECRET@127.0.0.1:4222":    "nats://***@127.0.0.1:4222",
		"http://u:ab/SECRET@127.0.0.1:1/v1=m":  "http://***@127.0.0.1:1/v1=m",
		"http://u:ab?SECRET@h:8000/v1":         "http://***@h:8000/v1",
		"http://u:a#b/c?d@h":                   "http://***@h",
		"http://u:ab#SECRET@[::1]:8000/v1":     "http://***@[::1]:8000/v1",
		"http://user#SECRET@h/v1":              "http://***@h/v1",
		"http://judge:8000/v1/a@b":             "http://judge:8000/v1/a@b",
		"http://judge/v1/models/m@2":           "http://judge/v1/models/m@2",
		"http://u:ab#SECRET@h:8000/v1?key=K#f": "http://***@h:8000/v1?key=***#f",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
		if got := Text("at " + in + ": refused"); got != "at "+want+": refused" {
			t.Errorf("Text(%q) = %q", in, got)
		}
	}
}

// TestParseURL: what ParseURL refuses, never showing the URL, and what it
// takes (an '@' written %40 in a path; percent-encoded user information).
func TestParseURL(t *testing.T) {
	for raw, ok := range map[string]bool{
		"http://u:p%23w@h:8000/v1":          true,
		"s3://bucket/team%40corp/runs":      true,
		"http://[::1]:8000/v1":              true,
		"http://h/v1?api_key=K":             true,
		"s3://bucket/team@corp/runs":        false,
		"http://tok/en@h:1/v1":              false,
		"http://u:ab#SECRET@h:1/v1":         false,
		"http://u:ab/SECRET@h:1/v1":         false,
		"http://h/v1?x=a@b":                 false,
		"http://u:8000/SECRET@h/v1":         false,
		"http://h/v1#SECRET@h":              false,
		"nats://u:4222/SECRET@127.0.0.1:42": false,
	} {
		u, err := ParseURL("--x", raw)
		if (err == nil) != ok {
			t.Errorf("ParseURL(%q) = %v, %v; want ok %v", raw, u, err, ok)
		}
		if err != nil && (strings.Contains(err.Error(), "SECRET") || !strings.HasPrefix(err.Error(), "--x")) {
			t.Errorf("ParseURL(%q): %v", raw, err)
		}
	}
}
