package shard

import (
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/codapipe/codapipe/pkg/grpo"
)

// Format is a shard file format.
type Format string

// Shard file formats.
const (
	// FormatArrow is the Arrow IPC file format (random access, uncompressed
	// buffers, memory-mappable), written with extension ".arrow". The default.
	FormatArrow Format = "arrow"
	// FormatParquet is Parquet written through pqarrow with zstd compression
	// and the Arrow schema embedded (key ARROW:schema), extension ".parquet".
	FormatParquet Format = "parquet"
)

// Ext returns the file extension of the format, with its dot.
func (f Format) Ext() string { return "." + string(f) }

// valid reports whether f is a known format.
func (f Format) valid() bool { return f == FormatArrow || f == FormatParquet }

// Modes of Meta.Mode.
const (
	// ModeStep is step mode: a group is the candidates of one positive step,
	// scored against the executed (reference) action.
	ModeStep = "step"
	// ModeOutcome is outcome mode: a group is the K samples of one task in one
	// run, scored by their outcome; every executed step is a row.
	ModeOutcome = "outcome"
)

// Schema metadata keys. Every shard file carries all of them (empty values
// included), as Arrow schema metadata and, in Parquet files, also as the
// file's key-value metadata.
const (
	MetaSchemaVersion = "codapipe.schema_version"
	MetaVersion       = "codapipe.version"
	MetaMode          = "codapipe.mode"
	MetaLabelMode     = "codapipe.label_mode"
	MetaEstimator     = "codapipe.estimator"
	MetaMethod        = "codapipe.estimator.method"
	MetaEps           = "codapipe.estimator.eps"
	MetaStd           = "codapipe.estimator.std"
	MetaZeroVariance  = "codapipe.estimator.zero_variance"
	MetaTol           = "codapipe.estimator.tol"
	MetaRewardConfig  = "codapipe.reward_config"
	MetaSampling      = "codapipe.sampling"
	MetaImages        = "codapipe.images"
)

// Meta describes how a shard set was produced. It is written into every
// file's schema metadata (see Metadata) and into the manifest, so that a
// file read on its own still says what its rows mean.
type Meta struct {
	// Mode is ModeStep or ModeOutcome.
	Mode string `json:"mode"`
	// LabelMode is the step labelling mode (grpo.LabelMode: clean or
	// prefix); empty in outcome mode.
	LabelMode string `json:"label_mode"`
	// Estimator is the advantage estimator's description,
	// grpo.Estimator.String(), e.g.
	// "grpo(std=unbiased,eps=1e-06,zero_variance=keep,tol=1e-09)".
	Estimator string `json:"estimator"`
	// Method is the estimator's method: grpo, drgrpo or rloo.
	Method string `json:"method"`
	// Eps is ε of the grpo denominator σ + ε.
	Eps float64 `json:"eps"`
	// Std is the standard deviation the estimator used: "unbiased"
	// (divisor n−1) or "population" (divisor n).
	Std string `json:"std"`
	// ZeroVariance is the zero-variance policy: keep or drop.
	ZeroVariance string `json:"zero_variance"`
	// Tol is the spread under which a group is zero-variance.
	Tol float64 `json:"tol"`
	// RewardConfig is the reward configuration as a JSON document
	// (grpo.StepOptions in step mode, grpo.OutcomeConfig in outcome mode);
	// empty or valid JSON.
	RewardConfig string `json:"reward_config"`
	// Version is the codapipe version that wrote the files.
	Version string `json:"codapipe_version"`
	// Sampling is the planner's sampling parameters (traj.Sampling as JSON)
	// when the producer knows every row of the set shares them; empty
	// otherwise, and then each row's sampling column and the manifest's
	// Sampling list say them. Empty or valid JSON.
	Sampling string `json:"sampling,omitempty"`
	// Images is where the rows' images are (ImageMode: files, embed or
	// store); empty in sets written before schema version 3 (store, or
	// embed when their rows carry bytes).
	Images ImageMode `json:"images,omitempty"`
}

// SetEstimator fills the estimator fields of m (Estimator, Method, Eps, Std,
// ZeroVariance, Tol) from e.
func (m *Meta) SetEstimator(e grpo.Estimator) {
	m.Estimator = e.String()
	m.Method = string(e.Method)
	m.Eps = e.Eps
	m.Std = "unbiased"
	if e.PopulationStd {
		m.Std = "population"
	}
	m.ZeroVariance = string(e.ZeroVariance)
	m.Tol = e.Tol
}

// Validate reports a Mode other than step or outcome, or a RewardConfig
// that is neither empty nor valid JSON.
func (m Meta) Validate() error {
	if m.Mode != ModeStep && m.Mode != ModeOutcome {
		return fmt.Errorf("shard: meta: mode %q, want %q or %q", m.Mode, ModeStep, ModeOutcome)
	}
	if m.RewardConfig != "" && !json.Valid([]byte(m.RewardConfig)) {
		return fmt.Errorf("shard: meta: reward_config is not valid JSON")
	}
	if m.Sampling != "" && !json.Valid([]byte(m.Sampling)) {
		return fmt.Errorf("shard: meta: sampling is not valid JSON")
	}
	if m.Images != "" && !m.Images.Valid() {
		return fmt.Errorf("shard: meta: images %q, want %s", m.Images, imageModesText)
	}
	return nil
}

