package jsonpos

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

func TestPosition(t *testing.T) {
	cases := []struct {
		data      string
		off       int
		line, col int
	}{
		{"abc", 0, 1, 1},
		{"abc", 2, 1, 3},
		{"a\nbc", 3, 2, 2},
		{"é\nxé", 5, 2, 3}, // columns count characters, not bytes
		{"ab", 99, 1, 3},
		{"ab", -1, 1, 1},
	}
	for _, tc := range cases {
		if l, c := Position([]byte(tc.data), tc.off); l != tc.line || c != tc.col {
			t.Errorf("Position(%q, %d) = %d:%d, want %d:%d", tc.data, tc.off, l, c, tc.line, tc.col)
		}
	}
}

func TestDescribe(t *testing.T) {
	var v struct{ N int }
	cases := []struct {
		name, in, want string
	}{
		{"syntax", "{\n  \"N\": 1,\n  oops\n}", "line 3, column 3: invalid character 'o'"},
		{"truncated", "{\n  \"N\": 1", "line 2, column 9: unexpected end of JSON input"},
		{"type", "{\n  \"N\": \"one\"\n}", `line 2, column 12: field "N": want int, got JSON string`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			data := []byte(tc.in)
			err := Describe(data, json.Unmarshal(data, &v))
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Fatalf("got %v, want prefix %q", err, tc.want)
			}
		})
	}
	other := errors.New("disk on fire")
	if Describe(nil, other) != other {
		t.Error("errors that are not from encoding/json must pass unchanged")
	}
}
