package main

import (
	"bytes"
	"strings"
	"testing"
)

func runReport(t *testing.T, in string) (figures, stderr string, code int) {
	t.Helper()
	var out, errw bytes.Buffer
	code = run(strings.NewReader(in), &out, &errw)
	return out.String(), errw.String(), code
}

// wantFigures runs the report on in, which must succeed and print the
// figures want; it returns what it printed on stdout and stderr.
func wantFigures(t *testing.T, in, want string) (got, stderr string) {
	t.Helper()
	got, stderr, code := runReport(t, in)
	if code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", code, stderr)
	}
	if got != want {
		t.Errorf("figures:\n%s\nwant:\n%s", got, want)
	}
	return got, stderr
}

const textRun = `goos: linux
goarch: amd64
pkg: github.com/codapipe/codapipe/pkg/uitars
cpu: AMD EPYC
BenchmarkParse-2    	     100	      3171 ns/op	  62.13 MB/s	     984 B/op	      17 allocs/op
BenchmarkRender-2   	     100	      1587 ns/op	     618 B/op	      20 allocs/op
PASS
ok  	github.com/codapipe/codapipe/pkg/uitars	0.026s
?   	github.com/codapipe/codapipe/cmd/judge	[no test files]
goos: linux
goarch: amd64
pkg: github.com/codapipe/codapipe/internal/infra/bus
cpu: AMD EPYC
BenchmarkPublish/body=1KiB-2         	    2000	    512000 ns/op	   2.00 MB/s	      1953 msgs/s
BenchmarkPublish/body=16KiB-2        	    1000	   1024000 ns/op	  16.00 MB/s	       976.5 msgs/s
PASS
ok  	github.com/codapipe/codapipe/internal/infra/bus	5.1s
goos: linux
goarch: amd64
pkg: github.com/codapipe/codapipe/internal/stage/agent
cpu: AMD EPYC
BenchmarkStepLatency-2   	time=2026-11-21T11:40:30Z level=INFO msg="a log line the benchmark wrote"
another log line
       1	21000000000 ns/op	       231.5 agent.step_latency_ms_g0	       1.070 agent.step_latency_ratio_g8	       247.7 agent.step_latency_ms_g8
PASS
ok  	github.com/codapipe/codapipe/internal/stage/agent	25.3s
goos: linux
goarch: amd64
pkg: github.com/codapipe/codapipe/internal/stage/rollout
cpu: AMD EPYC
BenchmarkScheduler-2   	       1	70000000000 ns/op	         1.08 sched.makespan_vs_bound	         1.45 sched.speedup_vs_static	        12.00 sched.dynamic_env_retries
PASS
ok  	github.com/codapipe/codapipe/internal/stage/rollout	72.0s
`

func TestText(t *testing.T) {
	got, stderr := wantFigures(t, textRun, `uitars.BenchmarkParse.ns_per_op 3171
uitars.BenchmarkParse.MB_per_s 62.13
uitars.BenchmarkParse.B_per_op 984
uitars.BenchmarkParse.allocs_per_op 17
uitars.BenchmarkRender.ns_per_op 1587
uitars.BenchmarkRender.B_per_op 618
uitars.BenchmarkRender.allocs_per_op 20
bus.BenchmarkPublish/body=1KiB.ns_per_op 512000
bus.BenchmarkPublish/body=1KiB.MB_per_s 2.00
bus.BenchmarkPublish/body=1KiB.msgs_per_s 1953
bus.BenchmarkPublish/body=16KiB.ns_per_op 1024000
bus.BenchmarkPublish/body=16KiB.MB_per_s 16.00
bus.BenchmarkPublish/body=16KiB.msgs_per_s 976.5
agent.BenchmarkStepLatency.ns_per_op 21000000000
agent.step_latency_ms_g0 231.5
agent.step_latency_ratio_g8 1.070
agent.step_latency_ms_g8 247.7
rollout.BenchmarkScheduler.ns_per_op 70000000000
sched.makespan_vs_bound 1.08
sched.speedup_vs_static 1.45
sched.dynamic_env_retries 12.00
`)
	for _, l := range strings.Split(strings.TrimSpace(got), "\n") {
		if len(strings.Fields(l)) != 2 {
			t.Errorf("line %q is not `name value`", l)
		}
	}
	if stderr != "" {
		t.Errorf("stderr: %s", stderr)
	}
}

