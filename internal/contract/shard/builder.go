package shard

import (
	"fmt"
	"unicode/utf8"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// rowBuilder appends Rows to Arrow builders and cuts record batches.
type rowBuilder struct {
	rb *array.RecordBuilder

	str  map[int]*array.StringBuilder
	i32  map[int]*array.Int32Builder
	f64  map[int]*array.Float64Builder
	bool map[int]*array.BooleanBuilder

	images    *array.ListBuilder
	image     *array.StructBuilder
	imgSHA    *array.StringBuilder
	imgWidth  *array.Int32Builder
	imgHeight *array.Int32Builder
	imgBytes  *array.BinaryBuilder
	imgPath   *array.StringBuilder

	logprobs *array.ListBuilder
	lpValues *array.Float64Builder

	tokenIDs *array.ListBuilder
	idValues *array.Int32Builder

	promptIDs   *array.ListBuilder
	promptIDVal *array.Int32Builder

	messages  *array.ListBuilder
	message   *array.StructBuilder
	msgRole   *array.StringBuilder
	content   *array.ListBuilder
	part      *array.StructBuilder
	partType  *array.StringBuilder
	partText  *array.StringBuilder
	partImage *array.StringBuilder

	action, reference actionBuilder

	rows  int   // rows appended since the last batch
	bytes int64 // their approximate size
}

// actionBuilder appends to one action struct column.
type actionBuilder struct {
	s                *array.StructBuilder
	typ, text, dir   *array.StringBuilder
	x, y, endX, endY *array.Float64Builder
	keys             *array.ListBuilder
	keyValues        *array.StringBuilder
	nullValid        []bool // {false}, for AppendValues
}

func newActionBuilder(b array.Builder) actionBuilder {
	s := b.(*array.StructBuilder)
	keys := s.FieldBuilder(actKeys).(*array.ListBuilder)
	return actionBuilder{
		s:         s,
		typ:       s.FieldBuilder(actType).(*array.StringBuilder),
		x:         s.FieldBuilder(actX).(*array.Float64Builder),
		y:         s.FieldBuilder(actY).(*array.Float64Builder),
		endX:      s.FieldBuilder(actEndX).(*array.Float64Builder),
		endY:      s.FieldBuilder(actEndY).(*array.Float64Builder),
		text:      s.FieldBuilder(actText).(*array.StringBuilder),
		keys:      keys,
		keyValues: keys.ValueBuilder().(*array.StringBuilder),
		dir:       s.FieldBuilder(actDirection).(*array.StringBuilder),
		nullValid: []bool{false},
	}
}

// optBuilder is an Arrow builder of a nullable column of T.
type optBuilder[T any] interface {
	Append(T)
	AppendNull()
}

// appendOpt appends *v, or a null when v is nil.
func appendOpt[T any](b optBuilder[T], v *T) {
	if v == nil {
		b.AppendNull()
		return
	}
	b.Append(*v)
}

func (ab *actionBuilder) append(a *Action) {
	if a == nil {
		// A null struct whose non-nullable children hold empty values (not
		// nulls), so that every reader sees valid children.
		ab.s.AppendValues(ab.nullValid)
		for i := range ab.s.NumField() {
			ab.s.FieldBuilder(i).AppendEmptyValue()
		}
		return
	}
	ab.s.Append(true)
	ab.typ.Append(a.Type)
	appendOpt(ab.x, a.X)
	appendOpt(ab.y, a.Y)
	appendOpt(ab.endX, a.EndX)
	appendOpt(ab.endY, a.EndY)
	ab.text.Append(a.Text)
	ab.keys.Append(true)
	for _, k := range a.Keys {
		ab.keyValues.Append(k)
	}
	ab.dir.Append(a.Direction)
}

func newRowBuilder(mem memory.Allocator, schema *arrow.Schema) *rowBuilder {
	rb := array.NewRecordBuilder(mem, schema)
	b := &rowBuilder{
		rb:   rb,
		str:  map[int]*array.StringBuilder{},
		i32:  map[int]*array.Int32Builder{},
		f64:  map[int]*array.Float64Builder{},
		bool: map[int]*array.BooleanBuilder{},
	}
	for i, fb := range rb.Fields() {
		switch fb := fb.(type) {
		case *array.StringBuilder:
			b.str[i] = fb
		case *array.Int32Builder:
			b.i32[i] = fb
		case *array.Float64Builder:
			b.f64[i] = fb
		case *array.BooleanBuilder:
			b.bool[i] = fb
		}
	}
	b.images = rb.Field(colImages).(*array.ListBuilder)
	b.image = b.images.ValueBuilder().(*array.StructBuilder)
	b.imgSHA = b.image.FieldBuilder(imgSHA256).(*array.StringBuilder)
	b.imgWidth = b.image.FieldBuilder(imgWidth).(*array.Int32Builder)
	b.imgHeight = b.image.FieldBuilder(imgHeight).(*array.Int32Builder)
	b.imgBytes = b.image.FieldBuilder(imgBytes).(*array.BinaryBuilder)
	b.imgPath = b.image.FieldBuilder(imgPath).(*array.StringBuilder)
	b.logprobs = rb.Field(colLogProbs).(*array.ListBuilder)
	b.lpValues = b.logprobs.ValueBuilder().(*array.Float64Builder)
	b.tokenIDs = rb.Field(colCompletionTokenIDs).(*array.ListBuilder)
	b.idValues = b.tokenIDs.ValueBuilder().(*array.Int32Builder)
	b.promptIDs = rb.Field(colPromptTokenIDs).(*array.ListBuilder)
	b.promptIDVal = b.promptIDs.ValueBuilder().(*array.Int32Builder)
	b.messages = rb.Field(colMessages).(*array.ListBuilder)
	b.message = b.messages.ValueBuilder().(*array.StructBuilder)
	b.msgRole = b.message.FieldBuilder(msgRole).(*array.StringBuilder)
	b.content = b.message.FieldBuilder(msgContent).(*array.ListBuilder)
	b.part = b.content.ValueBuilder().(*array.StructBuilder)
	b.partType = b.part.FieldBuilder(partType).(*array.StringBuilder)
	b.partText = b.part.FieldBuilder(partText).(*array.StringBuilder)
	b.partImage = b.part.FieldBuilder(partImage).(*array.StringBuilder)
	b.action = newActionBuilder(rb.Field(colAction))
	b.reference = newActionBuilder(rb.Field(colReference))
	return b
}

// release frees the builders.
func (b *rowBuilder) release() { b.rb.Release() }

// reserveImageBytes makes room for n bytes of embedded images in the next
// batch, so that the binary buffer is not regrown (and copied) row by row.
func (b *rowBuilder) reserveImageBytes(n int) {
	if n > 0 {
		b.imgBytes.ReserveData(n)
	}
}

// append adds one row.
func (b *rowBuilder) append(r *Row) {
	b.str[colRun].Append(r.Run)
	b.str[colApp].Append(r.App)
	b.str[colTask].Append(r.Task)
	b.str[colTrajectoryID].Append(r.TrajectoryID)
	b.i32[colSample].Append(r.Sample)
	b.i32[colStep].Append(r.Step)
	b.str[colGroupID].Append(r.GroupID)
	b.i32[colCandidate].Append(r.Candidate)
	b.i32[colGroupSize].Append(r.GroupSize)
	b.str[colPrompt].Append(r.Prompt)

	b.messages.Append(true)
	for i := range r.Messages {
		m := &r.Messages[i]
		b.message.Append(true)
		b.msgRole.Append(m.Role)
		b.content.Append(true)
		for _, p := range m.Content {
			b.part.Append(true)
			b.partType.Append(p.Type)
			if p.Type == PartImage {
				b.partText.AppendNull()
				b.partImage.Append(p.Image)
			} else {
				b.partText.Append(p.Text)
				b.partImage.AppendNull()
			}
		}
	}

	b.images.Append(true)
	for i := range r.Images {
		im := &r.Images[i]
		b.image.Append(true)
		b.imgSHA.Append(im.SHA256)
		b.imgWidth.Append(im.Width)
		b.imgHeight.Append(im.Height)
		if im.Bytes == nil {
			b.imgBytes.AppendNull()
		} else {
			b.imgBytes.Append(im.Bytes)
		}
		if im.Path == "" {
			b.imgPath.AppendNull()
		} else {
			b.imgPath.Append(im.Path)
		}
	}

	b.str[colCompletion].Append(r.Completion)
	appendOpt(b.i32[colPromptTokens], r.PromptTokens)
	if r.PromptTokenIDs == nil {
		b.promptIDs.AppendNull()
	} else {
		b.promptIDs.Append(true)
		b.promptIDVal.AppendValues(r.PromptTokenIDs, nil)
	}
	appendOpt(b.i32[colCompletionTokens], r.CompletionTokens)
	if r.LogProbs == nil {
		b.logprobs.AppendNull()
	} else {
		b.logprobs.Append(true)
		b.lpValues.AppendValues(r.LogProbs, nil)
	}
	if r.CompletionTokenIDs == nil {
		b.tokenIDs.AppendNull()
	} else {
		b.tokenIDs.Append(true)
		b.idValues.AppendValues(r.CompletionTokenIDs, nil)
	}
	b.str[colFinishReason].Append(r.FinishReason)
	b.action.append(r.Action)
	b.str[colActionText].Append(r.ActionText)
	b.reference.append(r.Reference)
	b.str[colReferenceText].Append(r.ReferenceText)

	b.f64[colReward].Append(r.Reward)
	b.f64[colRewardTypeMatch].Append(r.RewardTypeMatch)
	b.f64[colRewardDist].Append(r.RewardDist)
	b.bool[colUnparsed].Append(r.Unparsed)
	b.f64[colAdvantage].Append(r.Advantage)
	b.f64[colGroupMean].Append(r.GroupMean)
	b.f64[colGroupStd].Append(r.GroupStd)
	b.f64[colGroupScale].Append(r.GroupScale)
	b.bool[colZeroVariance].Append(r.ZeroVariance)
	b.str[colDroppedReason].Append(r.DroppedReason)
	b.f64[colLossWeight].Append(r.LossWeight)
	b.str[colLabelSource].Append(r.LabelSource)
	b.str[colLabel].Append(r.Label)
	b.str[colPolicyModel].Append(r.PolicyModel)
	b.str[colPolicyCheckpoint].Append(r.PolicyCheckpoint)
	b.str[colExecutorModel].Append(r.ExecutorModel)
	b.str[colExecutorCheckpoint].Append(r.ExecutorCheckpoint)
	b.str[colExecutorCoords].Append(r.ExecutorCoords)
	b.str[colPromptSet].Append(r.PromptSet)
	if r.Sampling == nil {
		b.str[colSampling].AppendNull()
	} else {
		b.str[colSampling].Append(*r.Sampling)
	}
	b.str[colJudgeVersion].Append(r.JudgeVersion)

	b.rows++
	b.bytes += rowSize(r)
}

// batch returns the rows appended since the last call as a record batch
// (nil when there are none) and resets the builders. The caller releases it.
func (b *rowBuilder) batch() arrow.RecordBatch {
	if b.rows == 0 {
		return nil
	}
	rec := b.rb.NewRecordBatch()
	b.rows, b.bytes = 0, 0
	return rec
}

// fixedRowBytes approximates the fixed-width part of a row in Arrow: 9
// int32 or offsets, 9 float64, validity bits, 14 string offsets and the two
// action structs' fixed parts.
const fixedRowBytes = 4*25 + 8*9 + 2*(4*3+8*4) + 8

// rowSize approximates the bytes r takes in a record batch.
func rowSize(r *Row) int64 {
	n := int64(fixedRowBytes)
	n += int64(len(r.Run) + len(r.App) + len(r.Task) + len(r.TrajectoryID) + len(r.GroupID) +
		len(r.Prompt) + len(r.Completion) + len(r.ActionText) + len(r.ReferenceText) +
		len(r.DroppedReason) + len(r.LabelSource) + len(r.Label) + len(r.PolicyModel) +
		len(r.PolicyCheckpoint) + len(r.JudgeVersion) + len(r.FinishReason) +
		len(r.ExecutorModel) + len(r.ExecutorCheckpoint) + len(r.ExecutorCoords) + len(r.PromptSet))
	if r.Sampling != nil {
		n += int64(len(*r.Sampling))
	}
	for i := range r.Messages {
		n += int64(len(r.Messages[i].Role)) + 8
		for _, p := range r.Messages[i].Content {
			n += int64(len(p.Type)+len(p.Text)+len(p.Image)) + 16
		}
	}
	n += 4 * int64(len(r.CompletionTokenIDs)+len(r.PromptTokenIDs))
	for i := range r.Images {
		n += int64(len(r.Images[i].SHA256)+len(r.Images[i].Bytes)+len(r.Images[i].Path)) + 20
	}
	n += 8 * int64(len(r.LogProbs))
	for _, a := range []*Action{r.Action, r.Reference} {
		if a != nil {
			n += int64(len(a.Type) + len(a.Text) + len(a.Direction))
			for _, k := range a.Keys {
				n += int64(len(k)) + 4
			}
		}
	}
	return n
}

// validateRow checks that every string of r is valid UTF-8 (Arrow's utf8
// type requires it, and readers would otherwise see replacement characters)
// and that no image bytes exceed what one Arrow binary array holds.
func validateRow(r *Row) error {
	strs := []struct {
		col string
		s   string
	}{
		{"run", r.Run}, {"app", r.App}, {"task", r.Task}, {"trajectory_id", r.TrajectoryID},
		{"group_id", r.GroupID}, {"prompt", r.Prompt}, {"completion", r.Completion},
		{"action_text", r.ActionText}, {"reference_text", r.ReferenceText},
		{"dropped_reason", r.DroppedReason}, {"label_source", r.LabelSource}, {"label", r.Label},
		{"policy_model", r.PolicyModel}, {"policy_checkpoint", r.PolicyCheckpoint},
		{"judge_version", r.JudgeVersion}, {"finish_reason", r.FinishReason},
		{"executor_model", r.ExecutorModel}, {"executor_checkpoint", r.ExecutorCheckpoint},
		{"executor_coords", r.ExecutorCoords}, {"prompt_set", r.PromptSet},
	}
	for _, c := range strs {
		if !utf8.ValidString(c.s) {
			return fmt.Errorf("column %s: invalid UTF-8", c.col)
		}
	}
	if r.Sampling != nil && !utf8.ValidString(*r.Sampling) {
		return fmt.Errorf("column sampling: invalid UTF-8")
	}
	if r.CompletionTokenIDs != nil && r.LogProbs != nil && len(r.CompletionTokenIDs) != len(r.LogProbs) {
		return fmt.Errorf("columns completion_token_ids and logprobs: %d ids, %d log-probabilities", len(r.CompletionTokenIDs), len(r.LogProbs))
	}
	for i := range r.Messages {
		m := &r.Messages[i]
		if !utf8.ValidString(m.Role) {
			return fmt.Errorf("column messages[%d].role: invalid UTF-8", i)
		}
		for k, p := range m.Content {
			if !utf8.ValidString(p.Type) || !utf8.ValidString(p.Text) || !utf8.ValidString(p.Image) {
				return fmt.Errorf("column messages[%d].content[%d]: invalid UTF-8", i, k)
			}
		}
	}
	for i := range r.Images {
		if !utf8.ValidString(r.Images[i].SHA256) {
			return fmt.Errorf("column images[%d].sha256: invalid UTF-8", i)
		}
		if im := &r.Images[i]; im.Path != "" && (im.stored == 0 || im.Path != ImagePath(im.SHA256)) {
			return fmt.Errorf("column images[%d].path %q: not an image file stored by Writer.PutImages", i, im.Path)
		}
	}
	for _, c := range []struct {
		name string
		a    *Action
	}{{"action", r.Action}, {"reference", r.Reference}} {
		name, a := c.name, c.a
		if a == nil {
			continue
		}
		if !utf8.ValidString(a.Type) || !utf8.ValidString(a.Text) || !utf8.ValidString(a.Direction) {
			return fmt.Errorf("column %s: invalid UTF-8", name)
		}
		for _, k := range a.Keys {
			if !utf8.ValidString(k) {
				return fmt.Errorf("column %s.keys: invalid UTF-8", name)
			}
		}
	}
	if s := rowSize(r); s > maxRowBytes {
		return fmt.Errorf("row of %d bytes, limit %d", s, maxRowBytes)
	}
	return nil
}

// maxRowBytes bounds one row, well under the 2 GiB that int32 offsets of one
// Arrow string or binary array can address.
const maxRowBytes = 1 << 30