// Metadata returns m as Arrow schema metadata: every codapipe.* key, with
// SchemaVersion under codapipe.schema_version and floats in Go's shortest
// round-trip form (strconv 'g', -1).
func (m Meta) Metadata() arrow.Metadata {
	f := func(x float64) string { return strconv.FormatFloat(x, 'g', -1, 64) }
	return arrow.NewMetadata(
		[]string{
			MetaSchemaVersion, MetaVersion, MetaMode, MetaLabelMode,
			MetaEstimator, MetaMethod, MetaEps, MetaStd, MetaZeroVariance, MetaTol,
			MetaRewardConfig, MetaSampling, MetaImages,
		},
		[]string{
			strconv.Itoa(SchemaVersion), m.Version, m.Mode, m.LabelMode,
			m.Estimator, m.Method, f(m.Eps), m.Std, m.ZeroVariance, f(m.Tol),
			m.RewardConfig, m.Sampling, string(m.Images),
		},
	)
}

// ParseMeta reads Meta and the schema version back from a file's metadata
// (Arrow schema metadata, or Parquet key-value metadata as a map). Missing
// keys are empty; a malformed number is an error.
func ParseMeta(md map[string]string) (Meta, int, error) {
	m := Meta{
		Mode:         md[MetaMode],
		LabelMode:    md[MetaLabelMode],
		Estimator:    md[MetaEstimator],
		Method:       md[MetaMethod],
		Std:          md[MetaStd],
		ZeroVariance: md[MetaZeroVariance],
		RewardConfig: md[MetaRewardConfig],
		Version:      md[MetaVersion],
		Sampling:     md[MetaSampling],
		Images:       ImageMode(md[MetaImages]),
	}
	var err error
	num := func(key string) float64 {
		s := md[key]
		if s == "" || err != nil {
			return 0
		}
		x, perr := strconv.ParseFloat(s, 64)
		if perr != nil {
			err = fmt.Errorf("shard: metadata %s: %w", key, perr)
		}
		return x
	}
	m.Eps = num(MetaEps)
	m.Tol = num(MetaTol)
	if err != nil {
		return Meta{}, 0, err
	}
	version := 0
	if s := md[MetaSchemaVersion]; s != "" {
		if version, err = strconv.Atoi(s); err != nil {
			return Meta{}, 0, fmt.Errorf("shard: metadata %s: %w", MetaSchemaVersion, err)
		}
	}
	return m, version, nil
}

// MetadataMap converts Arrow metadata to a map (for ParseMeta).
func MetadataMap(md arrow.Metadata) map[string]string {
	out := make(map[string]string, md.Len())
	for i, k := range md.Keys() {
		out[k] = md.Values()[i]
	}
	return out
}

// Column indexes in the schema, in Row's field order.
const (
	colRun = iota
	colApp
	colTask
	colTrajectoryID
	colSample
	colStep
	colGroupID
	colCandidate
	colGroupSize
	colPrompt
	colMessages
	colImages
	colCompletion
	colPromptTokens
	colPromptTokenIDs
	colCompletionTokens
	colLogProbs
	colCompletionTokenIDs
	colFinishReason
	colAction
	colActionText
	colReference
	colReferenceText
	colReward
	colRewardTypeMatch
	colRewardDist
	colUnparsed
	colAdvantage
	colGroupMean
	colGroupStd
	colGroupScale
	colZeroVariance
	colDroppedReason
	colLossWeight
	colLabelSource
	colLabel
	colPolicyModel
	colPolicyCheckpoint
	colExecutorModel
	colExecutorCheckpoint
	colExecutorCoords
	colPromptSet
	colSampling
	colJudgeVersion
	numCols
)

// Fields of the image struct (images column) and the action struct (action
// and reference columns).
const (
	imgSHA256 = iota
	imgWidth
	imgHeight
	imgBytes
	imgPath
)

const (
	actType = iota
	actX
	actY
	actEndX
	actEndY
	actText
	actKeys
	actDirection
)

// ImageType is the element type of the images column.
var ImageType = arrow.StructOf(
	arrow.Field{Name: "sha256", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "width", Type: arrow.PrimitiveTypes.Int32},
	arrow.Field{Name: "height", Type: arrow.PrimitiveTypes.Int32},
	arrow.Field{Name: "bytes", Type: arrow.BinaryTypes.Binary, Nullable: true},
	arrow.Field{Name: "path", Type: arrow.BinaryTypes.String, Nullable: true},
)

