package ledger

import (
	"encoding/json"
	"fmt"
)

// decodeRecord decodes the ledger record stored under key. A record with
// a negative count (steps, grounding or plan counts) is refused: only
// damage writes one, and it would skew the run's figures. Errors name the
// key.
func decodeRecord(key string, b []byte) (Record, error) {
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return Record{}, fmt.Errorf("ledger: %s: %w", key, err)
	}
	g, p := rec.Grounding, rec.Plans
	for _, c := range []struct {
		name string
		n    int
	}{
		{"steps", rec.Steps},
		{"grounding.grounded", g.Grounded}, {"grounding.unparsed", g.Unparsed}, {"grounding.out_of_range", g.OutOfRange}, {"grounding.points", g.Points},
		{"plans.sampled_steps", p.Sampled}, {"plans.identical_steps", p.Identical}, {"plans.groups", p.Groups}, {"plans.varied_groups", p.Varied},
	} {
		if c.n < 0 {
			return Record{}, fmt.Errorf("ledger: %s: %s is %d, a count cannot be negative", key, c.name, c.n)
		}
	}
	return rec, nil
}
