package scienceboard

import (
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestExpandString(t *testing.T) {
	vals := map[string]string{"PORTLIKE": "8000", "HOST": "10.0.0.5"}
	tests := []struct {
		in, want, err string
	}{
		{"kalgebra «PORTLIKE»", "kalgebra 8000", ""},
		{"«HOST»:«PORTLIKE» «PORTLIKE»", "10.0.0.5:8000 8000", ""},
		{"no placeholders", "no placeholders", ""},
		{"« not one »", "« not one »", ""},
		{"open «nope»", "", "unknown placeholder «nope» (known: HOST, PORTLIKE)"},
	}
	for _, tc := range tests {
		t.Run(tc.in, func(t *testing.T) {
			got, err := ExpandString(tc.in, vals)
			if tc.err != "" {
				if err == nil || err.Error() != tc.err {
					t.Fatalf("got %q, %v; want error %q", got, err, tc.err)
				}
				return
			}
			if err != nil || got != tc.want {
				t.Errorf("got %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	if got := PlaceholderNames("«A» «B» «A»"); !reflect.DeepEqual(got, []string{"A", "B"}) {
		t.Errorf("PlaceholderNames = %q", got)
	}
}

func TestExpandPlaceholders(t *testing.T) {
	set, err := LoadDir(filepath.Join("testdata", "synth"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		id       string
		names    []string
		vals     map[string]string
		wantCmd  string // Command.String() of initialize[0] after expansion
		wantArgv bool
		wantErr  string
	}{
		{"ChimeraX/X-01", []string{"PORTLIKE"}, map[string]string{"PORTLIKE": "8000"},
			"chimerax --cmd remotecontrol rest start json true port 8000", true, ""},
		{"KAlgebra/Y-01", []string{"PORTLIKE"}, map[string]string{"PORTLIKE": "8001", "UNUSED": "x"},
			"kalgebra 8001", false, ""},
		{"KAlgebra/Y-01", []string{"PORTLIKE"}, nil, "", false,
			"KAlgebra/Y-01: initialize[0]: command: unknown placeholder «PORTLIKE» (known: none given)"},
		// «hello» in a touch text and in a check is data, not a placeholder.
		{"Lab/Z-01", []string{}, nil, "", false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.id, func(t *testing.T) {
			orig, ok := set.ByID(tc.id)
			if !ok {
				t.Fatal("missing task")
			}
			if got := orig.Placeholders(); !reflect.DeepEqual(got, tc.names) {
				t.Errorf("Placeholders = %q, want %q", got, tc.names)
			}
			before, _ := orig.FileJSON()
			exp, err := orig.ExpandPlaceholders(tc.vals)
			if after, _ := orig.FileJSON(); string(after) != string(before) {
				t.Error("ExpandPlaceholders modified the receiver")
			}
			if checkErr(t, err, tc.wantErr) {
				return
			}
			if len(exp.Placeholders()) != 0 {
				t.Errorf("placeholders left: %q", exp.Placeholders())
			}
			if tc.wantCmd != "" {
				it := exp.Initialize[0]
				var cmd Command
				switch a := it.Args.(type) {
				case *Launch:
					cmd = a.Command
				case *Execute:
					cmd = a.Command
				default:
					t.Fatalf("initialize[0] is %T", it.Args)
				}
				if cmd.String() != tc.wantCmd || cmd.IsArgv() != tc.wantArgv {
					t.Errorf("command %q (argv %v), want %q", cmd, cmd.IsArgv(), tc.wantCmd)
				}
				if strings.Contains(string(it.Raw), "«") || !strings.Contains(string(it.Raw), tc.vals["PORTLIKE"]) {
					t.Errorf("Raw not expanded: %s", it.Raw)
				}
				if it.WaitDuration() != orig.Initialize[0].WaitDuration() || it.Issue != "" {
					t.Errorf("expanded item changed otherwise: %+v", it)
				}
			}
			if !reflect.DeepEqual(exp.Unsupported, orig.Unsupported) {
				t.Errorf("Unsupported %q, want %q", exp.Unsupported, orig.Unsupported)
			}
		})
	}
}

func TestExpandPlaceholdersRealTasks(t *testing.T) {
	needRealTasks(t)
	set, err := LoadDir(realTasks)
	if err != nil {
		t.Fatal(err)
	}
	withPlaceholders := 0
	for i := range set.Tasks {
		tk := &set.Tasks[i]
		names := tk.Placeholders()
		if len(names) > 0 {
			withPlaceholders++
			if !reflect.DeepEqual(names, []string{"PORTLIKE"}) {
				t.Errorf("%s: placeholders %q", tk.ID, names)
			}
		}
		exp, err := tk.ExpandPlaceholders(map[string]string{"PORTLIKE": "8000"})
		if err != nil {
			t.Errorf("%s: %v", tk.ID, err)
			continue
		}
		b, _ := exp.FileJSON()
		if strings.Contains(string(b), "«PORTLIKE»") {
			t.Errorf("%s: placeholder left after expansion", tk.ID)
		}
		if _, err := tk.ExpandPlaceholders(nil); (err != nil) != (len(names) > 0) {
			t.Errorf("%s: expanding with no values: %v", tk.ID, err)
		}
	}
	// 99 launch commands carry «PORTLIKE»: 33 Celestia, 31 KAlgebra, 29
	// ChimeraX and 6 TeXstudio tasks (one placeholder per task).
	if withPlaceholders != 99 {
		t.Errorf("%d tasks use placeholders, want 99", withPlaceholders)
	}
}