// ActionType is the type of the action and reference columns.
var ActionType = arrow.StructOf(
	arrow.Field{Name: "type", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	arrow.Field{Name: "y", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	arrow.Field{Name: "end_x", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	arrow.Field{Name: "end_y", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
	arrow.Field{Name: "text", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "keys", Type: arrow.ListOfNonNullable(arrow.BinaryTypes.String)},
	arrow.Field{Name: "direction", Type: arrow.BinaryTypes.String},
)

// Fields of the message struct (messages column) and of a content part.
const (
	msgRole = iota
	msgContent
)

const (
	partType = iota
	partText
	partImage
)

// PartType is the element type of a message's content list.
var PartType = arrow.StructOf(
	arrow.Field{Name: "type", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "text", Type: arrow.BinaryTypes.String, Nullable: true},
	arrow.Field{Name: "image", Type: arrow.BinaryTypes.String, Nullable: true},
)

// MessageType is the element type of the messages column.
var MessageType = arrow.StructOf(
	arrow.Field{Name: "role", Type: arrow.BinaryTypes.String},
	arrow.Field{Name: "content", Type: arrow.ListOfNonNullable(PartType)},
)

// fields is the schema's columns, one per Row field in Row's order, named
// like Row's json tags.
var fields = func() []arrow.Field {
	str := arrow.BinaryTypes.String
	i32 := arrow.PrimitiveTypes.Int32
	f64 := arrow.PrimitiveTypes.Float64
	b := arrow.FixedWidthTypes.Boolean
	fs := make([]arrow.Field, numCols)
	set := func(i int, name string, t arrow.DataType, nullable bool) {
		fs[i] = arrow.Field{Name: name, Type: t, Nullable: nullable}
	}
	set(colRun, "run", str, false)
	set(colApp, "app", str, false)
	set(colTask, "task", str, false)
	set(colTrajectoryID, "trajectory_id", str, false)
	set(colSample, "sample", i32, false)
	set(colStep, "step", i32, false)
	set(colGroupID, "group_id", str, false)
	set(colCandidate, "candidate", i32, false)
	set(colGroupSize, "group_size", i32, false)
	set(colPrompt, "prompt", str, false)
	set(colMessages, "messages", arrow.ListOfNonNullable(MessageType), false)
	set(colImages, "images", arrow.ListOfNonNullable(ImageType), false)
	set(colCompletion, "completion", str, false)
	set(colPromptTokens, "prompt_tokens", i32, true)
	set(colPromptTokenIDs, "prompt_token_ids", arrow.ListOfNonNullable(i32), true)
	set(colCompletionTokens, "completion_tokens", i32, true)
	set(colLogProbs, "logprobs", arrow.ListOfNonNullable(f64), true)
	set(colCompletionTokenIDs, "completion_token_ids", arrow.ListOfNonNullable(i32), true)
	set(colFinishReason, "finish_reason", str, false)
	set(colAction, "action", ActionType, true)
	set(colActionText, "action_text", str, false)
	set(colReference, "reference", ActionType, true)
	set(colReferenceText, "reference_text", str, false)
	set(colReward, "reward", f64, false)
	set(colRewardTypeMatch, "reward_type_match", f64, false)
	set(colRewardDist, "reward_dist", f64, false)
	set(colUnparsed, "unparsed", b, false)
	set(colAdvantage, "advantage", f64, false)
	set(colGroupMean, "group_mean", f64, false)
	set(colGroupStd, "group_std", f64, false)
	set(colGroupScale, "group_scale", f64, false)
	set(colZeroVariance, "zero_variance", b, false)
	set(colDroppedReason, "dropped_reason", str, false)
	set(colLossWeight, "loss_weight", f64, false)
	set(colLabelSource, "label_source", str, false)
	set(colLabel, "label", str, false)
	set(colPolicyModel, "policy_model", str, false)
	set(colPolicyCheckpoint, "policy_checkpoint", str, false)
	set(colExecutorModel, "executor_model", str, false)
	set(colExecutorCheckpoint, "executor_checkpoint", str, false)
	set(colExecutorCoords, "executor_coords", str, false)
	set(colPromptSet, "prompt_set", str, false)
	set(colSampling, "sampling", str, true)
	set(colJudgeVersion, "judge_version", str, false)
	return fs
}()

// Schema returns the Arrow schema of shard files: one column per Row field
// (see docs/shards.md) and meta as schema metadata.
func Schema(meta Meta) *arrow.Schema {
	md := meta.Metadata()
	return arrow.NewSchema(fields, &md)
}

// Columns returns the schema's columns in order: name, type in Arrow's text
// form (e.g. "list<item: float64>") and nullability.
func Columns() []Column {
	out := make([]Column, len(fields))
	for i, f := range fields {
		out[i] = Column{Name: f.Name, Type: f.Type.String(), Nullable: f.Nullable}
	}
	return out
}

// Column is one column of the schema as recorded in the manifest.
type Column struct {
	// Name is the column's name (Row's json tag).
	Name string `json:"name"`
	// Type is the Arrow type in Arrow's text form, e.g. "list<item: float64>".
	Type string `json:"type"`
	// Nullable says whether the column may hold nulls.
	Nullable bool `json:"nullable"`
}
