package service

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"os"
	"regexp"
	"strings"
	"testing"
)

// isJSON reports whether out is the JSON record of Info("hello", "n", 1);
// humanHello matches its human line.
func isJSON(out string) bool {
	var rec map[string]any
	return json.Unmarshal([]byte(out), &rec) == nil && rec["msg"] == "hello" && rec["n"] == 1.0
}

var humanHello = regexp.MustCompile(`^\d\d:\d\d:\d\d t +hello  n=1\n$`)

// TestNewLoggerFormats: auto is JSON on anything but a terminal (a
// buffer, a pipe, a file), text is the human handler everywhere, json is
// JSON everywhere.
func TestNewLoggerFormats(t *testing.T) {
	writers := map[string]func(t *testing.T) (io.Writer, func() string){
		"buffer": func(t *testing.T) (io.Writer, func() string) {
			var b bytes.Buffer
			return &b, b.String
		},
		"pipe": func(t *testing.T) (io.Writer, func() string) {
			r, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { r.Close() })
			return w, func() string {
				w.Close()
				b, _ := io.ReadAll(r)
				return string(b)
			}
		},
		"file": func(t *testing.T) (io.Writer, func() string) {
			f, err := os.Create(t.TempDir() + "/log")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { f.Close() })
			return f, func() string {
				b, _ := os.ReadFile(f.Name())
				return string(b)
			}
		},
	}
	for wname, open := range writers {
		for _, format := range []string{"", "auto", "text", "TEXT", "json"} {
			t.Run(wname+"/"+format, func(t *testing.T) {
				w, read := open(t)
				l, err := NewLogger(w, LogConfig{Service: "t", Format: format})
				if err != nil {
					t.Fatal(err)
				}
				l.Info("hello", "n", 1)
				out := read()
				if strings.EqualFold(format, "text") {
					if !humanHello.MatchString(out) {
						t.Fatalf("not the human line: %q", out)
					}
				} else if !isJSON(out) {
					t.Fatalf("not a JSON record: %q", out)
				}
			})
		}
	}
	if _, err := NewLogger(io.Discard, LogConfig{Format: "xml"}); err == nil || !strings.Contains(err.Error(), `log format "xml": want auto, text or json`) {
		t.Fatalf("bad format: %v", err)
	}
}

// TestMainLogFormat: Main logs JSON to a stderr that is not a terminal,
// the human line with --log-format text or CODAPIPE_LOG_FORMAT=text, and
// exits 2 for an unknown format.
func TestMainLogFormat(t *testing.T) {
	cmd := Command{
		Name: "t sub", Common: true,
		Run: func(ctx context.Context, env *Env) error {
			env.Log.Info("hello", "n", 1)
			return nil
		},
	}
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := MainContext(context.Background(), cmd, append(args, "--data", t.TempDir()), &out, &errb)
		return code, errb.String()
	}
	if code, errs := run(); code != 0 || !isJSON(errs) {
		t.Errorf("default: exit %d, stderr %q; want a JSON record", code, errs)
	}
	if code, errs := run("--log-format", "text"); code != 0 || !humanHello.MatchString(errs) {
		t.Errorf("--log-format text: exit %d, stderr %q; want the human line", code, errs)
	}
	if code, errs := run("--log-format", "xml"); code != 2 || !strings.Contains(errs, `log format "xml"`) {
		t.Errorf("--log-format xml: exit %d, stderr %q; want 2 and the reason", code, errs)
	}
	t.Setenv("CODAPIPE_LOG_FORMAT", "text")
	if code, errs := run(); code != 0 || !humanHello.MatchString(errs) {
		t.Errorf("CODAPIPE_LOG_FORMAT=text: exit %d, stderr %q; want the human line", code, errs)
	}
	if code, errs := run("--log-format", "json"); code != 0 || !isJSON(errs) {
		t.Errorf("--log-format json over CODAPIPE_LOG_FORMAT=text: exit %d, stderr %q; want a JSON record", code, errs)
	}
}
