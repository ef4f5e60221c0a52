// Command testreport reads `go test -json` on stdin and prints a compact
// report: each package's result, every skipped or failed test with its
// output, the tests that ran against a real external server (MinIO, S3,
// NATS; by name), the ten slowest top-level tests, and a closing
// "N passed, N failed, N skipped" line. It exits 1 when anything failed or
// the stream holds no test at all.
//
// Usage: go test -json ./... | go run ./tools/testreport
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"
)

type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

// external matches the tests that exercise a real MinIO server: the
// top-level TestS3* tests and the "minio" backends of the conformance suites.
var external = regexp.MustCompile(`^TestS3[A-Z]\w*$|^Test\w+/minio(-tls)?$`)

func main() {
	os.Exit(run(os.Stdin, os.Stdout))
}

func run(in io.Reader, out io.Writer) int {
	var passed, failed, skipped int
	outputs := map[string][]string{} // package/test → output lines
	var externalRan []string
	var pkgFail bool
	var timed []timing // top-level tests that passed or failed
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var e event
		if err := json.Unmarshal(line, &e); err != nil {
			// Not JSON: build errors and the like come through as text.
			fmt.Fprintln(out, string(line))
			continue
		}
		key := e.Package + " " + e.Test
		switch e.Action {
		case "build-output":
			// Go 1.24 and later: the compiler's messages, as events.
			fmt.Fprint(out, e.Output)
		case "output":
			if e.Test == "" {
				// Package-level output: keep result lines and panics.
				if strings.HasPrefix(e.Output, "FAIL") || strings.HasPrefix(e.Output, "panic") || strings.Contains(e.Output, "[build failed]") || strings.Contains(e.Output, "[setup failed]") {
					fmt.Fprint(out, e.Output)
				}
				continue
			}
			outputs[key] = append(outputs[key], e.Output)
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(out, "ok   %s %.1fs\n", e.Package, e.Elapsed)
				continue
			}
			passed++
			if !strings.Contains(e.Test, "/") {
				timed = append(timed, timing{short(e.Package) + " " + e.Test, e.Elapsed})
			}
			if external.MatchString(e.Test) {
				externalRan = append(externalRan, fmt.Sprintf("%s %s (%.1fs)", short(e.Package), e.Test, e.Elapsed))
			}
			delete(outputs, key)
		case "skip":
			if e.Test == "" {
				fmt.Fprintf(out, "?    %s [no tests]\n", e.Package)
				continue
			}
			skipped++
			fmt.Fprintf(out, "SKIP %s %s: %s\n", short(e.Package), e.Test, skipReason(outputs[key]))
			delete(outputs, key)
		case "fail":
			if e.Test == "" {
				pkgFail = true
				fmt.Fprintf(out, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
				continue
			}
			failed++
			if !strings.Contains(e.Test, "/") {
				timed = append(timed, timing{short(e.Package) + " " + e.Test, e.Elapsed})
			}
			fmt.Fprintf(out, "--- FAIL %s %s\n", short(e.Package), e.Test)
			for _, l := range outputs[key] {
				if !strings.HasPrefix(l, "=== ") {
					fmt.Fprint(out, "    ", l)
				}
			}
			delete(outputs, key)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintln(out, "testreport:", err)
		return 1
	}
	sort.Strings(externalRan)
	if len(externalRan) > 0 {
		fmt.Fprintf(out, "\nTests against a real MinIO/S3 server that ran and passed (%d):\n", len(externalRan))
		for _, s := range externalRan {
			fmt.Fprintln(out, "  ", s)
		}
	}
	if len(timed) > 0 {
		sort.SliceStable(timed, func(i, j int) bool { return timed[i].seconds > timed[j].seconds })
		timed = timed[:min(10, len(timed))]
		fmt.Fprintf(out, "\nSlowest tests (%d):\n", len(timed))
		for _, tm := range timed {
			fmt.Fprintf(out, "  %7.1fs %s\n", tm.seconds, tm.name)
		}
	}
	fmt.Fprintf(out, "\n%d passed, %d failed, %d skipped\n", passed, failed, skipped)
	if failed > 0 || pkgFail || passed == 0 {
		return 1
	}
	return 0
}

// timing is a top-level test's wall time.
type timing struct {
	name    string
	seconds float64
}

func short(pkg string) string { return strings.TrimPrefix(pkg, "github.com/codapipe/codapipe/") }

// skipReason is the last non-framework line of a skipped test's output.
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l != "" && !strings.HasPrefix(l, "---") && !strings.HasPrefix(l, "===") {
			return l
		}
	}
	return "(no reason given)"
}
