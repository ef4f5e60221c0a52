package expr

import "testing"

// TestFormat: printing keeps the parentheses precedence needs, and only
// those.
func TestFormat(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"a-(b-c)", "a-(b-c)"}, {"(a-b)-c", "a-b-c"}, {"a/(b*c)", "a/(b*c)"}, {"(a+b)*c", "(a+b)*c"},
		{"-(a+b)", "-(a+b)"}, {"(a^b)^c", "(a^b)^c"}, {"a^b^c", "a^b^c"}, {"(-a)^2", "(-a)^2"},
		{"x->2*x+1", "x->2*x+1"}, {"sum(1/n : n=1..20)", "sum(1/n : n=1..20)"}, {"x^2+y^2=9", "x^2+y^2=9"},
	} {
		t.Run(c.in, func(t *testing.T) {
			n, err := Parse(c.in, KAlgebra)
			if err != nil {
				t.Fatal(err)
			}
			if got := Format(n); got != c.want {
				t.Errorf("Format(%q) = %q, want %q", c.in, got, c.want)
			}
		})
	}
}

// TestMapcalc: the r.mapcalc dialect works in degrees, log is natural,
// == compares and if() chooses.
func TestMapcalc(t *testing.T) {
	env := NewEnv(Mapcalc)
	for _, c := range []struct {
		in   string
		want float64
	}{
		{"sin(90)", 1}, {"log(exp(2))", 2}, {"if(3 == 3, 7, 8)", 7}, {"if(a > 1, 1, 0)", 1}, {"a * 2 + 1", 5},
	} {
		t.Run(c.in, func(t *testing.T) {
			n, err := Parse(c.in, Mapcalc)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := env.Num(n, map[string]Value{"a": Number(2)}); err != nil || got != c.want {
				t.Errorf("%s = %v, %v; want %v", c.in, got, err, c.want)
			}
		})
	}
}
