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

// Executor names the frozen executor that grounded a row's plan: the
// row's executor_model, executor_checkpoint and executor_coords.
type Executor struct {
	Model      string `json:"model"`
	Checkpoint string `json:"checkpoint"` // "" when the trajectories recorded none
	Coords     string `json:"coords"`     // traj.Coords as JSON
}

// ExecutorRows is a number of rows grounded by one executor.
type ExecutorRows struct {
	Executor
	Rows int64 `json:"rows"`
}

// PromptSetRows is a number of rows made with one prompt set (the
// prompt_set column, "" for trajectories that recorded none).
type PromptSetRows struct {
	PromptSet string `json:"prompt_set"`
	Rows      int64  `json:"rows"`
}

// addExecutor counts n rows of executor e in list.
func addExecutor(list []ExecutorRows, e Executor, n int64) []ExecutorRows {
	return addRows(list, e, n, func() ExecutorRows { return ExecutorRows{Executor: e} })
}

// addPromptSet counts n rows of prompt set p in list.
func addPromptSet(list []PromptSetRows, p string, n int64) []PromptSetRows {
	return addRows(list, p, n, func() PromptSetRows { return PromptSetRows{PromptSet: p} })
}

func (e *ExecutorRows) key() Executor  { return e.Executor }
func (e *ExecutorRows) count() *int64  { return &e.Rows }
func (p *PromptSetRows) key() string   { return p.PromptSet }
func (p *PromptSetRows) count() *int64 { return &p.Rows }
func (s *SamplingRows) key() string    { return s.Sampling }
func (s *SamplingRows) count() *int64  { return &s.Rows }

// addRows counts n rows of key k in list, a list of row counts in the
// order their keys were first seen: the entry of k, or a new one made by
// fresh (with no rows) at the end.
func addRows[T any, K comparable, P interface {
	*T
	key() K
	count() *int64
}](list []T, k K, n int64, fresh func() T) []T {
	for i := range list {
		if P(&list[i]).key() == k {
			*P(&list[i]).count() += n
			return list
		}
	}
	list = append(list, fresh())
	*P(&list[len(list)-1]).count() += n
	return list
}
