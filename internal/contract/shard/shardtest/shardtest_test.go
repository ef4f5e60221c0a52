package shardtest

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

func ptr[T any](v T) *T { return &v }

// fullRow has every field, pointer and list set (lists of two elements).
func fullRow() shard.Row {
	act := func() *shard.Action {
		return &shard.Action{Type: "drag", X: ptr(0.1), Y: ptr(0.2), EndX: ptr(0.3), EndY: ptr(0.4),
			Text: "t", Keys: []string{"ctrl", "c"}, Direction: "up"}
	}
	return shard.Row{
		Run: "r", App: "a", Task: "t", TrajectoryID: "tr", Sample: 1, Step: 2, GroupID: "g", Candidate: 3, GroupSize: 4,
		Prompt: "p", Images: []shard.Image{{SHA256: "s1", Width: 1, Height: 2, Bytes: []byte{1}, Path: "images/s1.png"}, {SHA256: "s2", Width: 3, Height: 4, Bytes: []byte{2, 3}, Path: "images/s2.png"}},
		Messages:   []shard.Message{{Role: "system", Content: []shard.Part{{Type: shard.PartText, Text: "sys"}, {Type: shard.PartText, Text: "more"}}}, {Role: "user", Content: []shard.Part{{Type: shard.PartText, Text: "hi"}, {Type: shard.PartImage, Image: "sha256:s1"}}}},
		Completion: "c", PromptTokens: ptr(int32(5)), PromptTokenIDs: []int32{9, 10}, CompletionTokens: ptr(int32(6)), LogProbs: []float64{-1, -2},
		CompletionTokenIDs: []int32{7, 8}, FinishReason: "stop", Sampling: ptr(`{"temperature":1}`),
		Action: act(), ActionText: "at", Reference: act(), ReferenceText: "rt",
		Reward: 0.5, RewardTypeMatch: 1, RewardDist: 0.25, Unparsed: true, Advantage: 1.5, GroupMean: 0.5, GroupStd: 0.1,
		GroupScale: 10, ZeroVariance: true, DroppedReason: "d", LossWeight: 0.2, LabelSource: "clean", Label: "positive",
		PolicyModel: "pm", PolicyCheckpoint: "pc", JudgeVersion: "jv",
		ExecutorModel: "em", ExecutorCheckpoint: "ec", ExecutorCoords: `{"space":"grid1000"}`, PromptSet: "ps",
	}
}

// clone deep-copies v (a Row or part of one), keeping nil and empty apart.
func clone(v reflect.Value) reflect.Value {
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return v
		}
		p := reflect.New(v.Elem().Type())
		p.Elem().Set(clone(v.Elem()))
		return p
	case reflect.Slice:
		if v.IsNil() {
			return v
		}
		s := reflect.MakeSlice(v.Type(), v.Len(), v.Len())
		for i := range v.Len() {
			s.Index(i).Set(clone(v.Index(i)))
		}
		return s
	case reflect.Struct:
		s := reflect.New(v.Type()).Elem()
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				s.Field(i).Set(clone(v.Field(i)))
			}
		}
		return s
	}
	return v
}

// leaf is one value of a Row reachable by reflection, with its column path
// as Diff names it and a way to change it.
type leaf struct {
	col    string
	mutate func(v reflect.Value) // v is the leaf in a clone
	path   []int                 // field/element indexes from the Row
}