func TestJSON(t *testing.T) {
	in := `{"Action":"start","Package":"github.com/codapipe/codapipe/pkg/uitars"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Output":"pkg: github.com/codapipe/codapipe/pkg/uitars\n"}
{"Action":"run","Package":"github.com/codapipe/codapipe/pkg/uitars","Test":"BenchmarkParse"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Test":"BenchmarkParse","Output":"=== RUN   BenchmarkParse\n"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Test":"BenchmarkParse","Output":"BenchmarkParse\n"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Test":"BenchmarkParse","Output":"BenchmarkParse-2    \t     100\t      1939 ns/op\t 101.58 MB/s\n"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Test":"BenchmarkRender","Output":"BenchmarkRender\n"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Test":"BenchmarkRender","Output":"BenchmarkRender-2   \t"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Test":"BenchmarkRender","Output":"     100\t      2999 ns/op\t     618 B/op\n"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Output":"PASS\n"}
{"Action":"output","Package":"github.com/codapipe/codapipe/pkg/uitars","Output":"ok  \tgithub.com/codapipe/codapipe/pkg/uitars\t0.019s\n"}
{"Action":"pass","Package":"github.com/codapipe/codapipe/pkg/uitars","Elapsed":0.02}
{"Action":"output","Package":"github.com/codapipe/codapipe/internal/stage/agent","Test":"BenchmarkStepLatency","Output":"BenchmarkStepLatency-2   \t"}
{"Action":"output","Package":"github.com/codapipe/codapipe/internal/stage/agent","Test":"BenchmarkStepLatency","Output":"a log line\n"}
{"Action":"output","Package":"github.com/codapipe/codapipe/internal/stage/agent","Test":"BenchmarkStepLatency","Output":"       1\t21000000000 ns/op\t 1.07 agent.step_latency_ratio_g8"}
{"Action":"pass","Package":"github.com/codapipe/codapipe/internal/stage/agent","Elapsed":21}
`
	wantFigures(t, in, `uitars.BenchmarkParse.ns_per_op 1939
uitars.BenchmarkParse.MB_per_s 101.58
uitars.BenchmarkRender.ns_per_op 2999
uitars.BenchmarkRender.B_per_op 618
agent.BenchmarkStepLatency.ns_per_op 21000000000
agent.step_latency_ratio_g8 1.07
`)
}

func TestCountIsAveraged(t *testing.T) {
	in := `pkg: example.com/m/pkg/grpo
BenchmarkReward/click-2   	1000	 8.0 ns/op	 1.5 grpo.x
BenchmarkReward/click-2   	1000	 10.0 ns/op	 2.0 grpo.x
BenchmarkReward/click-2   	1000	 9.5 ns/op	 2.5 grpo.x
ok  	example.com/m/pkg/grpo	3s
`
	wantFigures(t, in, "grpo.BenchmarkReward/click.ns_per_op 9.16667\ngrpo.x 2\n")
}

func TestFailures(t *testing.T) {
	for name, in := range map[string]string{
		"text fail": `pkg: example.com/m/a
BenchmarkA-2   	100	 5 ns/op
--- FAIL: BenchmarkB
    b_test.go:10: boom
FAIL
FAIL	example.com/m/a	1.2s
`,
		"build": `# example.com/m/b
b/b.go:3:1: syntax error
FAIL	example.com/m/b [build failed]
pkg: example.com/m/a
BenchmarkA-2   	100	 5 ns/op
ok  	example.com/m/a	1s
`,
		"panic": `pkg: example.com/m/a
BenchmarkA-2   	panic: test timed out after 10m0s
ok  	example.com/m/b	1s
`,
		"json fail": `{"Action":"output","Package":"example.com/m/a","Output":"BenchmarkA-2 \t 100\t 5 ns/op\n"}
{"Action":"fail","Package":"example.com/m/a","Test":"BenchmarkB"}
{"Action":"fail","Package":"example.com/m/a","Elapsed":1}
`,
		"json build fail": `{"ImportPath":"example.com/m/b","Action":"build-output","Output":"b.go:1: nope\n"}
{"ImportPath":"example.com/m/b","Action":"build-fail"}
{"Action":"fail","Package":"example.com/m/b","Elapsed":0}
`,
		"empty": "",
		"noise": "make: something\n",
	} {
		t.Run(name, func(t *testing.T) {
			_, stderr, code := runReport(t, in)
			if code != 1 {
				t.Errorf("exit %d, want 1; stderr:\n%s", code, stderr)
			}
			if !strings.Contains(stderr, "benchreport:") {
				t.Errorf("stderr says nothing: %q", stderr)
			}
			if name == "panic" && !strings.Contains(stderr, "failed: panic: test timed out") {
				t.Errorf("the panic is not reported: %q", stderr)
			}
		})
	}
}

func TestKeepsFiguresOfAFailedRun(t *testing.T) {
	got, stderr, code := runReport(t, "pkg: example.com/m/a\nBenchmarkA-2 \t 100\t 5 ns/op\n--- FAIL: BenchmarkB\nFAIL\n")
	if code != 1 || got != "a.BenchmarkA.ns_per_op 5\n" {
		t.Errorf("exit %d, figures %q", code, got)
	}
	if !strings.Contains(stderr, "--- FAIL: BenchmarkB") {
		t.Errorf("stderr lacks the failure: %q", stderr)
	}
}

func TestSameFigureFromTwoBenchmarks(t *testing.T) {
	in := "pkg: example.com/m/sched\nBenchmarkA-2 \t 1\t 5 ns/op\t 1.1 sched.ratio\nBenchmarkB-2 \t 1\t 6 ns/op\t 1.2 sched.ratio\nok  \texample.com/m/sched\t1s\n"
	wantFigures(t, in, "sched.BenchmarkA.ns_per_op 5\nsched.ratio 1.1\nsched.BenchmarkB.ns_per_op 6\nsched.BenchmarkB.sched.ratio 1.2\n")
}
