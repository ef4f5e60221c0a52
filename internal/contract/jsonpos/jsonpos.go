// Package jsonpos locates encoding/json errors in their input: byte offsets
// become 1-based lines and columns (columns count characters), so error
// messages can name the place a person has to look.
package jsonpos

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// Position converts a byte offset into a 1-based line and column; columns
// count characters. Offsets outside data are clamped.
func Position(data []byte, off int) (line, col int) {
	off = min(max(off, 0), len(data))
	before := data[:off]
	line = 1 + bytes.Count(before, []byte("\n"))
	lineStart := bytes.LastIndexByte(before, '\n') + 1
	col = 1 + utf8.RuneCount(before[lineStart:])
	return line, col
}

// Offset returns the byte offset an encoding/json error points at: the
// offending byte of a syntax error (the end of the input when it is
// truncated) or the last byte of a value of the wrong type. ok is false for
// other errors.
func Offset(data []byte, err error) (off int, ok bool) {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		off = int(se.Offset)
		// Offset is just past the offending byte; point at the byte, or
		// past the end for a truncated document.
		if off > 0 && off <= len(data) && !strings.HasPrefix(se.Error(), "unexpected end") {
			off--
		}
		return off, true
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		// Offset is just past the value; point at its last byte.
		return max(int(te.Offset)-1, 0), true
	}
	return 0, false
}

// Describe wraps an encoding/json error with its line and column in data
// ("line 3, column 7: ..."), and for a value of the wrong type the field
// and the expected type. Other errors are returned as they are.
func Describe(data []byte, err error) error {
	off, ok := Offset(data, err)
	if !ok {
		return err
	}
	l, c := Position(data, off)
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Errorf("line %d, column %d: field %q: want %s, got JSON %s: %w", l, c, te.Field, te.Type, te.Value, err)
	}
	return fmt.Errorf("line %d, column %d: %w", l, c, err)
}