// leaves enumerates every scalar, pointer and list of v, with mutations
// that Diff must report: a changed value, and null for a value.
func leaves(t reflect.Type, v reflect.Value, col string, path []int) []leaf {
	p := func() []int { return slices.Clone(path) }
	var out []leaf
	switch v.Kind() {
	case reflect.String:
		out = append(out, leaf{col, func(v reflect.Value) { v.SetString(v.String() + "x") }, p()})
	case reflect.Int32:
		out = append(out, leaf{col, func(v reflect.Value) { v.SetInt(v.Int() + 1) }, p()})
	case reflect.Float64:
		out = append(out, leaf{col, func(v reflect.Value) { v.SetFloat(math.Nextafter(v.Float(), math.Inf(1))) }, p()})
	case reflect.Bool:
		out = append(out, leaf{col, func(v reflect.Value) { v.SetBool(!v.Bool()) }, p()})
	case reflect.Pointer:
		out = append(out, leaf{col, func(v reflect.Value) { v.SetZero() }, p()})
		out = append(out, leaves(t, v.Elem(), col, append(p(), -1))...)
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 { // bytes
			out = append(out, leaf{col, func(v reflect.Value) { v.SetZero() }, p()})
			out = append(out, leaf{col, func(v reflect.Value) { v.Index(0).SetUint(v.Index(0).Uint() + 1) }, p()})
			return out
		}
		out = append(out, leaf{col, func(v reflect.Value) { v.Set(v.Slice(0, 1)) }, p()})
		if k := v.Type().Elem().Kind(); k == reflect.Float64 || k == reflect.Int32 { // logprobs, completion_token_ids: nullable
			out = append(out, leaf{col, func(v reflect.Value) { v.SetZero() }, p()})
		}
		for i := range v.Len() {
			elem := fmt.Sprintf("%s[%d]", col, i)
			out = append(out, leaves(t, v.Index(i), elem, append(p(), i))...)
		}
	case reflect.Struct:
		for i := range v.NumField() {
			if !v.Type().Field(i).IsExported() {
				continue // not a column
			}
			name, _, _ := strings.Cut(v.Type().Field(i).Tag.Get("json"), ",")
			c := name
			if col != "" {
				c = col + "." + name
			}
			out = append(out, leaves(t, v.Field(i), c, append(p(), i))...)
		}
	default:
		panic("unexpected kind " + v.Kind().String())
	}
	return out
}

// at follows path from the Row value v (−1 dereferences a pointer; other
// indexes are struct fields or slice elements, by kind).
func at(v reflect.Value, path []int) reflect.Value {
	for _, i := range path {
		switch v.Kind() {
		case reflect.Pointer:
			v = v.Elem()
		case reflect.Struct:
			v = v.Field(i)
		case reflect.Slice:
			v = v.Index(i)
		}
	}
	return v
}

// TestDiffCoversEveryValue changes every value of a full row, one at a
// time, and checks that Diff reports it under the right column.
func TestDiffCoversEveryValue(t *testing.T) {
	base := fullRow()
	ls := leaves(reflect.TypeFor[shard.Row](), reflect.ValueOf(base), "", nil)
	if len(ls) < 60 {
		t.Fatalf("only %d mutations", len(ls))
	}
	if d := Diff([]shard.Row{base}, []shard.Row{clone(reflect.ValueOf(base)).Interface().(shard.Row)}); len(d) != 0 {
		t.Fatalf("a clone differs: %v", d)
	}
	for _, l := range ls {
		c := clone(reflect.ValueOf(base))
		row := reflect.New(c.Type()).Elem()
		row.Set(c)
		l.mutate(at(row, l.path))
		got := row.Interface().(shard.Row)
		d := Diff([]shard.Row{base}, []shard.Row{got})
		if len(d) == 0 {
			t.Errorf("%s: change not reported", l.col)
			continue
		}
		if !strings.Contains(d[0], "column "+l.col) {
			t.Errorf("%s: reported as %q", l.col, d[0])
		}
	}
}

func TestDiffFloats(t *testing.T) {
	r := func(x float64) []shard.Row { return []shard.Row{{Reward: x}} }
	negZero := math.Copysign(0, -1)
	if d := Diff(r(0), r(negZero)); len(d) != 1 {
		t.Errorf("0 vs -0: %v", d)
	}
	if d := Diff(r(math.NaN()), r(math.Float64frombits(0x7ff8000000000001))); len(d) != 0 {
		t.Errorf("NaN vs NaN: %v", d)
	}
	if d := Diff(r(math.NaN()), r(0)); len(d) != 1 {
		t.Errorf("NaN vs 0: %v", d)
	}
	if d := Diff(r(1), nil); len(d) != 1 || !strings.Contains(d[0], "0 rows, want 1") {
		t.Errorf("row count: %v", d)
	}
	// Nil and empty lists of non-nullable columns are equal.
	a := []shard.Row{{Images: nil, Action: &shard.Action{Keys: nil}}}
	b := []shard.Row{{Images: []shard.Image{}, Action: &shard.Action{Keys: []string{}}}}
	if d := Diff(a, b); len(d) != 0 {
		t.Errorf("nil vs empty lists: %v", d)
	}
}

