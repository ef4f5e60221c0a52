// Package redact is codapipe's one rule for credentials in anything it
// records or prints: a URL's user information (user:password@, token@)
// becomes "***@", the value of a query parameter that looks like a
// credential (key, token, password, secret, signature, X-Amz-*, ...)
// becomes "***", and a Secrets set replaces every known secret string
// (and the base64 of a user:password pair, as HTTP basic auth sends it)
// in free text. Every URL that is logged, put in an error or recorded
// (trajectories, judgements, the vote cache) goes through URL; every
// line a command prints goes through a Writer.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// Mask replaces what is hidden.
const Mask = "***"

// URL hides the credentials of one URL or of a comma-separated list of
// URLs (as NATS takes them): the user information becomes "***@" and the
// values of credential-like query parameters become "***". Scheme, host,
// port and path are kept, so the result still names the endpoint (and
// two endpoints that differ only in their credentials look the same).
// A string that is not a URL is returned with any embedded URL redacted
// as Text does.
func URL(s string) string {
	parts := strings.Split(s, ",")
	for i, p := range parts {
		parts[i] = oneURL(p)
	}
	return strings.Join(parts, ",")
}

func oneURL(s string) string {
	start := 0
	if k := strings.Index(s, "://"); k >= 0 {
		start = k + 3
	}
	end := len(s)
	if e := strings.IndexAny(s[start:], "/?#"); e >= 0 {
		end = start + e
	}
	// The user information is what comes before the authority's last "@"
	// (a path or query may hold an "@" of its own).
	if at := strings.LastIndexByte(s[start:end], '@'); at >= 0 {
		s = s[:start] + Mask + s[start+at:]
	}
	return query(s)
}

// query masks the values of credential-like query parameters.
func query(s string) string {
	q := strings.IndexByte(s, '?')
	if q < 0 {
		return s
	}
	end := len(s)
	if h := strings.IndexByte(s[q:], '#'); h >= 0 {
		end = q + h
	}
	params := strings.Split(s[q+1:end], "&")
	for i, p := range params {
		name, _, ok := strings.Cut(p, "=")
		if ok && credentialParam(name) {
			params[i] = name + "=" + Mask
		}
	}
	return s[:q+1] + strings.Join(params, "&") + s[end:]
}

// credentialWords are the query parameter names (or parts of them, case
// ignored) whose values are credentials.
var credentialWords = []string{"key", "token", "password", "passwd", "pwd", "secret", "signature", "sig", "credential", "auth", "x-amz-"}

func credentialParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, w := range credentialWords {
		if strings.Contains(name, w) {
			return true
		}
	}
	return false
}

// urlInText finds URLs with user information or a query in free text.
var urlInText = regexp.MustCompile(`[A-Za-z][A-Za-z0-9+.\-]*://[^\s"'<>,]+`)

// Text hides the credentials of every URL in s (see URL).
func Text(s string) string {
	if !strings.Contains(s, "://") {
		return s
	}
	return urlInText.ReplaceAllStringFunc(s, oneURL)
}

// Secrets is a set of secret strings (API keys, passwords, tokens, the
// content of credentials files) that must appear nowhere in output. The
// zero value is empty and ready; it is safe for concurrent use.
type Secrets struct {
	mu   sync.RWMutex
	vals []string
}

// minSecret is the shortest string Secrets replaces: shorter ones would
// mask ordinary words and numbers.
const minSecret = 4

// Add adds secrets; empty and very short strings are ignored.
func (s *Secrets) Add(vals ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range vals {
		if len(v) < minSecret {
			continue
		}
		// A secret with a quote, a backslash or a control character is
		// printed escaped by JSON log lines and by %q: those forms too.
		for _, form := range []string{v, escapedJSON(v), escapedGo(v)} {
			if !slices.Contains(s.vals, form) {
				s.vals = append(s.vals, form)
			}
		}
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(s.vals, func(a, b string) int { return len(b) - len(a) })
}

// AddUserinfo adds a user:password pair: the password, and the base64 of
// "user:password" as HTTP basic authentication sends it.
func (s *Secrets) AddUserinfo(user, password string) {
	if password == "" && user == "" {
		return
	}
	s.Add(password, base64.StdEncoding.EncodeToString([]byte(user+":"+password)))
}

// AddURL adds the credentials in a URL's (or URL list's) user
// information.
func (s *Secrets) AddURL(raw string) {
	for _, p := range strings.Split(raw, ",") {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		pw, ok := u.User.Password()
		if ok {
			s.AddUserinfo(u.User.Username(), pw)
		} else {
			s.Add(u.User.Username()) // a token as the user name
		}
	}
}

// Strip returns msg with its URLs redacted (Text) and every known secret
// replaced by Mask.
func (s *Secrets) Strip(msg string) string {
	msg = Text(msg)
	if s == nil {
		return msg
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.vals {
		if strings.Contains(msg, v) {
			msg = strings.ReplaceAll(msg, v, Mask)
		}
	}
	return msg
}

// Writer returns a writer that strips (Strip) every write before passing
// it to w. Each write is redacted on its own, so a secret must not be
// split across writes: log handlers and fmt.Fprint write whole lines.
// Its Unwrap method returns w (to tell whether the output is a terminal).
func (s *Secrets) Writer(w io.Writer) io.Writer { return &writer{s: s, w: w} }

type writer struct {
	s *Secrets
	w io.Writer
}

// Unwrap returns the writer w writes to.
func (w *writer) Unwrap() io.Writer { return w.w }

func (w *writer) Write(p []byte) (int, error) {
	out := w.s.Strip(string(p))
	if _, err := io.WriteString(w.w, out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Userinfo splits a URL's user information off: the URL without it (for
// the request line and for recording) and the user and password (ok
// false when the URL has none).
func Userinfo(raw string) (bare, user, password string, ok bool) {
	u, err := url.Parse(raw)
	if err != nil || u.User == nil {
		return raw, "", "", false
	}
	user = u.User.Username()
	password, _ = u.User.Password()
	u.User = nil
	return u.String(), user, password, true
}

// Error returns err with its message stripped (Strip); errors.Is and
// errors.As still see err. nil stays nil.
func (s *Secrets) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	if clean := s.Strip(msg); clean != msg {
		return &redacted{msg: clean, err: err}
	}
	return err
}

type redacted struct {
	msg string
	err error
}

func (e *redacted) Error() string { return e.msg }
func (e *redacted) Unwrap() error { return e.err }

// escapedJSON is v as it stands inside a JSON string (without the quotes).
func escapedJSON(v string) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return v
	}
	out := strings.TrimSuffix(b.String(), "\n")
	return strings.TrimSuffix(strings.TrimPrefix(out, `"`), `"`)
}

// escapedGo is v as %q prints it (without the quotes).
func escapedGo(v string) string {
	q := strconv.Quote(v)
	return q[1 : len(q)-1]
}
