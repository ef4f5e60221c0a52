// Package redact is codapipe's one rule for credentials in anything it
// records or prints: a URL's user information (user:password@, token@)
// becomes "***@", the value of a query parameter that looks like a
// credential (key, token, password, secret, signature, X-Amz-*, ...)
// becomes "***", and a Secrets set replaces the known secret strings
// (and the base64 of a user:password pair, as HTTP basic auth sends it)
// in free text where they stand as secrets, not as parts of other words. Every URL that is logged, put in an error or recorded
// (trajectories, judgements, the vote cache) goes through URL; every
// line a command prints goes through a Writer.
package redact

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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
	if at := userinfoEnd(s, start); at >= 0 {
		s = s[:start] + Mask + s[at:]
	}
	return query(s)
}

// userinfoEnd returns the index of the "@" that ends the user information
// of the URL s whose authority begins at start, or -1 when it has none.
// The user information is what comes before the authority's last "@" (a
// path or query may hold an "@" of its own). A password that holds a '/',
// '?' or '#' the URL did not percent-encode makes the authority seem to end
// early, before an "@" that a host[:port] follows: then that "@" ends the
// user information, unless the authority seen is itself a host[:port]
// followed by a path ("http://h:1/v1/a@b" keeps its path).
func userinfoEnd(s string, start int) int {
	end := len(s)
	if e := strings.IndexAny(s[start:], "/?#"); e >= 0 {
		end = start + e
	}
	if at := strings.LastIndexByte(s[start:end], '@'); at >= 0 {
		return start + at
	}
	if end == len(s) || s[end] == '/' && hostPort(s[start:end]) {
		return -1
	}
	for rest := s[end:]; ; {
		at := strings.LastIndexByte(rest, '@')
		if at < 0 {
			return -1
		}
		host := s[end+at+1:]
		if e := strings.IndexAny(host, "/?#"); e >= 0 {
			host = host[:e]
		}
		if hostPort(host) {
			return end + at
		}
		rest = rest[:at]
	}
}

// hostPort reports whether s is a host name, an IPv4 address or a
// bracketed IPv6 address, with an optional numeric port.
func hostPort(s string) bool {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		i := strings.IndexByte(s, ']')
		if i < 0 {
			return false
		}
		host, port = s[1:i], s[i+1:]
		if port != "" && port[0] != ':' {
			return false
		}
		if strings.Trim(host, "0123456789abcdefABCDEF:.") != "" {
			return false
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i:]
	}
	if port != "" {
		port = port[1:]
		if port == "" || len(port) > 5 || strings.Trim(port, "0123456789") != "" {
			return false
		}
	}
	if host == "" {
		return false
	}
	for _, c := range []byte(host) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_' || c == ':' && s[0] == '[') {
			return false
		}
	}
	return true
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

// credentialNames are query parameter names whose values are credentials
// only as whole names ("code", an Azure Functions key; not country_code).
var credentialNames = []string{"code"}

func credentialParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	if slices.Contains(credentialNames, name) {
		return true
	}
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
	return urlInText.ReplaceAllStringFunc(s, func(u string) string {
		core := strings.TrimRight(u, ".:;!)") // the sentence's, not the URL's
		return oneURL(core) + u[len(core):]
	})
}

// Secrets is a set of secret strings (API keys, passwords, tokens, the
// content of credentials files) that must appear nowhere in output, and
// of credential identifiers (access key IDs) that must not appear as the
// value of a credential. The zero value is empty and ready; it is safe
// for concurrent use.
//
// A secret is masked as far as it can be told from ordinary text:
//   - one of 8 bytes or more that mixes letters, digits or other
//     characters (sk-planner-123, pa55word), or of 16 bytes or more, is
//     masked wherever it appears;
//   - a shorter one that mixes them (tok3n) is masked as a whole token:
//     not where a letter, a digit or '_' goes on either side, nor where
//     a '-' or '.' joins it to one (codapipe-prod, a.tok3n);
//   - a plain word or number (codapipe, 12345678) and every identifier
//     only as the whole value of a credential: after a name such as key,
//     token, password or secret and '=' or ':' (password=…, "api_key":
//     "…", Authorization: Bearer …).
//
// URL user information and credential-like query values are masked
// whatever they hold (Text), so a secret in a URL is hidden in any case.
type Secrets struct {
	mu   sync.RWMutex
	vals []secret
}

