// Command benchreport turns the output of `go test -bench` (plain text or
// `go test -json`), read on stdin, into figures: one per line, `name value`.
//
//   - A custom metric whose name is already a dotted figure name
//     (b.ReportMetric(v, "sched.makespan_vs_bound")) becomes
//     `<short pkg>.<metric>`, or just `<metric>` when it already starts
//     with the short package name ("agent.step_latency_ratio_g8" reported
//     in internal/stage/agent stays as it is).
//   - Every other metric — the standard ns/op, MB/s, B/op, allocs/op and
//     custom units such as msgs/s — becomes
//     `<short pkg>.<BenchmarkName>.<unit>` with "/" in the unit spelled
//     "_per_" (ns_per_op, MB_per_s, allocs_per_op, msgs_per_s) and the
//     GOMAXPROCS suffix ("-2") dropped from the benchmark name.
//
// The short package name is the last element of the import path. A figure
// that appears more than once (go test -count N) is printed once, as the
// mean of its values. Everything that is not a benchmark result (headers,
// logs, PASS/ok lines) stays out of stdout.
//
// benchreport exits 1 when the go test run failed (a FAIL line, a panic, a
// build failure, a "fail" event in -json output) or when stdin holds no go
// test output; it then writes the run's other output to stderr so the
// failure can be read. Use it behind `set -o pipefail`:
//
//	set -o pipefail; go test -run '^$' -bench . ./... | benchreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
)

func main() {
	os.Exit(run(os.Stdin, os.Stdout, os.Stderr))
}

// run reads go test output from in, writes the figures to out and what
// went wrong to errw, and returns the exit status.
func run(in io.Reader, out, errw io.Writer) int {
	r := newReport()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), 16<<20)
	for sc.Scan() {
		r.input(sc.Text())
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(errw, "benchreport: reading stdin: %v\n", err)
		return 2
	}
	r.flush()
	bw := bufio.NewWriter(out)
	for _, f := range r.order {
		fmt.Fprintf(bw, "%s %s\n", f.name, f.value())
	}
	if err := bw.Flush(); err != nil {
		fmt.Fprintf(errw, "benchreport: %v\n", err)
		return 2
	}
	switch {
	case len(r.failures) > 0:
		for _, l := range r.raw {
			fmt.Fprintln(errw, l)
		}
		fmt.Fprintf(errw, "benchreport: the go test run failed: %s\n", strings.Join(r.failures, "; "))
		return 1
	case !r.sawGoTest:
		fmt.Fprintln(errw, "benchreport: no go test output on stdin")
		return 1
	case len(r.order) == 0:
		fmt.Fprintln(errw, "benchreport: warning: the go test run reported no benchmark results")
	}
	return 0
}

// figure is one named figure and the values seen for it.
type figure struct {
	name   string
	bench  string // the benchmark that reported it first
	texts  []string
	values []float64
}

// value is the figure as printed: the reported text when there is one
// value, else the mean.
func (f *figure) value() string {
	if len(f.texts) == 1 {
		return f.texts[0]
	}
	sum := 0.0
	for _, v := range f.values {
		sum += v
	}
	return formatFloat(sum / float64(len(f.values)))
}

func formatFloat(v float64) string {
	a := math.Abs(v)
	if a != 0 && (a >= 1e15 || a < 1e-6) {
		return strconv.FormatFloat(v, 'g', 6, 64)
	}
	// Six significant digits, without exponent or trailing zeros.
	p, _ := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 6, 64), 64)
	return strconv.FormatFloat(p, 'f', -1, 64)
}

// report accumulates the figures of one go test run.
type report struct {
	pkg       string            // current package (text output: the last "pkg:" line)
	pending   map[string]string // package → benchmark name whose result line has not come yet
	partial   map[string]string // -json: package → output not yet ended by a newline
	figures   map[string]*figure
	order     []*figure
	failures  []string
	raw       []string // everything that is not a result, for a failure report
	sawGoTest bool
}

func newReport() *report {
	return &report{pending: map[string]string{}, partial: map[string]string{}, figures: map[string]*figure{}}
}

// event is one line of go test -json (test2json) output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// input takes one line of stdin: a test2json event or a line of text.
func (r *report) input(line string) {
	if strings.HasPrefix(line, "{") {
		var ev event
		if err := json.Unmarshal([]byte(line), &ev); err == nil && ev.Action != "" {
			r.event(ev)
			return
		}
	}
	r.text(line, "")
}

// event handles one -json event: output is joined per package and cut
// into lines (a result line may come in two events), the rest tells
// whether the run failed.
func (r *report) event(ev event) {
	r.sawGoTest = true
	switch ev.Action {
	case "output", "build-output":
		buf := r.partial[ev.Package] + ev.Output
		for {
			i := strings.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			r.text(buf[:i], ev.Package)
			buf = buf[i+1:]
		}
		r.partial[ev.Package] = buf
	case "fail", "build-fail":
		if ev.Test == "" {
			r.endPackage(ev.Package)
		}
		what := ev.Package
		if ev.Test != "" {
			what += " " + ev.Test
		}
		if ev.Action == "build-fail" {
			what += " (build failed)"
		}
		r.fail(what)
	case "pass", "skip":
		if ev.Test == "" {
			r.endPackage(ev.Package)
		}
	}
}

func (r *report) endPackage(pkg string) {
	if rest := r.partial[pkg]; rest != "" {
		r.text(rest, pkg)
	}
	delete(r.partial, pkg)
	delete(r.pending, pkg)
}

