package appname

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func TestCanonicalApp(t *testing.T) {
	for _, tc := range []struct {
		name    string
		app     string
		known   []string
		want    string
		wantErr string
		unknown bool
	}{
		{"exact", "ChimeraX", Apps(), "ChimeraX", "", false},
		{"case", "Chimerax", Apps(), "ChimeraX", "", false},
		{"upper", "TEXSTUDIO", Apps(), "TeXstudio", "", false},
		{"user app", "Lab", []string{"ChimeraX", "Lab"}, "Lab", "", false},
		{"exact wins over a case variant", "chimerax", []string{"ChimeraX", "chimerax"}, "chimerax", "", false},
		{"ambiguous", "CHIMERAX", []string{"ChimeraX", "chimerax"}, "", "matches ChimeraX, chimerax", false},
		{"unknown", "Chimera", Apps(), "", `unknown app "Chimera" (known apps: ChimeraX, KAlgebra, Celestia, GrassGIS, Lean, TeXstudio)`, true},
		{"no apps", "x", nil, "", `unknown app "x"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Canonical(tc.app, tc.known...)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) || errors.Is(err, ErrUnknown) != tc.unknown {
					t.Fatalf("Canonical(%q) = %q, %v; want an error with %q (unknown %v)", tc.app, got, err, tc.wantErr, tc.unknown)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("Canonical(%q) = %q, %v; want %q", tc.app, got, err, tc.want)
			}
		})
	}
}

func TestCheckApps(t *testing.T) {
	for _, tc := range []struct {
		name    string
		apps    []string
		want    []string
		wantErr string
	}{
		{"none", nil, []string{}, ""},
		{"benchmark apps spelled canonically", []string{"chimerax", "KALGEBRA", "GrassGIS"}, []string{"ChimeraX", "KAlgebra", "GrassGIS"}, ""},
		{"user apps kept", []string{"Lab", "chimera*", "a b"}, []string{"Lab", "chimera*", "a b"}, ""},
		{"bad name", []string{"ChimeraX", "a/b"}, nil, `--app: app name "a/b"`},
		{"names that share a subject (issue 40)", []string{"K.A", "K_A"}, nil, `--app: apps collide on one subject: "K.A" and "K_A" both map to the subject token K_A`},
		{"names that share a subject by space", []string{"ChimeraX", "GRASS GIS", "GRASS_GIS"}, nil, `"GRASS GIS" and "GRASS_GIS" both map to the subject token GRASS_GIS`},
		{"the same name twice", []string{"K.A", "K.A"}, []string{"K.A", "K.A"}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Check("--app", tc.apps)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("Check(%q) = %q, %v; want an error with %q", tc.apps, got, err, tc.wantErr)
				}
				return
			}
			if err != nil || !slices.Equal(got, tc.want) {
				t.Fatalf("Check(%q) = %q, %v; want %q", tc.apps, got, err, tc.want)
			}
		})
	}
}
