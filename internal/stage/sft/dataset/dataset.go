// Package dataset is the on-disk contract of an SFT set (sftpack build):
// its file names and its manifest.json, which sftpack writes and the run
// report reads.
package dataset

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/codapipe/codapipe/pkg/traj"
)

// Names of the dataset's files and folders.
const (
	ManifestName    = "manifest.json"
	DatasetInfoName = "dataset_info.json"
	ReadmeName      = "README.md"
	TrainName       = "train.jsonl"
	ValName         = "val.jsonl"
	ImagesDir       = "images"
	ParquetDir      = "parquet"
)

// ManifestKind names the format of manifest.json.
const ManifestKind = "codapipe.sft/v1"

// Layout names how samples are laid out: the renderer's messages mapped
// one to one (ShareGPT), in prompt.LayoutUserHistory. Version it when the
// renderer's layout or the mapping changes.
const Layout = "sharegpt/planner-messages/v2"

// Manifest is manifest.json: what the build selected and wrote. Files
// lists every file of the dataset but manifest.json itself (the shape
// internal/infra/export reads); the manifest is written last.
type Manifest struct {
	Kind     string `json:"kind"`
	Producer string `json:"producer"`
	Layout   string `json:"layout"`
	// Selection is the flags the build ran with.
	Selection Selection `json:"selection"`
	// Counts follow the trajectories through the selection.
	Counts Counts `json:"counts"`
	// Splits lists the splits that have samples ("train", "val"): only
	// they have files, and only they are in dataset_info.json and the
	// commands of Training.
	Splits map[string]SplitInfo `json:"splits"`
	// Training is how to train on this dataset as it is, for the splits
	// it has (also in README.md).
	Training Training `json:"training"`
	// Apps, Tasks and Runs count the kept trajectories and their samples.
	Apps  map[string]Count     `json:"apps"`
	Tasks map[string]TaskCount `json:"tasks"`
	Runs  map[string]Count     `json:"runs"`
	// JudgeVersions are the judge versions of the kept trajectories'
	// judgements: the set's one version (JudgeVersion), or none.
	JudgeVersions map[string]JudgeVersionCount `json:"judge_versions"`
	// JudgeVersion is the one judge version the set's judgements are of:
	// --judge-version, or else the one that judged the most of the
	// selected trajectories (setJudgeVersion); "" when none is readable.
	JudgeVersion string `json:"judge_version"`
	// OtherJudgeVersions counts, by judge version, the judgements of the
	// selected trajectories by other versions: not taken.
	OtherJudgeVersions map[string]int `json:"other_judge_versions"`
	// PromptSets are the prompt-set hashes the samples were rendered with.
	PromptSets []string `json:"prompt_sets"`
	// Skipped lists the bad input: records that do not decode and
	// trajectories that cannot become samples, with the reason.
	Skipped []Skipped `json:"skipped"`
	// Files is every file of the dataset but manifest.json, sorted by path.
	Files []File `json:"files"`
}

// Selection is the selection flags as a build used them.
type Selection struct {
	Runs  []string `json:"runs"`
	Apps  []string `json:"apps"`
	Since string   `json:"since,omitempty"`
	Until string   `json:"until,omitempty"`
	Rules
}

// Rules are a build's settings past the runs, apps and time bounds: which
// judgement, which clean successes, the split and the Parquet shard size.
// Options (the flags), Config (Build) and Selection (the manifest) hold
// them alike.
type Rules struct {
	// JudgeVersion takes each trajectory's judgement by this judge version
	// (judge ids as traj.JudgeVersion.ID); "" takes the version that judged
	// the most selected trajectories (setJudgeVersion).
	JudgeVersion string `json:"judge_version,omitempty"`
	// RequireEval keeps only clean successes whose task evaluator passed,
	// when it ran.
	RequireEval bool `json:"require_eval"`
	// MaxPerTask keeps at most this many trajectories of a task (the
	// shortest, then the smallest ids); 0: no limit.
	MaxPerTask int `json:"max_per_task"`
	// ValFraction is the share of tasks in the val split (by a hash of
	// Seed and the task id, so a task's split does not depend on the
	// other tasks).
	ValFraction float64 `json:"val_fraction"`
	Seed        int64   `json:"seed"`
	// ShardBytes is about how much image and text data one Parquet shard
	// holds (0: one shard per split).
	ShardBytes int64 `json:"shard_bytes"`
}

