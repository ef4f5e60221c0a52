package traj

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/codapipe/codapipe/internal/contract/jsonpos"
)

// ErrSchemaVersion is returned by Decode for a document whose
// schema_version this package does not read.
var ErrSchemaVersion = errors.New("unsupported schema_version")

// Marshal encodes a trajectory or judgement (or any value) as indented
// JSON with a final newline, without HTML escaping ("<image>" stays as it
// is). Encoding is deterministic: the same value gives the same bytes.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("traj: marshal: %w", err)
	}
	return b.Bytes(), nil
}

// MarshalCompact is Marshal without indentation and without the final
// newline: the form published on the bus.
func MarshalCompact(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("traj: marshal: %w", err)
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// DecodeTrajectory decodes one trajectory document. Unknown fields are an
// error (they are a sign of a producer with a newer contract), and so is a
// schema_version other than 1..SchemaVersion. It does not Validate.
func DecodeTrajectory(data []byte) (*Trajectory, error) {
	return decode(data, "trajectory", func(t *Trajectory) []versioned {
		return []versioned{{t.SchemaVersion, "trajectory"}}
	})
}

// DecodeJudged decodes one judged-trajectory document, as DecodeTrajectory
// does (the schema_version of the document, the judgement and the
// trajectory are each checked).
func DecodeJudged(data []byte) (*Judged, error) {
	return decode(data, "judged trajectory", func(j *Judged) []versioned {
		return []versioned{{j.SchemaVersion, "judged trajectory"}, {j.Judgement.SchemaVersion, "judgement"}, {j.Trajectory.SchemaVersion, "trajectory"}}
	})
}

// DecodeJudgement decodes one judgement document, as DecodeTrajectory does.
func DecodeJudgement(data []byte) (*Judgement, error) {
	return decode(data, "judgement", func(j *Judgement) []versioned {
		return []versioned{{j.SchemaVersion, "judgement"}}
	})
}

// versioned is the schema_version of one part of a document.
type versioned struct {
	n    int
	what string
}

// decode decodes one document strictly and checks the schema_version of
// each of its parts, in order.
func decode[T any](data []byte, what string, parts func(*T) []versioned) (*T, error) {
	v := new(T)
	if err := decodeStrict(data, v, what); err != nil {
		return nil, err
	}
	for _, p := range parts(v) {
		if err := checkSchema(p.n, p.what); err != nil {
			return nil, err
		}
	}
	return v, nil
}

func decodeStrict(data []byte, v any, what string) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return fmt.Errorf("traj: decode %s: %w", what, jsonpos.Describe(data, err))
	}
	if dec.More() {
		return fmt.Errorf("traj: decode %s: unexpected data after the document at offset %d", what, dec.InputOffset())
	}
	return nil
}

func checkSchema(v int, what string) error {
	if v < 1 || v > SchemaVersion {
		return fmt.Errorf("traj: decode %s: schema_version %d, this build reads 1..%d: %w", what, v, SchemaVersion, ErrSchemaVersion)
	}
	return nil
}
