package desktop

import (
	"encoding/json"
	"reflect"
	"testing"
)

func TestRangeJSON(t *testing.T) {
	for _, c := range []struct {
		body string
		want []any
		bad  bool
	}{
		{body: `[1, "a"]`, want: []any{json.Number("1"), "a"}},
		{body: `{"b": 2, "a": [1]}`, want: []any{[]any{json.Number("1")}, json.Number("2")}},
		{body: `null`},
		{body: ` "x" `, want: []any{"x"}},
		{body: `[1] [2]`, bad: true},
		{body: `[1`, bad: true},
	} {
		got, err := RangeJSON([]byte(c.body), true)
		if (err != nil) != c.bad || !reflect.DeepEqual(got, c.want) {
			t.Errorf("RangeJSON(%s) = %#v, %v", c.body, got, err)
		}
	}
	if got, err := RangeJSON([]byte(`[1.5]`), false); err != nil || !reflect.DeepEqual(got, []any{1.5}) {
		t.Errorf("RangeJSON float64: %#v, %v", got, err)
	}
	if _, err := RangeJSON([]byte(`[1e400]`), false); err == nil {
		t.Errorf("RangeJSON float64 accepts 1e400")
	}
}
