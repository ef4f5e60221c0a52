package shard

import (
	"cmp"
	"slices"
	"time"
)

// Selection is what a shard set was asked to hold (advantage --runs,
// --checkpoints, --since), as the producer resolved it when the set was
// started. A judged trajectory is in the set when it matches every part
// given.
type Selection struct {
	// Runs, when not empty, are the only runs taken (rollout --run).
	Runs []string `json:"runs,omitempty"`
	// Checkpoints, when not empty, are the only planner checkpoints
	// taken (the trajectory's models.planner.checkpoint).
	Checkpoints []string `json:"checkpoints,omitempty"`
	// Since, when set, takes only episodes started at or after it.
	Since *time.Time `json:"since,omitempty"`
	// All says the set was asked for every judged trajectory the stream
	// retained (advantage --since all, or a set made before selections).
	All bool `json:"all,omitempty"`
}

// Source is one (run, planner checkpoint) of a shard set's rows.
type Source struct {
	Run        string `json:"run"`
	Checkpoint string `json:"checkpoint"` // "" when the trajectories recorded none
	// Trajectories counts the judged trajectories of this run taken in
	// (rows or not), Rows the rows they gave.
	Trajectories int `json:"trajectories"`
	Rows         int `json:"rows"`
}

// SetSources fills the manifest's provenance from per-(run, checkpoint)
// counts: Sources sorted by run then checkpoint, Runs and Checkpoints the
// distinct values, sorted.
func (m *Manifest) SetSources(src []Source) {
	m.Sources = slices.Clone(src)
	slices.SortFunc(m.Sources, func(a, b Source) int {
		return cmp.Or(cmp.Compare(a.Run, b.Run), cmp.Compare(a.Checkpoint, b.Checkpoint))
	})
	m.Runs, m.Checkpoints = nil, nil
	for _, s := range m.Sources {
		if !slices.Contains(m.Runs, s.Run) {
			m.Runs = append(m.Runs, s.Run)
		}
		if !slices.Contains(m.Checkpoints, s.Checkpoint) {
			m.Checkpoints = append(m.Checkpoints, s.Checkpoint)
		}
	}
	slices.Sort(m.Runs)
	slices.Sort(m.Checkpoints)
}
