package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

func newFlags(env map[string]string) *Flags {
	f := NewFlags("t")
	f.lookup = func(k string) (string, bool) { v, ok := env[k]; return v, ok }
	f.SetOutput(io.Discard)
	return f
}

func TestFlagEnvFallback(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		wantURL string
		wantDr  bool
		wantTO  time.Duration
		wantFmt string
	}{
		{"defaults", nil, nil, "", false, 10 * time.Second, "auto"},
		{"env", map[string]string{"NATS_URL": "nats://a:4222", "CODAPIPE_DRAIN": "true", "CODAPIPE_NATS_TIMEOUT": "3s", "CODAPIPE_LOG_FORMAT": "json"}, nil, "nats://a:4222", true, 3 * time.Second, "json"},
		{"flag wins", map[string]string{"NATS_URL": "nats://a:4222", "CODAPIPE_LOG_FORMAT": "json"}, []string{"--nats", "nats://b:4222", "--log-format", "text"}, "nats://b:4222", false, 10 * time.Second, "text"},
		{"empty env ignored", map[string]string{"NATS_URL": "", "CODAPIPE_LOG_FORMAT": ""}, nil, "", false, 10 * time.Second, "auto"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlags(tc.env)
			c := RegisterCommon(f, true)
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if c.NATS.URL != tc.wantURL || c.Drain != tc.wantDr || c.NATS.Timeout != tc.wantTO || c.LogFormat != tc.wantFmt {
				t.Fatalf("got url=%q drain=%v timeout=%v log format=%q", c.NATS.URL, c.Drain, c.NATS.Timeout, c.LogFormat)
			}
		})
	}
}

func TestBadEnvValuesAreReported(t *testing.T) {
	f := newFlags(map[string]string{"CODAPIPE_DRAIN": "yes please", "CODAPIPE_NATS_TIMEOUT": "soon"})
	RegisterCommon(f, true)
	var n int
	f.Int(&n, "n", "CODAPIPE_N", 1, "a number")
	err := f.Parse(nil)
	if err == nil {
		t.Fatal("bad environment values accepted")
	}
	for _, want := range []string{`CODAPIPE_DRAIN="yes please": want true or false`, `CODAPIPE_NATS_TIMEOUT="soon": want a duration`} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if err := newFlags(nil).Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Errorf("-h: want flag.ErrHelp, got %v", err)
	}
}

func TestHelpNamesEnvironmentVariables(t *testing.T) {
	f := newFlags(nil)
	RegisterCommon(f, true)
	u := f.Usage()
	for _, env := range []string{"NATS_URL", "CODAPIPE_DATA", "CODAPIPE_STORE", "CODAPIPE_LOG_LEVEL", "CODAPIPE_LOG_FORMAT", "CODAPIPE_METRICS_ADDR", "NATS_CREDS"} {
		if !strings.Contains(u, "[env "+env+"]") {
			t.Errorf("help does not name %s:\n%s", env, u)
		}
	}
}

func TestCommonDerived(t *testing.T) {
	c := &Common{DataDir: "/d", NATS: bus.Config{URL: "nats://x"}}
	if c.StoreURL() != "/d/blobs" {
		t.Errorf("StoreURL = %q", c.StoreURL())
	}
	c.Store = "s3://b/p"
	if c.StoreURL() != "s3://b/p" {
		t.Errorf("StoreURL = %q", c.StoreURL())
	}
	if bc := c.BusConfig(); bc.DataDir != "/d" || bc.URL != "nats://x" {
		t.Errorf("BusConfig = %+v", bc)
	}
}

func TestLoggerJSONWhenNotATerminal(t *testing.T) {
	var b bytes.Buffer
	l, err := NewLogger(&b, LogConfig{Level: "debug"})
	if err != nil {
		t.Fatal(err)
	}
	l.Debug("hello", "trajectory", "01X")
	var rec map[string]any
	if err := json.Unmarshal(b.Bytes(), &rec); err != nil {
		t.Fatalf("not a JSON line: %q", b.String())
	}
	if rec["msg"] != "hello" || rec["trajectory"] != "01X" {
		t.Fatalf("record %v", rec)
	}
	if _, err := NewLogger(&b, LogConfig{Level: "loud"}); err == nil || !strings.Contains(err.Error(), "want debug, info, warn or error") {
		t.Fatalf("bad level: %v", err)
	}
	b.Reset()
	l, _ = NewLogger(&b, LogConfig{Level: "warn"})
	l.Info("quiet")
	if b.Len() != 0 {
		t.Fatalf("info logged at warn level: %q", b.String())
	}
}

func TestServeMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	reg := NewRegistry()
	bus.NewMetrics(reg)
	addr, done, err := ServeMetrics(ctx, "127.0.0.1:0", reg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, m := range []string{"codapipe_bus_publish_errors_total", "go_goroutines"} {
		if !strings.Contains(string(body), m) {
			t.Errorf("metrics lack %s", m)
		}
	}
	cancel()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("metrics server did not stop")
	}
	if _, _, err := ServeMetrics(context.Background(), "256.0.0.1:1", reg, nil, nil); err == nil {
		t.Fatal("bad address accepted")
	}
}

// TestFlagsGiven: a flag is given when set on the command line or by its
// variable (a valid, non-empty value), not when left at its default.
func TestFlagsGiven(t *testing.T) {
	for _, tc := range []struct {
		name string
		env  map[string]string
		args []string
		want map[string]bool
	}{
		{"defaults", nil, nil, map[string]bool{"a": false, "b": false, "c": false, "d": false}},
		{"env", map[string]string{"A": "x", "B": "3", "C": "0.5", "D": "p,q"}, nil, map[string]bool{"a": true, "b": true, "c": true, "d": true}},
		{"invalid or empty env", map[string]string{"B": "three", "A": ""}, nil, map[string]bool{"a": false, "b": false}},
		{"flags", nil, []string{"--b", "2", "--d", "p"}, map[string]bool{"a": false, "b": true, "c": false, "d": true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlags(tc.env)
			var a string
			var b int
			var c float64
			var d []string
			f.String(&a, "a", "A", "", "")
			f.Int(&b, "b", "B", 1, "")
			f.Float64(&c, "c", "C", 1, "")
			f.Strings(&d, "d", "D", "")
			_ = f.Parse(tc.args) // an invalid variable is an error here; Given still answers
			for name, want := range tc.want {
				if got := f.Given(name); got != want {
					t.Errorf("Given(%q) = %v, want %v", name, got, want)
				}
			}
		})
	}
}

// TestListFlag: a List flag splits every value on commas, trims spaces
// and drops empty names, on the command line and in its variable; it
// may be repeated, and the command line replaces the variable. Strings
// keeps each command-line value whole, commas included.
func TestListFlag(t *testing.T) {
	for _, tc := range []struct {
		name    string
		env     map[string]string
		args    []string
		list    []string
		strings []string
	}{
		{"none", nil, nil, nil, nil},
		{"one", nil, []string{"--runs", "a"}, []string{"a"}, nil},
		{"cli", nil, []string{"--runs", "a,b,c", "--stop", "x,y"}, []string{"a", "b", "c"}, []string{"x,y"}},
		{"env", map[string]string{"RUNS": "a,b", "STOP": "x,y"}, nil, []string{"a", "b"}, []string{"x", "y"}},
		{"repeated", nil, []string{"--runs", "a,b", "--runs", "c", "--stop", "x", "--stop", "y,z"}, []string{"a", "b", "c"}, []string{"x", "y,z"}},
		{"spaces", map[string]string{"RUNS": " a , b "}, nil, []string{"a", "b"}, nil},
		{"spaces cli", nil, []string{"--runs", " a ,\tb"}, []string{"a", "b"}, nil},
		{"empties", nil, []string{"--runs", ",a,,b,", "--runs", ""}, []string{"a", "b"}, nil},
		{"only commas", map[string]string{"RUNS": ",,"}, nil, nil, nil},
		{"cli replaces env", map[string]string{"RUNS": "a,b"}, []string{"--runs", "c"}, []string{"c"}, nil},
		{"long names", nil, []string{"--runs", "chaos-kalgebra-2725-" + strings.Repeat("x", 40) + "," + "chaos-chimerax-2725-" + strings.Repeat("y", 40)},
			[]string{"chaos-kalgebra-2725-" + strings.Repeat("x", 40), "chaos-chimerax-2725-" + strings.Repeat("y", 40)}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFlags(tc.env)
			var list, strs []string
			f.List(&list, "runs", "RUNS", "runs")
			f.Strings(&strs, "stop", "STOP", "stop strings")
			if err := f.Parse(tc.args); err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(list, tc.list) {
				t.Errorf("List: %q, want %q", list, tc.list)
			}
			if !slices.Equal(strs, tc.strings) {
				t.Errorf("Strings: %q, want %q", strs, tc.strings)
			}
		})
	}
	f := newFlags(nil)
	var list []string
	f.List(&list, "runs", "RUNS", "runs")
	if u := f.Usage(); !strings.Contains(u, "(comma-separated, repeatable)") {
		t.Errorf("help of a List flag does not say it is comma-separated:\n%s", u)
	}
}

// TestNameList: the canonical form of a list of names is split, sorted
// and without repeats.
func TestNameList(t *testing.T) {
	for _, tc := range []struct {
		in, want []string
	}{
		{nil, nil},
		{[]string{""}, nil},
		{[]string{"b,a", " a ", "c"}, []string{"a", "b", "c"}},
	} {
		if got := NameList(tc.in); !slices.Equal(got, tc.want) {
			t.Errorf("NameList(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
