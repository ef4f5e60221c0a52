package rollout

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/filefuzz"
	"github.com/nats-io/nats.go"
)

// FuzzDecodeSpooled feeds arbitrary bytes as a spool file (what a
// rollout that could not publish left on disk, read back by the next
// one) to decodeSpooled: an accepted file has an id and a subject, and
// spoolPut writes it back inside its run's folder of the spool, as a file
// that decodes to the same trajectory.
func FuzzDecodeSpooled(f *testing.F) {
	good, err := json.Marshal(spooled{Subject: "codapipe.traj.ChimeraX", ID: "01KAKQ3J0G7ZR4X2M5T8V9W6YB", Run: "nightly-1", Task: "ChimeraX/A-01", Sample: 2,
		Header: nats.Header{"Nats-Msg-Id": {"01KAKQ3J0G7ZR4X2M5T8V9W6YB"}}, Body: []byte(`{"schema_version":6}`),
		Record: ledger.Record{ID: "01KAKQ3J0G7ZR4X2M5T8V9W6YB", Outcome: "done", Passed: true, Steps: 4}, Time: time.Date(2026, 11, 25, 1, 2, 3, 0, time.UTC), Reason: "nats: timeout"})
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good)
	f.Add([]byte(`{"subject":"s","id":"../../x","run":"../.."}`))
	f.Add([]byte(`{"subject":"s","id":"a/b\u0000","run":"*>","body":"!!"}`))
	f.Add([]byte(`{"subject":"","id":"x"}`))
	f.Add([]byte(`{"subject":"s","id":"x","header":{"a":"b"}}`))
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := decodeSpooled(data)
		if err != nil {
			return
		}
		if s.ID == "" || s.Subject == "" {
			t.Fatalf("accepted without id or subject: %+v", s)
		}
		path, err := spoolPut(dir, s)
		if err != nil {
			t.Fatalf("spool the accepted file again: %v", err)
		}
		defer os.RemoveAll(filepath.Dir(path))
		if want := filepath.Join(dir, bus.KeyToken(s.Run), bus.KeyToken(s.ID)+".json"); path != want {
			t.Fatalf("spooled at %s, want %s", path, want)
		}
		body, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeSpooled(body)
		if err != nil {
			t.Fatalf("a spooled file does not decode: %v", err)
		}
		if !again.Time.Equal(s.Time) {
			t.Fatalf("time %v read back as %v", s.Time, again.Time)
		}
		again.Time = s.Time
		if !reflect.DeepEqual(again, s) && !(len(again.Body) == 0 && len(s.Body) == 0) {
			t.Fatalf("spool round trip changed the trajectory:\n%+v\n%+v", s, again)
		}
	})
}

// FuzzLoadSampling feeds arbitrary bytes as the --sampling file to
// LoadSampling: an error names the flag; an accepted file's parameters,
// written back as a file, load to the same parameters.
func FuzzLoadSampling(f *testing.F) {
	f.Add([]byte(`{"planner": {"temperature": 1, "top_p": 0.9, "top_k": -1, "max_tokens": 1500}, "executor": {"temperature": 0}}`))
	f.Add([]byte(`{"planner": {"stop": ["\n\n", "Action:"], "seed": 7, "min_p": 0.05}}`))
	f.Add([]byte(`{"planner": {"temperature": "hot"}}`))
	f.Add([]byte(`{"planner": {"top_q": 1}}`))
	f.Add([]byte(`{"executor": {"max_tokens": 1e400}}`))
	dir := f.TempDir()
	path := filepath.Join(dir, "sampling.json")
	f.Fuzz(func(t *testing.T, data []byte) {
		filefuzz.RoundTrip(t, path, data, func() (SamplingFile, error) { return LoadSampling(path) }, "--sampling "+path+": ", nil)
	})
}
