package traj

import (
	"errors"
	"strings"
	"testing"
)

func TestCheckName(t *testing.T) {
	mb := strings.Repeat("a", 1<<20)
	tests := []struct {
		kind NameKind
		in   string
		want error // nil: valid
	}{
		{RunName, "nightly-2026-11-26", nil},
		{RunName, "../../etc", nil},
		{RunName, "a.b *>", nil},
		{RunName, "ChimeraX-Ωμέγα", nil},
		{RunName, "🧪 run", nil},
		{RunName, "👩‍🔬", nil}, // a zero width joiner inside an emoji
		{RunName, strings.Repeat("Ω", MaxRunNameBytes/2), nil},
		{RunName, strings.Repeat("Ω", MaxRunNameBytes/2) + "a", ErrNameTooLong},
		{RunName, mb, ErrNameTooLong},
		{RunName, "", ErrNameEmpty},
		{RunName, "a\nb", ErrNameControl},
		{RunName, "\x1b[31mred", ErrNameControl},
		{RunName, "a\x00b", ErrNameControl},
		{RunName, "a\x7fb", ErrNameControl},
		{RunName, "a\u0085b", ErrNameControl}, // C1
		{RunName, "a\u202eb", ErrNameControl},
		{RunName, "a\u200bb", ErrNameControl},
		{RunName, "a\u2028b", ErrNameControl},
		{RunName, "a\xffb", ErrNameUTF8},
		{RunName, " a", ErrNameSpaceEnd},
		{RunName, "a\u00a0", ErrNameSpaceEnd},
		{AppName, "GRASS GIS", nil},
		{AppName, "a/b", ErrNameSlash},
		{AppName, `a\b`, ErrNameSlash},
		{AppName, strings.Repeat("a", MaxAppNameBytes+1), ErrNameTooLong},
		{TaskName, "ChimeraX/../x", nil},
		{TaskName, "ChimeraX/" + strings.Repeat("a", MaxTaskIDBytes-9), nil},
		{TaskName, "ChimeraX/" + strings.Repeat("a", MaxTaskIDBytes-8), ErrNameTooLong},
	}
	for _, tc := range tests {
		err := CheckName(tc.kind, tc.in)
		if tc.want == nil {
			if err != nil {
				t.Errorf("CheckName(%s, %s) = %v, want nil", tc.kind, QuoteName(tc.in), err)
			}
			continue
		}
		var ne *NameError
		if !errors.Is(err, tc.want) || !errors.Is(err, ErrInvalidName) || !errors.As(err, &ne) {
			t.Errorf("CheckName(%s, %s) = %v, want %v", tc.kind, QuoteName(tc.in), err, tc.want)
			continue
		}
		msg := err.Error()
		if len(msg) > 600 || strings.ContainsAny(msg, "\n\x1b\x00\u202e") || !strings.Contains(msg, string(tc.kind)) {
			t.Errorf("CheckName(%s, %s): message %q: want the kind, short, no raw control characters", tc.kind, QuoteName(tc.in), msg)
		}
	}
}

func TestPrintName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"nightly-1", "nightly-1"},
		{"ChimeraX-Ωμέγα 🧪", "ChimeraX-Ωμέγα 🧪"},
		{"x\nrun fake", `"x\nrun fake"`},
		{"\x1b[31mred", `"\x1b[31mred"`},
		{"a\u202eb", `"a\u202eb"`},
		{"a\tb", `"a\tb"`},
		{strings.Repeat("a", 1000), `"` + strings.Repeat("a", 64) + `"…`},
		{strings.Repeat("Ω", 100), `"` + strings.Repeat("Ω", 32) + `"…`},
	}
	for _, tc := range tests {
		if got := PrintName(tc.in); got != tc.want {
			t.Errorf("PrintName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
