package service

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/infra/syncio"
)

// serviceWidth is the width of the service column: the longest service
// name, "advantage".
const serviceWidth = 9

// HumanHandler is a slog.Handler for people at a terminal: one short line
// per record,
//
//	17:20:01 rollout   planned  episodes=56 vms=4  run=chimerax-20260301-172001 app=ChimeraX
//
// the local time (HH:MM:SS), the service, the level unless it is INFO
// (WARN, ERROR, DEBUG), the message without a leading "<service>: ", the
// record's attributes, and then those of WithAttrs, as key=value; a group's
// keys are prefixed with its name ("group.key"). A value is quoted when it
// is empty or holds a space, '"', '=', '\\' or a character that is not
// printable; control characters and invalid UTF-8 are escaped in values,
// keys and the message alike, so no value can start a line of its own.
// A line is written with one Write; handlers derived with WithAttrs and
// WithGroup share the writer and its lock, so they are safe for
// concurrent use.
type HumanHandler struct {
	out     *syncio.Writer // shared by the handlers WithAttrs/WithGroup derive
	service string         // padded to serviceWidth; "" without one
	trim    string         // "<service>: ", cut from the front of messages
	level   slog.Leveler
	prefix  string // the open groups: "a.b." (WithGroup)
	context []byte // the attributes of WithAttrs, formatted, each after a space
}

// NewHumanHandler returns a HumanHandler writing to w the records at level
// or above (nil: info), with service in the service column.
func NewHumanHandler(w io.Writer, service string, level slog.Leveler) *HumanHandler {
	if level == nil {
		level = slog.LevelInfo
	}
	h := &HumanHandler{out: &syncio.Writer{W: w}, level: level}
	if service != "" {
		h.service = fmt.Sprintf("%-*s", serviceWidth, service)
		h.trim = service + ": "
	}
	return h
}

// Enabled reports whether records at l are written.
func (h *HumanHandler) Enabled(_ context.Context, l slog.Level) bool {
	return l >= h.level.Level()
}

// Handle writes r as one line.
func (h *HumanHandler) Handle(_ context.Context, r slog.Record) error {
	buf := make([]byte, 0, 256)
	if !r.Time.IsZero() {
		buf = r.Time.Local().AppendFormat(buf, time.TimeOnly)
		buf = append(buf, ' ')
	}
	if h.service != "" {
		buf = append(buf, h.service...)
		buf = append(buf, ' ')
	}
	if r.Level != slog.LevelInfo {
		buf = append(buf, r.Level.String()...)
		buf = append(buf, ' ')
	}
	msg := r.Message
	if h.trim != "" {
		msg = strings.TrimPrefix(msg, h.trim)
	}
	buf = appendEscaped(buf, msg)
	if r.NumAttrs() > 0 {
		n := len(buf)
		r.Attrs(func(a slog.Attr) bool {
			buf = appendAttr(buf, h.prefix, a)
			return true
		})
		if len(buf) > n { // not only empty groups
			buf = slices.Insert(buf, n, ' ')
		}
	}
	if len(h.context) > 0 {
		buf = append(buf, ' ')
		buf = append(buf, h.context...)
	}
	buf = append(buf, '\n')
	_, err := h.out.Write(buf)
	return err
}

// WithAttrs returns a handler that writes attrs, in the open groups, after
// every record's own attributes.
func (h *HumanHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	if len(attrs) == 0 {
		return h
	}
	c := *h
	c.context = slices.Clip(h.context)
	for _, a := range attrs {
		c.context = appendAttr(c.context, h.prefix, a)
	}
	return &c
}

// WithGroup returns a handler that puts the attributes that follow in
// group name.
func (h *HumanHandler) WithGroup(name string) slog.Handler {
	if name == "" {
		return h
	}
	c := *h
	c.prefix = h.prefix + name + "."
	return &c
}

// appendAttr appends " key=value" for a, or one such pair per member of a
// group, with prefix before the keys. Empty attributes and empty groups
// append nothing.
func appendAttr(buf []byte, prefix string, a slog.Attr) []byte {
	a.Value = a.Value.Resolve()
	if a.Equal(slog.Attr{}) {
		return buf
	}
	if a.Value.Kind() == slog.KindGroup {
		if a.Key != "" {
			prefix += a.Key + "."
		}
		for _, m := range a.Value.Group() {
			buf = appendAttr(buf, prefix, m)
		}
		return buf
	}
	buf = append(buf, ' ')
	buf = appendMaybeQuoted(buf, prefix+a.Key)
	buf = append(buf, '=')
	return appendMaybeQuoted(buf, valueText(a.Value))
}

// valueText is the text of a resolved, non-group value.
func valueText(v slog.Value) string {
	switch v.Kind() {
	case slog.KindString:
		return v.String()
	case slog.KindTime:
		return v.Time().Format("2006-01-02T15:04:05.000Z07:00")
	case slog.KindAny:
		if b, ok := v.Any().([]byte); ok {
			return string(b)
		}
		return fmt.Sprintf("%+v", v.Any()) // errors, Stringers, slices, structs; fmt recovers from their panics
	}
	return v.String() // numbers, bools, durations
}

// appendMaybeQuoted appends s, quoted (Go syntax) when it is empty or
// holds a space, '"', '=', '\\', a character that is not printable or
// invalid UTF-8.
func appendMaybeQuoted(buf []byte, s string) []byte {
	if !needsQuoting(s) {
		return append(buf, s...)
	}
	return strconv.AppendQuote(buf, s)
}

func needsQuoting(s string) bool {
	if s == "" {
		return true
	}
	for _, r := range s {
		switch {
		case r == ' ', r == '"', r == '=', r == '\\', r == utf8.RuneError, !unicode.IsPrint(r):
			return true
		}
	}
	return false
}

// appendEscaped appends s with every character that is not printable (a
// newline, a carriage return, an escape sequence, U+2028) escaped as in Go
// syntax and every byte of invalid UTF-8 as \xNN; the rest as it is.
func appendEscaped(buf []byte, s string) []byte {
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			buf = fmt.Appendf(buf, `\x%02x`, s[i])
		case unicode.IsPrint(r):
			buf = append(buf, s[i:i+size]...)
		default:
			q := strconv.QuoteRune(r) // '\n', '\x1b', '\u2028'
			buf = append(buf, q[1:len(q)-1]...)
		}
		i += size
	}
	return buf
}
