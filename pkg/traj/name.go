package traj

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// NameKind is the kind of a name a person or a task file chooses: a run
// name, an application name or a task id. Each kind has its byte limit.
type NameKind string

// The kinds of names CheckName knows.
const (
	RunName  NameKind = "run name" // rollout --run, nightly <night>-<app>, Trajectory.Run
	AppName  NameKind = "app name" // rollout --app, a task file's "type", TaskRef.App
	TaskName NameKind = "task id"  // "<app>/<task file stem>", TaskRef.ID
)

// The byte limits of names (UTF-8 bytes, not characters). They are chosen so
// that every encoded form of a name fits the limits it meets: bus.KeyToken
// writes each byte other than letters, digits, '-' and '_' as three
// ("=XX"), so a 64-byte run name is at most 192 bytes as a file name (255 at
// most), in a consumer name ("rollout-" + token; JetStream allows 255) or a
// blob key segment; a task id (an app name, '/', a file stem) is at most 384
// bytes in a key-value key (a NATS subject; the ledger's keys hold a run and
// a task id, well under the 4 KB control line).
const (
	MaxRunNameBytes = 64
	MaxAppNameBytes = 64
	MaxTaskIDBytes  = 128
)

// MaxNameBytes returns the byte limit of a kind of name.
func MaxNameBytes(k NameKind) int {
	switch k {
	case AppName:
		return MaxAppNameBytes
	case TaskName:
		return MaxTaskIDBytes
	default:
		return MaxRunNameBytes
	}
}

// ErrInvalidName is matched (errors.Is) by every error of CheckName.
var ErrInvalidName = errors.New("invalid name")

// The reasons a name breaks the rule; a *NameError matches its reason and
// ErrInvalidName with errors.Is.
var (
	ErrNameEmpty    = errors.New("empty")
	ErrNameTooLong  = errors.New("too long")
	ErrNameUTF8     = errors.New("not valid UTF-8")
	ErrNameControl  = errors.New("control or invisible format character")
	ErrNameSpaceEnd = errors.New("leading or trailing space")
	ErrNameSlash    = errors.New("'/' or '\\' in it (a task id is \"<app>/<task file stem>\")")
)

// NameError is a name that breaks the rule of CheckName. Its message names
// the kind, the limit, the reason and a safely quoted, truncated form of the
// value (never the whole value, never a raw control character).
type NameError struct {
	Kind   NameKind
	Reason error // one of the ErrName… sentinels
	Len    int   // the value's length in bytes
	Limit  int   // the kind's limit in bytes
	Quoted string
	// Detail says where, for a bad character ("U+202E at byte 3").
	Detail string
}

func (e *NameError) Error() string {
	msg := fmt.Sprintf("%s %s (%d bytes): %v", e.Kind, e.Quoted, e.Len, e.Reason)
	if e.Detail != "" {
		msg += " (" + e.Detail + ")"
	}
	extra := ""
	if e.Kind == AppName {
		extra = ", '/' or '\\'"
	}
	return msg + fmt.Sprintf("; %ss are 1 to %d bytes of UTF-8 without control or invisible format characters%s or surrounding spaces (docs/contracts.md, Names)", e.Kind, e.Limit, extra)
}

// Unwrap makes the error match ErrInvalidName and its reason.
func (e *NameError) Unwrap() []error { return []error{ErrInvalidName, e.Reason} }

// CheckName checks a name of kind k against the one name rule of codapipe:
// not empty; at most MaxNameBytes(k) bytes; valid UTF-8; no control
// characters (C0, DEL, C1), no line or paragraph separators, no invisible
// format characters (Unicode category Cf, such as U+202E RIGHT-TO-LEFT
// OVERRIDE or U+200B ZERO WIDTH SPACE; U+200D ZERO WIDTH JOINER, which joins
// emoji, is allowed); no leading or trailing white space; in an app name,
// no '/' or '\' (a task id is "<app>/<task file stem>"). Everything else
// (dots, slashes, "..", NATS wildcards '*' and '>', spaces inside, any
// printable Unicode) is allowed: every place a name reaches a path, a key or
// a subject encodes it. The error is a *NameError.
func CheckName(k NameKind, s string) error {
	e := &NameError{Kind: k, Len: len(s), Limit: MaxNameBytes(k), Quoted: QuoteName(s)}
	switch {
	case s == "":
		e.Reason = ErrNameEmpty
		return e
	case len(s) > e.Limit:
		e.Reason = ErrNameTooLong
		e.Detail = fmt.Sprintf("limit %d bytes", e.Limit)
		return e
	case !utf8.ValidString(s):
		e.Reason = ErrNameUTF8
		return e
	}
	for i, r := range s {
		if badNameRune(r) {
			e.Reason, e.Detail = ErrNameControl, fmt.Sprintf("%U at byte %d", r, i)
			return e
		}
	}
	if k == AppName && strings.ContainsAny(s, `/\`) {
		e.Reason = ErrNameSlash
		return e
	}
	first, _ := utf8.DecodeRuneInString(s)
	last, _ := utf8.DecodeLastRuneInString(s)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		e.Reason = ErrNameSpaceEnd
		return e
	}
	return nil
}

// badNameRune reports a control character, a line or paragraph separator or
// an invisible format character other than the zero width joiner.
func badNameRune(r rune) bool {
	switch {
	case r == '\u200d':
		return false
	case unicode.IsControl(r), unicode.In(r, unicode.Cf, unicode.Zl, unicode.Zp):
		return true
	}
	return false
}

// quoteMax is how many bytes of a name QuoteName shows.
const quoteMax = 64

// QuoteName returns a name as a Go-quoted string safe to print anywhere:
// control, format and non-graphic characters and invalid bytes are escaped
// (strconv.QuoteToGraphic), and a name longer than 64 bytes is cut (at a
// character boundary) with "…" after the closing quote, so an error about a
// 1 MB name stays short.
func QuoteName(s string) string {
	if len(s) <= quoteMax {
		return strconv.QuoteToGraphic(s)
	}
	cut := quoteMax
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strconv.QuoteToGraphic(s[:cut]) + "…"
}

// PrintName returns a name as it may be printed for people (summaries,
// logs, reports): unchanged when every character is graphic (letters,
// marks, numbers, punctuation, symbols, spaces; the zero width joiner) and it
// fits the longest limit, QuoteName's quoted form otherwise, so a name
// cannot add lines, colour a terminal, reorder text or flood a screen.
func PrintName(s string) string {
	if len(s) > MaxTaskIDBytes || !utf8.ValidString(s) {
		return QuoteName(s)
	}
	for _, r := range s {
		if r != '\u200d' && (badNameRune(r) || !unicode.IsGraphic(r)) {
			return QuoteName(s)
		}
	}
	return s
}
