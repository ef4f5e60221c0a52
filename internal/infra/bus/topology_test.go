package bus

import "testing"

func TestSubjects(t *testing.T) {
	cases := []struct{ name, got, want string }{
		{"raw", Subject(Raw, "ChimeraX"), "coda.traj.ChimeraX"},
		{"space", Subject(Judged, "GRASS GIS"), "coda.judged.GRASS_GIS"},
		{"wildcards", Subject(Raw, "a.b*>c"), "coda.traj.a_b__c"},
		{"empty", Subject(Raw, ""), "coda.traj._"},
		{"unicode", AppToken("Lean 4 ∀"), "Lean_4__"},
		{"all", AllSubjects(Manifest), "coda.manifest.>"},
		{"stream", StreamName(Dead), "CODA_DLQ"},
		{"dead", DeadSubject("coda.traj.ChimeraX"), "coda.dlq.traj.ChimeraX"},
		{"dead foreign", DeadSubject("other.x"), "coda.dlq.other.other.x"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.got != tc.want {
				t.Fatalf("got %q, want %q", tc.got, tc.want)
			}
		})
	}
}

func TestStreamConfig(t *testing.T) {
	top := DefaultTopology()
	c := top.StreamConfig(Raw)
	if c.Name != "CODA_TRAJ" || c.Subjects[0] != "coda.traj.>" || c.Duplicates != top.Duplicates || c.Replicas != 1 {
		t.Fatalf("unexpected stream config %+v", c)
	}
	top.Replicas = 0
	if top.StreamConfig(Raw).Replicas != 1 {
		t.Fatal("replicas 0 must become 1")
	}
}

// TestKeyToken: names become one key token each; distinct names stay
// distinct.
func TestKeyToken(t *testing.T) {
	cases := map[string]string{"ChimeraX/A-01": "ChimeraX=2FA-01", "a.b": "a=2Eb", "GRASS GIS": "GRASS=20GIS", "": "=00", "x_y": "x_y"}
	for in, want := range cases {
		if got := KeyToken(in); got != want {
			t.Errorf("KeyToken(%q) = %q, want %q", in, got, want)
		}
	}
}