// Counts follow the archive's records through the selection, in order.
type Counts struct {
	// Records is the archive records of the selected runs and apps;
	// Undecodable of them could not be read.
	Records     int `json:"records"`
	Undecodable int `json:"undecodable"`
	// Trajectories is the distinct trajectories among them.
	Trajectories int `json:"trajectories"`
	// NoJudgement: no usable judgement (none by --judge-version, or a
	// record of the trajectory does not decode).
	NoJudgement int `json:"no_judgement"`
	// OutOfRange: started outside --since/--until.
	OutOfRange int `json:"out_of_range"`
	// Decisions counts the chosen judgements by decision.
	Decisions map[string]int `json:"decisions"`
	// EvalFailed: clean successes whose task evaluator ran and failed
	// (--require-eval).
	EvalFailed int `json:"eval_failed"`
	// Skipped: clean successes that cannot become samples (Manifest.Skipped).
	Skipped int `json:"skipped"`
	// Duplicates: clean successes with the executed action sequence of a
	// kept trajectory of their task.
	Duplicates int `json:"duplicates"`
	// OverLimit: left out by --max-per-task.
	OverLimit int `json:"over_limit"`
	// Kept trajectories give Samples samples (one per step), showing
	// Images distinct screenshots.
	Kept    int `json:"kept"`
	Samples int `json:"samples"`
	Images  int `json:"images"`
}

// SplitInfo describes one split.
type SplitInfo struct {
	Tasks int `json:"tasks"`
	Count
	JSONL   string   `json:"jsonl"`
	Parquet []string `json:"parquet"`
}

// Count is trajectories and samples.
type Count struct {
	Trajectories int `json:"trajectories"`
	Samples      int `json:"samples"`
}

// Add counts one trajectory of samples samples.
func (c *Count) Add(samples int) {
	c.Trajectories++
	c.Samples += samples
}

// TaskCount is a task's count with its app and split.
type TaskCount struct {
	App   string `json:"app"`
	Split string `json:"split"`
	Count
}

// JudgeVersionCount is a judge version and what the build kept of its
// judgements.
type JudgeVersionCount struct {
	traj.JudgeVersion
	Count
}

// Skipped is one piece of bad input.
type Skipped struct {
	// Key is the archive record's key.
	Key          string `json:"key"`
	TrajectoryID string `json:"trajectory_id,omitempty"`
	Run          string `json:"run,omitempty"`
	App          string `json:"app,omitempty"`
	Task         string `json:"task,omitempty"`
	Reason       string `json:"reason"`
}

// File is one file of the dataset: its slash-separated path relative to
// the dataset folder, size and SHA-256 (lower-case hex).
type File struct {
	Path   string `json:"path"`
	Bytes  int64  `json:"bytes"`
	SHA256 string `json:"sha256"`
}

// ReadManifest reads the manifest.json of a dataset folder.
func ReadManifest(dir string) (*Manifest, error) {
	body, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return nil, err
	}
	var m Manifest
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("sft: %s: %w", filepath.Join(dir, ManifestName), err)
	}
	if m.Kind != ManifestKind {
		return nil, fmt.Errorf("sft: %s: kind %q, want %q", filepath.Join(dir, ManifestName), m.Kind, ManifestKind)
	}
	return &m, nil
}

// Training is how to train on a dataset as it was written: the
// LLaMA-Factory settings and the ms-swift command for the splits it has,
// run from the dataset folder. manifest.json and README.md carry it, so
// a dataset without a val split is never trained with a val file that
// does not exist.
type Training struct {
	// LlamaFactory is the data part of a LLaMA-Factory training YAML
	// (dataset_dir, dataset, eval_dataset when val has samples) with the
	// image and length settings our screenshots need.
	LlamaFactory string `json:"llamafactory"`
	// Swift is the ms-swift command line (--val_dataset only when val
	// has samples).
	Swift string `json:"swift"`
}
