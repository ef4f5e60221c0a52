package scienceboard

import (
	"encoding/json"
	"math"
	"testing"
)

func TestPyFloatRepr(t *testing.T) {
	for f, want := range map[float64]string{
		1: "1.0", 1.45: "1.45", 0.01: "0.01", 1e-5: "1e-05", 1e16: "1e+16",
		123456789012345.6: "123456789012345.6", -0.0001: "-0.0001", 2.5e-7: "2.5e-07",
		1234567.5: "1234567.5", 1e22: "1e+22", 1.5e300: "1.5e+300", math.Copysign(0, -1): "-0.0",
		math.Inf(1): "Infinity", math.Inf(-1): "-Infinity",
	} {
		if got := PyFloatRepr(f); got != want {
			t.Errorf("PyFloatRepr(%v) = %s, want %s", f, got, want)
		}
	}
	if got := PyFloatRepr(math.NaN()); got != "NaN" {
		t.Errorf("PyFloatRepr(NaN) = %s", got)
	}
}

func TestTruthy(t *testing.T) {
	for _, c := range []struct {
		v    any
		want bool
	}{
		{nil, false}, {false, false}, {true, true}, {"", false}, {"0", true},
		{[]any{}, false}, {[]any{nil}, true}, {map[string]any{}, false}, {map[string]any{"a": nil}, true},
		{json.Number("0"), false}, {json.Number("0.0"), false}, {json.Number("-2"), true}, {json.Number("1e999x"), true},
		{0.0, false}, {math.NaN(), true}, {0, false}, {int64(3), true},
	} {
		if got := Truthy(c.v); got != c.want {
			t.Errorf("Truthy(%#v) = %v, want %v", c.v, got, c.want)
		}
	}
}
