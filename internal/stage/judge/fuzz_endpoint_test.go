package judge

import (
	"math"
	"net/url"
	"strings"
	"testing"
)

// FuzzParseEndpoint feeds arbitrary --judge values to ParseEndpoint: an
// error names the flag; an accepted spec is an http(s) URL with a host
// and a model with no "=", and URL=MODEL parses back to the same spec.
func FuzzParseEndpoint(f *testing.F) {
	for _, v := range []string{
		"http://judge-a:8000/v1=Qwen2.5-VL-72B-Instruct", "https://j.example/v1?k=v=m", " http://h/ = m ",
		"http://user:pa=ss@h:1/v1=m", "ftp://h=m", "=m", "http://h=", "http:///v1=m", "h:1=m",
	} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		spec, err := ParseEndpoint(v)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "--judge") {
				t.Fatalf("error does not name the flag: %v", err)
			}
			return
		}
		u, perr := url.Parse(spec.URL)
		if perr != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			t.Fatalf("%q: accepted URL %q (%v)", v, spec.URL, perr)
		}
		if spec.Model == "" || strings.Contains(spec.Model, "=") || strings.TrimSpace(spec.Model) != spec.Model {
			t.Fatalf("%q: accepted model %q", v, spec.Model)
		}
		again, err := ParseEndpoint(spec.URL + "=" + spec.Model)
		if err != nil || again != spec {
			t.Fatalf("%q: %+v does not parse back: %+v, %v", v, spec, again, err)
		}
	})
}

// FuzzParseFloats feeds arbitrary lists to ParseFloats (--temperatures,
// --top-ps): an accepted list has one finite number per comma-separated
// item, and formatting it (floats) parses back to the same numbers.
func FuzzParseFloats(f *testing.F) {
	for _, v := range []string{"1,0.7,0.7,0.7", " 0.6 ", "1e400", "NaN", "inf", "0x1p-2", "1,,2", "", "-0"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		xs, err := ParseFloats(v)
		if err != nil {
			return
		}
		if len(xs) != strings.Count(v, ",")+1 {
			t.Fatalf("%q: %d numbers", v, len(xs))
		}
		for _, x := range xs {
			if math.IsNaN(x) || math.IsInf(x, 0) {
				t.Fatalf("%q: accepted %v", v, x)
			}
		}
		again, err := ParseFloats(floats(xs))
		if err != nil || len(again) != len(xs) {
			t.Fatalf("%q: %v formats as %q, which parses as %v, %v", v, xs, floats(xs), again, err)
		}
		for i := range xs {
			if again[i] != xs[i] {
				t.Fatalf("%q: %v formats as %q, which parses as %v", v, xs, floats(xs), again)
			}
		}
	})
}
