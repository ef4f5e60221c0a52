package trainexport

import (
	"context"
	"fmt"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

// CandidateRow is one line of the jsonl export: one stored candidate (one
// shard row), everything an offline decoupled-GRPO trainer trains on.
// Field names are the shard columns' (docs/shards.md).
type CandidateRow struct {
	Index int64 `json:"index"` // line number
	GroupIDs
	Candidate int32 `json:"candidate"`
	// Messages are the prompt, flattened (Flatten): one "<image>" per
	// image in string content.
	Messages []Message `json:"messages"`
	// Images are the prompt's images in placeholder order, by path.
	Images []ImageRef `json:"images"`
	// PromptTokenIDs are the prompt's token ids under the behaviour
	// policy's tokenizer, when the endpoint returned them; null otherwise.
	PromptTokenIDs []int32 `json:"prompt_token_ids"`
	Completion     string  `json:"completion"`
	// CompletionTokenIDs and LogProbs are the completion's tokens and
	// their behaviour log-probabilities, one per token; null when the
	// endpoint gave none.
	CompletionTokenIDs []int32   `json:"completion_token_ids"`
	LogProbs           []float64 `json:"logprobs"`
	FinishReason       string    `json:"finish_reason"`
	ActionText         string    `json:"action_text"`
	ReferenceText      string    `json:"reference_text"`
	Reward             float64   `json:"reward"`
	Advantage          float64   `json:"advantage"`
	GroupMean          float64   `json:"group_mean"`
	GroupStd           float64   `json:"group_std"`
	ZeroVariance       bool      `json:"zero_variance"`
	LossWeight         float64   `json:"loss_weight"`
	Label              string    `json:"label"`
	LabelSource        string    `json:"label_source"`
	Unparsed           bool      `json:"unparsed"`
	Sampling           *string   `json:"sampling"`
	Provenance
}

// Provenance names what made a row's rewards, with the shard column
// names: the planner that sampled it, the frozen executor that grounded
// its candidates, the prompt set both were prompted with, and the judge
// version that labelled its trajectory.
type Provenance struct {
	PolicyModel        string `json:"policy_model"`
	PolicyCheckpoint   string `json:"policy_checkpoint"`
	ExecutorModel      string `json:"executor_model"`
	ExecutorCheckpoint string `json:"executor_checkpoint"`
	ExecutorCoords     string `json:"executor_coords"`
	PromptSet          string `json:"prompt_set"`
	JudgeVersion       string `json:"judge_version"`
}

func provenanceOf(r *shard.Row) Provenance {
	return Provenance{PolicyModel: r.PolicyModel, PolicyCheckpoint: r.PolicyCheckpoint, ExecutorModel: r.ExecutorModel,
		ExecutorCheckpoint: r.ExecutorCheckpoint, ExecutorCoords: r.ExecutorCoords, PromptSet: r.PromptSet, JudgeVersion: r.JudgeVersion}
}

// GroupIDs are the ids of a row's group (step) that both kinds of rows
// carry, with the shard column names.
type GroupIDs struct {
	Run          string `json:"run"`
	App          string `json:"app"`
	Task         string `json:"task"`
	TrajectoryID string `json:"trajectory_id"`
	Sample       int32  `json:"sample"`
	Step         int32  `json:"step"`
	GroupID      string `json:"group_id"`
	GroupSize    int32  `json:"group_size"`
}

func idsOf(r *shard.Row) GroupIDs {
	return GroupIDs{Run: r.Run, App: r.App, Task: r.Task, TrajectoryID: r.TrajectoryID, Sample: r.Sample, Step: r.Step,
		GroupID: r.GroupID, GroupSize: r.GroupSize}
}

// ImageRef is an image of a jsonl row: its file, relative to the export's
// folder, and its SHA-256 (the file's content hash) and size in pixels.
type ImageRef struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
	Width  int32  `json:"width"`
	Height int32  `json:"height"`
}

// candidate writes one shard row as a jsonl row.
func (ex *exporter) candidate(ctx context.Context, r *shard.Row) error {
	msgs, err := Flatten(r.Messages, r.Images)
	if err != nil {
		return err
	}
	imgs := make([]ImageRef, len(r.Images))
	for i, im := range r.Images {
		p, err := ex.images.write(ctx, im)
		if err != nil {
			return err
		}
		imgs[i] = ImageRef{Path: p, SHA256: im.SHA256, Width: im.Width, Height: im.Height}
	}
	out := &CandidateRow{
		Index: int64(ex.index), GroupIDs: idsOf(r), Candidate: r.Candidate,
		Messages: msgs, Images: imgs,
		PromptTokenIDs: r.PromptTokenIDs,
		Completion:     r.Completion, CompletionTokenIDs: r.CompletionTokenIDs, LogProbs: r.LogProbs,
		FinishReason: r.FinishReason, ActionText: r.ActionText, ReferenceText: r.ReferenceText,
		Reward: r.Reward, Advantage: r.Advantage, GroupMean: r.GroupMean, GroupStd: r.GroupStd,
		ZeroVariance: r.ZeroVariance, LossWeight: r.LossWeight, Label: r.Label, LabelSource: r.LabelSource,
		Unparsed: r.Unparsed, Sampling: r.Sampling, Provenance: provenanceOf(r),
	}
	if err := ex.outs[""].add(out); err != nil {
		return fmt.Errorf("candidate row: %w", err)
	}
	ex.index++
	return nil
}
