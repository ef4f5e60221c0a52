package trainexport

import (
	"encoding/json"
	"errors"
	"fmt"
)

// Label is the ground truth of an exported group for an online trainer
// (verl's reward_model.ground_truth, OpenRLHF's label): which group of
// which shard set a generated plan is to be scored in, and the reference
// action it is scored against. The reward service (advantage
// reward-server) finds the step's screenshot and executor context by Set
// and GroupID; Reference is there for people and checked against the set.
type Label struct {
	Set       string `json:"set"`
	GroupID   string `json:"group_id"`
	Reference string `json:"reference"`
}

// String is the label as one line of JSON, the form exports write.
func (l Label) String() string {
	b, _ := json.Marshal(l) // three strings: cannot fail
	return string(b)
}

// ParseLabel reads a label written by Label.String.
func ParseLabel(s string) (Label, error) {
	var l Label
	if err := json.Unmarshal([]byte(s), &l); err != nil {
		return Label{}, fmt.Errorf("trainexport: label %.80q: %w", s, err)
	}
	if l.Set == "" || l.GroupID == "" {
		return Label{}, errors.New("trainexport: label without set or group_id")
	}
	return l, nil
}
