package shardtest

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

// Diff compares got with want row by row and column by column and returns
// one line per difference, e.g. "row 3 column images[1].bytes: got 10
// bytes (sha256 ab12…), want null". Strings and bytes compare exactly,
// floats by their bits (so -0 differs from 0; any NaN equals any NaN, since
// readers do not keep NaN payloads), nulls (nil pointers, nil LogProbs, nil
// image Bytes) differ from every value. Images and Keys compare as lists:
// a nil list equals an empty one (their columns are not nullable).
func Diff(want, got []shard.Row) []string {
	var out []string
	if len(got) != len(want) {
		out = append(out, fmt.Sprintf("%d rows, want %d", len(got), len(want)))
	}
	for i := range min(len(got), len(want)) {
		c := &differ{row: i, out: &out}
		c.diffRow(&want[i], &got[i])
	}
	return out
}

type differ struct {
	row int
	out *[]string
}

func (c *differ) add(col, got, want string) {
	*c.out = append(*c.out, fmt.Sprintf("row %d column %s: got %s, want %s", c.row, col, got, want))
}

func showStr(s string) string {
	if len(s) > 120 {
		return fmt.Sprintf("%q… (%d bytes)", s[:120], len(s))
	}
	return fmt.Sprintf("%q", s)
}

func showFloat(x float64) string {
	return fmt.Sprintf("%v (bits %#016x)", x, math.Float64bits(x))
}

func showBytes(b []byte) string {
	if b == nil {
		return "null"
	}
	sum := sha256.Sum256(b)
	return fmt.Sprintf("%d bytes (sha256 %s…)", len(b), hex.EncodeToString(sum[:6]))
}

func (c *differ) str(col, got, want string) {
	if got != want {
		c.add(col, showStr(got), showStr(want))
	}
}

func (c *differ) i32(col string, got, want int32) {
	if got != want {
		c.add(col, fmt.Sprint(got), fmt.Sprint(want))
	}
}

func (c *differ) optI32(col string, got, want *int32) {
	switch {
	case got == nil && want == nil:
	case got == nil:
		c.add(col, "null", fmt.Sprint(*want))
	case want == nil:
		c.add(col, fmt.Sprint(*got), "null")
	default:
		c.i32(col, *got, *want)
	}
}

func sameFloat(a, b float64) bool {
	if math.IsNaN(a) || math.IsNaN(b) {
		return math.IsNaN(a) && math.IsNaN(b)
	}
	return math.Float64bits(a) == math.Float64bits(b)
}

func (c *differ) f64(col string, got, want float64) {
	if !sameFloat(got, want) {
		c.add(col, showFloat(got), showFloat(want))
	}
}

func (c *differ) optF64(col string, got, want *float64) {
	switch {
	case got == nil && want == nil:
	case got == nil:
		c.add(col, "null", showFloat(*want))
	case want == nil:
		c.add(col, showFloat(*got), "null")
	default:
		c.f64(col, *got, *want)
	}
}

func (c *differ) boolean(col string, got, want bool) {
	if got != want {
		c.add(col, fmt.Sprint(got), fmt.Sprint(want))
	}
}

func (c *differ) bytes(col string, got, want []byte) {
	if (got == nil) != (want == nil) || !bytes.Equal(got, want) {
		c.add(col, showBytes(got), showBytes(want))
	}
}

func (c *differ) action(col string, got, want *shard.Action) {
	switch {
	case got == nil && want == nil:
		return
	case got == nil:
		c.add(col, "null", fmt.Sprintf("%+v", *want))
		return
	case want == nil:
		c.add(col, fmt.Sprintf("%+v", *got), "null")
		return
	}
	c.str(col+".type", got.Type, want.Type)
	c.optF64(col+".x", got.X, want.X)
	c.optF64(col+".y", got.Y, want.Y)
	c.optF64(col+".end_x", got.EndX, want.EndX)
	c.optF64(col+".end_y", got.EndY, want.EndY)
	c.str(col+".text", got.Text, want.Text)
	if len(got.Keys) != len(want.Keys) {
		c.add(col+".keys", fmt.Sprintf("%q", got.Keys), fmt.Sprintf("%q", want.Keys))
	} else {
		for i := range got.Keys {
			c.str(fmt.Sprintf("%s.keys[%d]", col, i), got.Keys[i], want.Keys[i])
		}
	}
	c.str(col+".direction", got.Direction, want.Direction)
}

// diffList compares two lists of structs: a difference in length is one
// line ("3 <unit>" against the wanted length), else each pair of elements
// is compared by elem under the column name col[i].
func diffList[T any](c *differ, col, unit string, got, want []T, elem func(col string, g, w *T)) {
	if len(got) != len(want) {
		c.add(col, fmt.Sprintf("%d %s", len(got), unit), fmt.Sprintf("%d", len(want)))
		return
	}
	for i := range got {
		elem(fmt.Sprintf("%s[%d]", col, i), &got[i], &want[i])
	}
}

