package scienceboard

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
)

// FuzzChimeraXReply feeds arbitrary bodies as a ChimeraX REST reply (the
// guest app's answer to a setup step or an evaluator's command) to
// ChimeraXReply and SetupStep.CheckReply: an accepted reply's notes are
// its "log messages" "note" list; a refused one's error quotes at most
// maxReplyMessage bytes of it; CheckReply agrees with ChimeraXReply.
func FuzzChimeraXReply(f *testing.F) {
	for _, b := range []string{
		`{"python values": [], "json values": [null], "log messages": {"note": ["Opened 2olx"], "warning": []}, "error": null}`,
		`{"log messages": {}, "error": {"type": "UserError", "message": "Unknown command: opn 2olx"}}`,
		`{"log messages": {"note": null}, "error": "boom"}`,
		`{"error": {"message": "` + strings.Repeat("Traceback line\\n", 200) + `"}}`,
		`{"error": 0}`,
		`OK`,
		`<html>500</html>`,
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		notes, err := ChimeraXReply(body)
		step := SetupStep{Accept: AcceptChimeraX}
		if cerr := step.CheckReply(body); (cerr == nil) != (err == nil) {
			t.Fatalf("CheckReply %v, ChimeraXReply %v", cerr, err)
		}
		if err != nil {
			if msg := err.Error(); len(msg) > len("ChimeraX: ")+maxReplyMessage+3 && !strings.HasPrefix(msg, "expected a ChimeraX REST reply") {
				t.Fatalf("error of %d bytes: %.100q...", len(msg), msg)
			}
			return
		}
		var r struct {
			Log map[string][]string `json:"log messages"`
		}
		if jerr := json.Unmarshal(body, &r); jerr != nil || !slices.Equal(notes, r.Log["note"]) {
			t.Fatalf("notes %q, want %q (%v)", notes, r.Log["note"], jerr)
		}
	})
}
