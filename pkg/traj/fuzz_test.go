package traj

import (
	"bytes"
	"strings"
	"testing"
)

// fuzzDecoded is the property FuzzDecodeJudgement and FuzzDecodeJudged
// check of a decoder: a refused document's error names what was decoded;
// Validate does not panic on an accepted one; its own compact encoding
// decodes again and re-encodes to the same bytes (a fixed point).
func fuzzDecoded[T any](t *testing.T, data []byte, what string, decode func([]byte) (*T, error), validate func(*T) error) {
	v, err := decode(data)
	if err != nil {
		if !strings.HasPrefix(err.Error(), "traj: decode ") {
			t.Fatalf("error does not say what was decoded: %v", err)
		}
		return
	}
	_ = validate(v)
	enc, err := MarshalCompact(v)
	if err != nil {
		t.Fatalf("re-encode the %s: %v", what, err)
	}
	again, err := decode(enc)
	if err != nil {
		t.Fatalf("re-encoded %s does not decode: %v\n%s", what, err, enc)
	}
	enc2, err := MarshalCompact(again)
	if err != nil || !bytes.Equal(enc, enc2) {
		t.Fatalf("%s round trip is not a fixed point (%v):\n%s\n%s", what, err, enc, enc2)
	}
}

// FuzzDecodeJudgement feeds arbitrary bytes to DecodeJudgement, the
// parser of archived judgement records and of the vote cache's judgements
// (sftpack reads them from the archive bucket).
func FuzzDecodeJudgement(f *testing.F) {
	good := testdata(f, "judgement.golden.json")
	f.Add(good)
	f.Add([]byte(`{"schema_version":1}`))
	f.Add([]byte(`{"schema_version":6,"votes":[{"verdict":{"redundant":[-1],"first_error_step":99}}]}`))
	f.Add([]byte(`{"schema_version":6} {}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecoded(t, data, "judgement", DecodeJudgement, (*Judgement).Validate)
	})
}

// FuzzDecodeJudged feeds arbitrary bytes to DecodeJudged, the parser of
// the judged stream's messages (the advantage service, sftpack and the
// run report read them).
func FuzzDecodeJudged(f *testing.F) {
	tr := testdata(f, "trajectory.golden.json")
	jd := testdata(f, "judgement.golden.json")
	f.Add([]byte(`{"schema_version":6,"judgement":` + string(jd) + `,"trajectory":` + string(tr) + `}`))
	f.Add([]byte(`{"schema_version":6,"judgement":{"schema_version":0},"trajectory":{"schema_version":6}}`))
	f.Add([]byte(`{"schema_version":6,"judgement":{"schema_version":6},"trajectory":{"schema_version":6,"steps":[{}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		fuzzDecoded(t, data, "judged trajectory", DecodeJudged, (*Judged).Validate)
	})
}