func (c *differ) diffRow(want, got *shard.Row) {
	c.str("run", got.Run, want.Run)
	c.str("app", got.App, want.App)
	c.str("task", got.Task, want.Task)
	c.str("trajectory_id", got.TrajectoryID, want.TrajectoryID)
	c.i32("sample", got.Sample, want.Sample)
	c.i32("step", got.Step, want.Step)
	c.str("group_id", got.GroupID, want.GroupID)
	c.i32("candidate", got.Candidate, want.Candidate)
	c.i32("group_size", got.GroupSize, want.GroupSize)
	c.str("prompt", got.Prompt, want.Prompt)
	diffList(c, "messages", "messages", got.Messages, want.Messages, func(col string, g, w *shard.Message) {
		c.str(col+".role", g.Role, w.Role)
		diffList(c, col+".content", "parts", g.Content, w.Content, func(pc string, g, w *shard.Part) {
			c.str(pc+".type", g.Type, w.Type)
			c.str(pc+".text", g.Text, w.Text)
			c.str(pc+".image", g.Image, w.Image)
		})
	})
	diffList(c, "images", "images", got.Images, want.Images, func(col string, g, w *shard.Image) {
		c.str(col+".sha256", g.SHA256, w.SHA256)
		c.i32(col+".width", g.Width, w.Width)
		c.i32(col+".height", g.Height, w.Height)
		c.bytes(col+".bytes", g.Bytes, w.Bytes)
		c.str(col+".path", g.Path, w.Path)
	})
	c.str("completion", got.Completion, want.Completion)
	c.optI32("prompt_tokens", got.PromptTokens, want.PromptTokens)
	c.ids("prompt_token_ids", got.PromptTokenIDs, want.PromptTokenIDs)
	c.optI32("completion_tokens", got.CompletionTokens, want.CompletionTokens)
	switch {
	case (got.LogProbs == nil) != (want.LogProbs == nil):
		c.add("logprobs", showList(got.LogProbs), showList(want.LogProbs))
	case len(got.LogProbs) != len(want.LogProbs):
		c.add("logprobs", fmt.Sprintf("%d values", len(got.LogProbs)), fmt.Sprintf("%d", len(want.LogProbs)))
	default:
		for i := range got.LogProbs {
			c.f64(fmt.Sprintf("logprobs[%d]", i), got.LogProbs[i], want.LogProbs[i])
		}
	}
	c.ids("completion_token_ids", got.CompletionTokenIDs, want.CompletionTokenIDs)
	c.str("finish_reason", got.FinishReason, want.FinishReason)
	c.action("action", got.Action, want.Action)
	c.str("action_text", got.ActionText, want.ActionText)
	c.action("reference", got.Reference, want.Reference)
	c.str("reference_text", got.ReferenceText, want.ReferenceText)
	c.f64("reward", got.Reward, want.Reward)
	c.f64("reward_type_match", got.RewardTypeMatch, want.RewardTypeMatch)
	c.f64("reward_dist", got.RewardDist, want.RewardDist)
	c.boolean("unparsed", got.Unparsed, want.Unparsed)
	c.f64("advantage", got.Advantage, want.Advantage)
	c.f64("group_mean", got.GroupMean, want.GroupMean)
	c.f64("group_std", got.GroupStd, want.GroupStd)
	c.f64("group_scale", got.GroupScale, want.GroupScale)
	c.boolean("zero_variance", got.ZeroVariance, want.ZeroVariance)
	c.str("dropped_reason", got.DroppedReason, want.DroppedReason)
	c.f64("loss_weight", got.LossWeight, want.LossWeight)
	c.str("label_source", got.LabelSource, want.LabelSource)
	c.str("label", got.Label, want.Label)
	c.str("policy_model", got.PolicyModel, want.PolicyModel)
	c.str("policy_checkpoint", got.PolicyCheckpoint, want.PolicyCheckpoint)
	c.str("executor_model", got.ExecutorModel, want.ExecutorModel)
	c.str("executor_checkpoint", got.ExecutorCheckpoint, want.ExecutorCheckpoint)
	c.str("executor_coords", got.ExecutorCoords, want.ExecutorCoords)
	c.str("prompt_set", got.PromptSet, want.PromptSet)
	switch {
	case got.Sampling == nil && want.Sampling == nil:
	case got.Sampling == nil || want.Sampling == nil:
		c.add("sampling", showOptStr(got.Sampling), showOptStr(want.Sampling))
	default:
		c.str("sampling", *got.Sampling, *want.Sampling)
	}
	c.str("judge_version", got.JudgeVersion, want.JudgeVersion)
}

// ids compares two nullable lists of token ids, value by value.
func (c *differ) ids(col string, got, want []int32) {
	switch {
	case (got == nil) != (want == nil), len(got) != len(want):
		c.add(col, showIDs(got), showIDs(want))
	default:
		for i := range got {
			c.i32(fmt.Sprintf("%s[%d]", col, i), got[i], want[i])
		}
	}
}

func showIDs(l []int32) string {
	if l == nil {
		return "null"
	}
	return fmt.Sprintf("%d ids", len(l))
}

func showOptStr(s *string) string {
	if s == nil {
		return "null"
	}
	return showStr(*s)
}

func showList(l []float64) string {
	if l == nil {
		return "null"
	}
	return fmt.Sprintf("%d values", len(l))
}