// flush ends the input: output left without a final newline is read.
func (r *report) flush() {
	for pkg, rest := range r.partial {
		if rest != "" {
			r.text(rest, pkg)
		}
	}
	r.partial = map[string]string{}
}

func (r *report) fail(what string) {
	for _, f := range r.failures {
		if f == what {
			return
		}
	}
	r.failures = append(r.failures, what)
}

// text handles one line of go test output; pkg is the package when the
// -json event said it.
func (r *report) text(line, pkg string) {
	line = strings.TrimRight(line, "\r")
	trimmed := strings.TrimSpace(line)
	if p, ok := strings.CutPrefix(line, "pkg: "); ok {
		r.pkg = strings.TrimSpace(p)
		r.raw = append(r.raw, line)
		return
	}
	if pkg == "" {
		pkg = r.pkg
	}
	if r.result(line, pkg) {
		r.sawGoTest = true
		return
	}
	r.raw = append(r.raw, line)
	switch {
	case trimmed == "PASS" || strings.HasPrefix(line, "ok  \t") || strings.HasPrefix(line, "?   \t"):
		r.sawGoTest = true
	case trimmed == "FAIL":
		r.sawGoTest = true
		r.fail("FAIL")
	case strings.HasPrefix(line, "FAIL\t") || strings.HasPrefix(line, "FAIL "):
		r.sawGoTest = true
		r.fail(strings.Join(strings.Fields(line), " "))
	case strings.HasPrefix(trimmed, "--- FAIL"):
		r.fail(strings.TrimSpace(strings.TrimPrefix(trimmed, "---")))
	case strings.HasPrefix(afterName(trimmed), "panic: "):
		r.fail(afterName(trimmed))
	case strings.Contains(line, "[build failed]") || strings.Contains(line, "[setup failed]"):
		r.fail(strings.Join(strings.Fields(line), " "))
	}
}

// result reads a benchmark result line, "BenchmarkX-2  N  v unit  v unit
// ...", or the second half of one whose name came on an earlier line
// (test2json, or a benchmark that logged while it ran).
func (r *report) result(line, pkg string) bool {
	fields := strings.Fields(line)
	if len(fields) == 0 {
		return false
	}
	name := ""
	rest := fields
	if strings.HasPrefix(fields[0], "Benchmark") {
		name, rest = fields[0], fields[1:]
	}
	if len(rest) >= 3 && len(rest)%2 == 1 && isCount(rest[0]) {
		if name == "" {
			name = r.pending[pkg]
		}
		if name == "" {
			return false
		}
		metrics, ok := pairs(rest[1:])
		if !ok {
			return false
		}
		delete(r.pending, pkg)
		r.add(pkg, benchName(name), metrics)
		return true
	}
	if name != "" {
		// The name alone, or the name and something the benchmark wrote:
		// the numbers come on a later line.
		r.pending[pkg] = name
	}
	return false
}

// afterName is a line without the benchmark name it may start with (go
// test prints the name before the benchmark runs; a panic follows it).
func afterName(s string) string {
	if strings.HasPrefix(s, "Benchmark") {
		if i := strings.IndexAny(s, " \t"); i > 0 {
			return strings.TrimSpace(s[i:])
		}
	}
	return s
}

type metric struct {
	text  string
	value float64
	unit  string
}

// pairs reads "value unit value unit ...".
func pairs(f []string) ([]metric, bool) {
	out := make([]metric, 0, len(f)/2)
	for i := 0; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil || isNumber(f[i+1]) {
			return nil, false
		}
		out = append(out, metric{text: f[i], value: v, unit: f[i+1]})
	}
	return out, len(out) > 0
}

func isCount(s string) bool {
	n, err := strconv.ParseInt(s, 10, 64)
	return err == nil && n > 0
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
}

var procsSuffix = regexp.MustCompile(`-[0-9]+$`)

// benchName drops the GOMAXPROCS suffix go test appends ("BenchmarkX-2").
// With GOMAXPROCS=1 there is none; a name that itself ends in "-<digits>"
// then loses that part.
func benchName(s string) string { return procsSuffix.ReplaceAllString(s, "") }

var dotted = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z0-9_]+)+$`)

// add records the metrics of one result line.
func (r *report) add(pkg, bench string, metrics []metric) {
	short := path.Base(pkg)
	if pkg == "" || short == "." || short == "/" {
		short = "unknown"
	}
	for _, m := range metrics {
		var name string
		if dotted.MatchString(m.unit) {
			// A dotted metric is a figure name chosen by its benchmark
			// ("sched.makespan_vs_bound"): printed as it is.
			name = m.unit
			if f, ok := r.figures[name]; ok && f.bench != bench {
				// The same figure from another benchmark: keep both apart.
				name = short + "." + bench + "." + m.unit
			}
		} else {
			name = short + "." + bench + "." + unitName(m.unit)
		}
		f, ok := r.figures[name]
		if !ok {
			f = &figure{name: name, bench: bench}
			r.figures[name] = f
			r.order = append(r.order, f)
		}
		f.texts = append(f.texts, m.text)
		f.values = append(f.values, m.value)
	}
}

// unitName spells a unit for a figure name: "ns/op" → "ns_per_op".
func unitName(u string) string {
	u = strings.ReplaceAll(u, "/", "_per_")
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '.', c == '-':
			return c
		}
		return '_'
	}, u)
}
