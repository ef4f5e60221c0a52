package ledger

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzDecodeRecord feeds arbitrary bytes as a ledger record (the episode
// records a resumed rollout and the run report read from the ledger
// bucket) to decodeRecord, then counts it with Tally: an error names the
// key; an accepted record has no negative count, and the run's figures
// computed from it stay in range (rates in [0, 1], mean steps >= 0).
func FuzzDecodeRecord(f *testing.F) {
	f.Add([]byte(`{"id":"01KAKQ3J0G7ZR4X2M5T8V9W6YB","outcome":"done","passed":true,"steps":7,"grounding":{"grounded":14,"points":12,"max_x":1201.5,"max_y":790,"ext_w":1288,"ext_h":812},"plans":{"sampled_steps":7,"identical_steps":2,"groups":7,"varied_groups":5}}`))
	f.Add([]byte(`{"id":"x","outcome":"env_error","steps":0}`))
	f.Add([]byte(`{"id":"x","outcome":"max_steps","unscored":true,"steps":50}`))
	f.Add([]byte(`{"steps":-3}`))
	f.Add([]byte(`{"grounding":{"unparsed":-1}}`))
	f.Add([]byte(`{"steps":1e3}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		const key = "run-1.ep.ChimeraX_2fA-01.0"
		var tally Tally
		n := 0
		for i, line := range bytes.Split(data, []byte("\n")) {
			rec, err := decodeRecord(key, line)
			if err != nil {
				if !strings.HasPrefix(err.Error(), "ledger: "+key+": ") {
					t.Fatalf("error does not name the key: %v", err)
				}
				continue
			}
			g, p := rec.Grounding, rec.Plans
			if min(rec.Steps, g.Grounded, g.Unparsed, g.OutOfRange, g.Points, p.Sampled, p.Identical, p.Groups, p.Varied) < 0 {
				t.Fatalf("record with a negative count accepted: %+v", rec)
			}
			tally.Add([]string{"A-01", "A-02"}[i%2], rec)
			n++
		}
		s := tally.Scores()
		if s.Episodes != n || s.Successes+s.Unscored+s.EnvErrors > n {
			t.Fatalf("%d records: %+v", n, s)
		}
		for name, x := range map[string]float64{"rate": s.Rate, "average@k": s.AverageAtK, "pass@k": s.PassAtK} {
			if x < 0 || x > 1 {
				t.Fatalf("%s %v out of [0, 1]: %+v", name, x, s)
			}
		}
		if s.MeanSteps < 0 {
			t.Fatalf("mean steps %v", s.MeanSteps)
		}
	})
}

// FuzzDecodeVMEvents feeds arbitrary bytes to DecodeVMEvents, the parser
// of the VM events documents the run report reads from the blob store:
// an error says what was decoded; an accepted document has a schema
// version this build reads and survives a round trip through its own
// encoding.
func FuzzDecodeVMEvents(f *testing.F) {
	f.Add([]byte(`{"schema_version":1,"run":"nightly-1","invocation":"2026-11-25T01:00:00Z","written_at":"2026-11-25T01:10:00.5Z","final":true,` +
		`"spans":[{"vm":"vm-0","kind":"start","start":"2026-11-25T01:00:01Z","end":"2026-11-25T01:00:31Z"},{"vm":"vm-1","kind":"reset","start":"2026-11-25T01:05:00Z","error":"health check: timeout"}],` +
		`"events":[{"vm":"vm-1","kind":"failed","time":"2026-11-25T01:05:30Z","error":"health check: timeout"},{"vm":"vm-1","kind":"quarantined","time":"2026-11-25T01:05:31Z"}]}`))
	f.Add([]byte(`{"schema_version":99}`))
	f.Add([]byte(`{"schema_version":1,"invocation":"yesterday"}`))
	f.Add([]byte(`{"schema_version":1,"spans":[{"start":"0000-01-01T00:00:00+23:59"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DecodeVMEvents(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "VM events document: ") {
				t.Fatalf("error does not say what was decoded: %v", err)
			}
			return
		}
		if d.SchemaVersion < 1 || d.SchemaVersion > VMEventsVersion {
			t.Fatalf("schema version %d accepted", d.SchemaVersion)
		}
		enc, err := json.Marshal(d)
		if err != nil {
			return // a time JSON cannot write (year outside 0..9999 after its offset)
		}
		d2, err := DecodeVMEvents(enc)
		if err != nil {
			t.Fatalf("re-encoded document does not decode: %v\n%s", err, enc)
		}
		if enc2, err := json.Marshal(d2); err != nil || !bytes.Equal(enc, enc2) {
			t.Fatalf("round trip is not a fixed point (%v):\n%s\n%s", err, enc, enc2)
		}
	})
}

// A damaged record with a negative count is refused, naming the key and
// the field; a whole one decodes.
func TestDecodeRecordRefusesNegativeCounts(t *testing.T) {
	for in, want := range map[string]string{
		`{"steps":-3}`:                          "ledger: k: steps is -3",
		`{"grounding":{"unparsed":-1}}`:         "ledger: k: grounding.unparsed is -1",
		`{"plans":{"varied_groups":-2}}`:        "ledger: k: plans.varied_groups is -2",
		`{"steps":"7"}`:                         "ledger: k: json: cannot unmarshal",
		`{"id":"x","outcome":"done","steps":7}`: "",
	} {
		_, err := decodeRecord("k", []byte(in))
		if (want == "") != (err == nil) || err != nil && !strings.HasPrefix(err.Error(), want) {
			t.Errorf("%s: %v, want %q", in, err, want)
		}
	}
}