// secret is one form of a secret and where Strip masks it.
type secret struct {
	v     string
	reach reach
}

// reach is where a secret is masked.
type reach uint8

const (
	asCredential reach = iota // as the whole value of a credential-like name
	asToken                   // as a whole token
	anywhere
)

// minSecret is the shortest string Secrets replaces: shorter ones would
// mask ordinary words and numbers.
const minSecret = 4

// Add adds secrets; empty and very short strings are ignored.
func (s *Secrets) Add(vals ...string) {
	for _, v := range vals {
		s.add(v, reachOf(v))
	}
}

// AddIdentifier adds credential identifiers, such as an S3 access key
// ID: not secret (S3 and MinIO print them), but a credential's value
// where one is printed, so they are masked only as the whole value of a
// credential-like name (AWS_ACCESS_KEY_ID=…), never in a bucket, path or
// sentence that happens to hold the same word.
func (s *Secrets) AddIdentifier(vals ...string) {
	for _, v := range vals {
		s.add(v, asCredential)
	}
}

func (s *Secrets) add(v string, r reach) {
	if len(v) < minSecret {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// A secret with a quote, a backslash or a control character is
	// printed escaped by JSON log lines and by %q: those forms too.
	for _, form := range []string{v, escapedJSON(v), escapedGo(v)} {
		i := slices.IndexFunc(s.vals, func(x secret) bool { return x.v == form })
		switch {
		case i < 0:
			s.vals = append(s.vals, secret{form, r})
		case s.vals[i].reach < r:
			s.vals[i].reach = r
		}
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortStableFunc(s.vals, func(a, b secret) int { return len(b.v) - len(a.v) })
}

// reachOf is where a secret is masked: see Secrets.
func reachOf(v string) reach {
	var lower, upper, digit, other int
	for _, r := range v {
		switch {
		case r >= 'a' && r <= 'z':
			lower = 1
		case r >= 'A' && r <= 'Z':
			upper = 1
		case r >= '0' && r <= '9':
			digit = 1
		default:
			other = 1
		}
	}
	mixed := lower+upper+digit+other > 1
	switch {
	case len(v) >= 16, mixed && len(v) >= 8:
		return anywhere
	case mixed:
		return asToken
	}
	return asCredential
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
	parts := strings.Split(raw, ",")
	if len(parts) > 1 {
		parts = append(parts, raw) // one URL whose password holds a ','
	}
	for _, p := range parts {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil {
			continue
		}
		s.AddQuery(u.Query())
		if u.User == nil {
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

// AddQuery adds the values of a URL's credential-like query parameters
// (api_key=..., token=...).
func (s *Secrets) AddQuery(q url.Values) {
	for name, vals := range q {
		if credentialParam(name) {
			s.Add(vals...)
		}
	}
}

// Strip returns msg with its URLs redacted (Text) and every known secret
// replaced by Mask where it is masked (see Secrets).
func (s *Secrets) Strip(msg string) string {
	msg = Text(msg)
	if s == nil {
		return msg
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	for _, v := range s.vals {
		if !strings.Contains(msg, v.v) {
			continue
		}
		if v.reach == anywhere {
			msg = strings.ReplaceAll(msg, v.v, Mask)
			continue
		}
		msg = maskWhole(msg, v.v, v.reach == asCredential)
	}
	return msg
}

// maskWhole masks the occurrences of v in msg that are whole tokens
// (wholeAt) and, with credOnly, the value of a credential-like name.
func maskWhole(msg, v string, credOnly bool) string {
	var b strings.Builder
	last := 0
	for i := 0; i <= len(msg)-len(v); {
		j := strings.Index(msg[i:], v)
		if j < 0 {
			break
		}
		start, end := i+j, i+j+len(v)
		if !wholeAt(msg, start, end) || credOnly && !credentialBefore(msg[:start]) {
			i = start + 1
			continue
		}
		b.WriteString(msg[last:start])
		b.WriteString(Mask)
		last, i = end, end
	}
	if last == 0 {
		return msg
	}
	b.WriteString(msg[last:])
	return b.String()
}

// wholeAt reports whether msg[start:end] is a whole token: no letter,
// digit or '_' next to it, and no '-' or '.' that joins it to one (as in
// a bucket, host or file name).
func wholeAt(msg string, start, end int) bool {
	if start > 0 {
		c := msg[start-1]
		if wordByte(c) || (c == '-' || c == '.') && start > 1 && wordByte(msg[start-2]) {
			return false
		}
	}
	if end < len(msg) {
		c := msg[end]
		if wordByte(c) || (c == '-' || c == '.') && end+1 < len(msg) && wordByte(msg[end+1]) {
			return false
		}
	}
	return true
}

// wordByte reports a letter, a digit, '_' or a byte of a non-ASCII
// character.
func wordByte(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c >= 0x80
}

// credentialValue matches the end of the text before a credential's
// value: a name, then '=' or ':' (quotes and an HTTP authentication
// scheme allowed), as in password=, "api_key": " or Authorization: Bearer.
var credentialValue = regexp.MustCompile(`([A-Za-z0-9_.\-]+)["']?[ \t]*[:=][ \t]*(?:(?i:bearer|basic|token)[ \t]+)?["']?$`)

// credentialBefore reports whether prefix ends where a credential-like
// name's value starts (credentialParam names the names).
func credentialBefore(prefix string) bool {
	if len(prefix) > 128 {
		prefix = prefix[len(prefix)-128:]
	}
	m := credentialValue.FindStringSubmatch(prefix)
	return m != nil && credentialParam(m[1])
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

// ErrBadURL is wrapped by the errors of ParseURL.
var ErrBadURL = errors.New("not a valid URL")

// ParseURL parses a URL that a flag, an environment variable or a file
// field gives; field names it in the error ("--planner-url", "pool.yaml:
// vms[2].guest_url"). The error says what is wrong without the URL or any
// part of it: a URL that does not parse, or that holds an "@" after its
// host, may hold a password that cannot be told apart from the rest. The
// URL returned has parsed cleanly; Shown prints it without credentials.
//
// An '@' in a path must be written %40, even where the path is an object
// key (s3://bucket/team%40corp): "s3://tok/en@host/x" cannot be told from a
// token holding a '/'.
func ParseURL(field, raw string) (*url.URL, error) {
	const encode = "; a user name or password in a URL must percent-encode '#' (%23), '/' (%2F), '?' (%3F), '@' (%40) and ':' (%3A)"
	u, err := url.Parse(raw)
	switch {
	case err != nil:
		return nil, fmt.Errorf("%s: %w: it does not parse (want a scheme, then user:password@ if any, then host[:port], path and query)%s", field, ErrBadURL, encode)
	case u.Scheme == "":
		return nil, fmt.Errorf("%s: %w: no scheme (want e.g. http://host:port/path)", field, ErrBadURL)
	case strings.Contains(u.EscapedPath(), "@") || strings.Contains(u.RawQuery, "@") || strings.Contains(u.EscapedFragment(), "@") || strings.Contains(u.Opaque, "@"):
		return nil, fmt.Errorf("%s: %w: an '@' after the host (user information goes before the host)%s", field, ErrBadURL, encode)
	}
	return u, nil
}

// Shown is u as it may be printed and recorded: its user information
// masked ("***@") and its credential-like query values too.
func Shown(u *url.URL) string {
	c := *u
	masked := c.User != nil
	c.User = nil
	s := c.String()
	if masked {
		if k := strings.Index(s, "://"); k >= 0 {
			s = s[:k+3] + Mask + "@" + s[k+3:]
		}
	}
	return query(s)
}
