package service

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestMainStopsTheMetricsServer: when Main returns, the metrics server it
// started has stopped (its goroutine was waited for), even though the
// caller's context is still alive. (The rollout command once dropped the
// server's done channel and left it serving.)
func TestMainStopsTheMetricsServer(t *testing.T) {
	var addr string
	cmd := Command{
		Name: "t", Common: true,
		Run: func(ctx context.Context, env *Env) error {
			env.Log.Info("running")
			return nil
		},
	}
	var out, errb bytes.Buffer
	code := MainContext(context.Background(), cmd, []string{"--metrics-addr", "127.0.0.1:0", "--data", t.TempDir()}, &out, &errb)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	for _, line := range strings.Split(errb.String(), "\n") {
		var rec map[string]any
		if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "metrics" {
			addr, _ = rec["addr"].(string)
		}
	}
	if addr == "" {
		t.Fatalf("no metrics address logged:\n%s", errb.String())
	}
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err == nil {
		conn.Close()
		t.Fatalf("the metrics server at %s still accepts connections after Main returned", addr)
	}
}

// TestMainExitCodes: 0 done, 1 failed, 2 usage errors (a flag, a Usage
// error), and --drain only for consumers.
func TestMainExitCodes(t *testing.T) {
	run := func(err error) func(context.Context, *Env) error {
		return func(context.Context, *Env) error { return err }
	}
	cases := []struct {
		name string
		cmd  Command
		args []string
		code int
	}{
		{"ok", Command{Name: "t", Run: run(nil)}, nil, 0},
		{"failed", Command{Name: "t", Run: run(errors.New("boom"))}, nil, 1},
		{"usage", Command{Name: "t", Run: run(Usage(errors.New("give --x")))}, nil, 2},
		{"bad flag", Command{Name: "t", Run: run(nil)}, []string{"--nope"}, 2},
		{"stray argument", Command{Name: "t", Run: run(nil)}, []string{"x"}, 2},
		{"help", Command{Name: "t", Run: run(nil)}, []string{"--help"}, 0},
		{"drain on a batch job", Command{Name: "t", Common: true, Run: run(nil)}, []string{"--drain"}, 2},
		{"drain on a consumer", Command{Name: "t", Common: true, Consumer: true, Run: run(nil)}, []string{"--drain", "--data", t.TempDir()}, 0},
		{"subcommand", Command{Name: "t", Run: run(errors.New("top")), Sub: []Command{{Name: "t sub", Run: run(nil)}}}, []string{"sub"}, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := MainContext(context.Background(), c.cmd, c.args, &out, &errb); code != c.code {
				t.Fatalf("exit %d, want %d (stderr %q)", code, c.code, errb.String())
			}
		})
	}
	if err := Usage(errors.New("give --x")); err.Error() != "give --x" || !errors.Is(err, ErrUsage) {
		t.Errorf("Usage changed the message or does not match ErrUsage: %v", err)
	}
}

// TestMainChecksTheNATSURL: a --nats that is not a NATS URL (a scheme
// NATS does not have, NATS's HTTP monitoring port) is a usage error
// before the command runs, with what to give instead.
func TestMainChecksTheNATSURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		code int
		want string
	}{
		{"natss://127.0.0.1:4222", 2, "want nats://, tls://, ws:// or wss://"},
		{"http://127.0.0.1:8222", 2, "8222 by default, is the server's monitoring port; the client port is usually 4222"},
		{"nats://127.0.0.1:4222", 0, ""},
	} {
		t.Run(tc.url, func(t *testing.T) {
			ran := false
			cmd := Command{Name: "t", Common: true, Run: func(context.Context, *Env) error { ran = true; return nil }}
			var out, errb bytes.Buffer
			code := MainContext(context.Background(), cmd, []string{"--nats", tc.url, "--data", t.TempDir()}, &out, &errb)
			if code != tc.code || ran != (tc.code == 0) || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want %d), ran %v, stderr %q; want %q", code, tc.code, ran, errb.String(), tc.want)
			}
			if tc.code != 0 && !strings.Contains(errb.String(), "t: --nats: ") {
				t.Errorf("stderr %q does not name the flag", errb.String())
			}
		})
	}
}

// TestMainEscapesControlCharacters (issue 40, "raw bytes on the
// terminal"): a guest's 500 page with an ESC in its title reaches the
// final error line, and a log line, as text: every control character but
// newline and tab is escaped in what the command prints.
func TestMainEscapesControlCharacters(t *testing.T) {
	page := "500 <title>\x1b]0;pwned\x07\x1b[2J\rgone\u009b31m</title>"
	cmd := Command{Name: "t", Run: func(ctx context.Context, env *Env) error {
		env.Log.Warn("guest answered", "body", page)
		fmt.Fprintln(env.Stdout, "summary:", page)
		return fmt.Errorf("guest: %s", page)
	}}
	var out, errb bytes.Buffer
	if code := MainContext(t.Context(), cmd, nil, &out, &errb); code != 1 {
		t.Fatalf("exit %d, want 1", code)
	}
	for name, got := range map[string]string{"stdout": out.String(), "stderr": errb.String()} {
		if strings.ContainsAny(got, "\x1b\x07\r\u009b") {
			t.Errorf("%s holds a raw control character: %q", name, got)
		}
	}
	if want := `t: guest: 500 <title>\x1b]0;pwned\x07\x1b[2J\rgone\u009b31m</title>`; !strings.Contains(errb.String(), want+"\n") {
		t.Errorf("the last line is not escaped as %q:\n%q", want, errb.String())
	}
	if EscapeControl("a\tb\nc") != "a\tb\nc" {
		t.Error("tab and newline are escaped")
	}
	var bar bytes.Buffer
	w := controlWriter{&bar}
	fmt.Fprintf(w, "\r[##..] 2/4 episodes   ")
	fmt.Fprintf(w, "\r[###.] 3/4 \x1b[2Jepisodes\r   ")
	if want := "\r[##..] 2/4 episodes   \r[###.] 3/4 \\x1b[2Jepisodes\\r   "; bar.String() != want {
		t.Errorf("a progress bar through the writer: %q, want %q (its leading carriage returns kept, the rest escaped)", bar.String(), want)
	}
}