// rawRow renders a row the way the reader prints it.
func rawRow(t *testing.T, extra map[string]string, drop ...string) map[string]json.RawMessage {
	t.Helper()
	vals := map[string]string{}
	for _, c := range shard.Columns() {
		switch {
		case c.Nullable:
			vals[c.Name] = "null"
		case strings.HasPrefix(c.Type, "list"):
			vals[c.Name] = "[]"
		case c.Type == "int32" || c.Type == "float64":
			vals[c.Name] = "0"
		case c.Type == "bool":
			vals[c.Name] = "false"
		default:
			vals[c.Name] = `""`
		}
	}
	for k, v := range extra {
		vals[k] = v
	}
	for _, k := range drop {
		delete(vals, k)
	}
	out := map[string]json.RawMessage{}
	for k, v := range vals {
		out[k] = json.RawMessage(v)
	}
	return out
}

func TestDecode(t *testing.T) {
	f := File{Path: "x", Rows: []map[string]json.RawMessage{rawRow(t, map[string]string{
		"reward":    "-0",
		"advantage": `"-Infinity"`,
		"logprobs":  `[5e-324, "NaN", 1e+308]`,
		"images":    `[{"sha256":"ab","width":1,"height":2,"bytes":"AQI=","path":null},{"sha256":"cd","width":0,"height":0,"bytes":null,"path":"images/cd.png"}]`,
		"action":    `{"type":"click","x":0.5,"y":null,"end_x":null,"end_y":null,"text":"","keys":["a"],"direction":""}`,
	})}}
	rows, err := f.Decode()
	if err != nil {
		t.Fatal(err)
	}
	r := rows[0]
	if math.Float64bits(r.Reward) != 1<<63 || !math.IsInf(r.Advantage, -1) || r.LogProbs[0] != 5e-324 ||
		!math.IsNaN(r.LogProbs[1]) || r.LogProbs[2] != 1e308 {
		t.Errorf("floats: %v %v %v", r.Reward, r.Advantage, r.LogProbs)
	}
	if string(r.Images[0].Bytes) != "\x01\x02" || r.Images[1].Bytes != nil || r.Images[0].Path != "" || r.Images[1].Path != "images/cd.png" || *r.Action.X != 0.5 || r.Action.Y != nil {
		t.Errorf("images %+v action %+v", r.Images, r.Action)
	}

	for name, raw := range map[string]map[string]json.RawMessage{
		"missing column":  rawRow(t, nil, "label"),
		"unknown column":  rawRow(t, map[string]string{"extra": "1"}),
		"null string":     rawRow(t, map[string]string{"run": "null"}),
		"string for int":  rawRow(t, map[string]string{"step": `"1"`}),
		"int32 overflow":  rawRow(t, map[string]string{"step": "2147483648"}),
		"fraction int":    rawRow(t, map[string]string{"step": "1.5"}),
		"bad float":       rawRow(t, map[string]string{"reward": `"inf"`}),
		"bad base64":      rawRow(t, map[string]string{"images": `[{"sha256":"","width":0,"height":0,"bytes":"!!"}]`}),
		"struct fields":   rawRow(t, map[string]string{"action": `{"type":"click"}`}),
		"null list":       rawRow(t, map[string]string{"images": "null"}),
		"null in logprob": rawRow(t, map[string]string{"logprobs": "[null]"}),
	} {
		f := File{Path: "x", Rows: []map[string]json.RawMessage{raw}}
		if _, err := f.Decode(); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}
