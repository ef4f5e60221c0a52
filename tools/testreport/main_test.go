package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestReport(t *testing.T) {
	cases := []struct {
		name, in string
		code     int
		want     []string
		not      []string
	}{
		{
			name: "pass with minio and a skip",
			in: `{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"noise\n"}
{"Action":"pass","Package":"p","Test":"TestA","Elapsed":0.1}
{"Action":"pass","Package":"p","Test":"TestConformance/minio","Elapsed":2}
{"Action":"pass","Package":"p","Test":"TestConformance","Elapsed":2}
{"Action":"pass","Package":"p","Test":"TestConformance/minio/case","Elapsed":1}
{"Action":"pass","Package":"p","Test":"TestResolveS3/awsBeforeMinio","Elapsed":0}
{"Action":"pass","Package":"p","Test":"TestS3Checksums","Elapsed":1}
{"Action":"output","Package":"p","Test":"TestB","Output":"    x_test.go:3: MinIO not installed\n"}
{"Action":"skip","Package":"p","Test":"TestB"}
{"Action":"pass","Package":"p","Elapsed":3}`,
			code: 0,
			want: []string{"ok   p 3.0s", "SKIP p TestB: x_test.go:3: MinIO not installed", "TestConformance/minio (2.0s)", "TestS3Checksums (1.0s)", "(2):",
				"Slowest tests (3):\n      2.0s p TestConformance\n      1.0s p TestS3Checksums\n      0.1s p TestA\n", "6 passed, 0 failed, 1 skipped"},
			not: []string{"noise", "minio/case", "awsBeforeMinio"},
		},
		{
			name: "failure shows its output",
			in: `{"Action":"output","Package":"p","Test":"TestC","Output":"    c_test.go:9: got 1, want 2\n"}
{"Action":"fail","Package":"p","Test":"TestC"}
{"Action":"fail","Package":"p","Elapsed":1}`,
			code: 1,
			want: []string{"--- FAIL p TestC", "got 1, want 2", "0 passed, 1 failed, 0 skipped"},
		},
		{
			name: "build error text passes through",
			in:   "# p\nx.go:1: syntax error\n" + `{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}` + "\n" + `{"Action":"fail","Package":"p"}`,
			code: 1,
			want: []string{"x.go:1: syntax error", "[build failed]"},
		},
		{
			name: "build error events are printed",
			in: `{"ImportPath":"p [p.test]","Action":"build-output","Output":"# p\n"}
{"ImportPath":"p [p.test]","Action":"build-output","Output":"./x.go:1:2: undefined: y\n"}
{"ImportPath":"p [p.test]","Action":"build-fail"}
{"Action":"output","Package":"p","Output":"FAIL\tp [build failed]\n"}
{"Action":"fail","Package":"p","FailedBuild":"p [p.test]"}`,
			code: 1,
			want: []string{"./x.go:1:2: undefined: y", "[build failed]", "FAIL p"},
		},
		{name: "no tests", in: "", code: 1, want: []string{"0 passed, 0 failed, 0 skipped"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			code := run(strings.NewReader(tc.in), &out)
			if code != tc.code {
				t.Errorf("exit %d, want %d", code, tc.code)
			}
			for _, w := range tc.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("output lacks %q:\n%s", w, out.String())
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out.String(), n) {
					t.Errorf("output has %q:\n%s", n, out.String())
				}
			}
		})
	}
}
