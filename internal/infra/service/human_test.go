package service

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

// at is the time of the records of the table tests: 17:20:01 local time.
var at = time.Date(2026, 3, 1, 17, 20, 1, 500, time.Local)

type secret string

func (secret) LogValue() slog.Value { return slog.StringValue("***") }

func TestHumanHandlerLines(t *testing.T) {
	cases := []struct {
		name    string
		service string
		derive  func(slog.Handler) slog.Handler // nil: the handler as is
		noTime  bool
		level   slog.Level // zero: info
		msg     string
		attrs   []any
		want    string
	}{
		{name: "info", service: "rollout", msg: "planned", attrs: []any{"episodes", 56, "vms", 4},
			want: "17:20:01 rollout   planned  episodes=56 vms=4"},
		{name: "no attributes", service: "judge", msg: "drained",
			want: "17:20:01 judge     drained"},
		{name: "the service's prefix is cut", service: "advantage", msg: "advantage: manifest written", attrs: []any{"rows", 168},
			want: "17:20:01 advantage manifest written  rows=168"},
		{name: "another prefix stays", service: "judge", msg: "bus: streams created",
			want: "17:20:01 judge     bus: streams created"},
		{name: "no service", msg: "x", attrs: []any{"a", 1},
			want: "17:20:01 x  a=1"},
		{name: "no time", service: "t", noTime: true, msg: "x",
			want: "t         x"},
		{name: "warn", service: "rollout", level: slog.LevelWarn, msg: "closing the VM pool", attrs: []any{"err", errors.New("vm 3: timeout")},
			want: `17:20:01 rollout   WARN closing the VM pool  err="vm 3: timeout"`},
		{name: "error", service: "rollout", level: slog.LevelError, msg: "VM quarantined",
			want: "17:20:01 rollout   ERROR VM quarantined"},
		{name: "debug", service: "rollout", level: slog.LevelDebug, msg: "step limit reached",
			want: "17:20:01 rollout   DEBUG step limit reached"},
		{name: "custom level", service: "t", level: slog.LevelWarn + 2, msg: "x",
			want: "17:20:01 t         WARN+2 x"},
		{name: "kinds", service: "t", msg: "x", attrs: []any{
			"f", 0.25, "b", true, "d", 1500 * time.Millisecond, "u", uint64(7), "s", []string{"a", "b"}, "nil", nil,
			"at", time.Date(2026, 3, 1, 1, 2, 3, 4e6, time.UTC), "bytes", []byte("raw"), "secret", secret("pw")},
			want: `17:20:01 t         x  f=0.25 b=true d=1.5s u=7 s="[a b]" nil=<nil> at=2026-03-01T01:02:03.004Z bytes=raw secret=***`},
		{name: "quoting", service: "t", msg: "x", attrs: []any{
			"empty", "", "space", "a b", "eq", "a=b", "quote", `say "hi"`, "backslash", `C:\x`, "plain", "file:///d/shards/step-1"},
			want: `17:20:01 t         x  empty="" space="a b" eq="a=b" quote="say \"hi\"" backslash="C:\\x" plain=file:///d/shards/step-1`},
		{name: "a value cannot forge a line", service: "t", msg: "x", attrs: []any{
			"v", "ok\n17:20:02 t         forged", "cr", "a\rb", "esc", "\x1b[31mred", "ls", "a\u2028b", "bad", "a\xffb", "nbsp", "a\u00a0b"},
			want: `17:20:01 t         x  v="ok\n17:20:02 t         forged" cr="a\rb" esc="\x1b[31mred" ls="a\u2028b" bad="a\xffb" nbsp="a\u00a0b"`},
		{name: "nor a message or a key", service: "t", msg: "two\nlines\x1b[2J\xfe ok", attrs: []any{"k\ney", 1, "a key", 2},
			want: `17:20:01 t         two\nlines\x1b[2J\xfe ok  "k\ney"=1 "a key"=2`},
		{name: "groups", service: "t", msg: "x", attrs: []any{
			slog.Group("g", "a", 1, slog.Group("h", "b", 2)), slog.Group("empty"), slog.Group("", "inline", 3), slog.Attr{}},
			want: "17:20:01 t         x  g.a=1 g.h.b=2 inline=3"},
		{name: "only an empty group", service: "t", msg: "x", attrs: []any{slog.Group("empty")},
			want: "17:20:01 t         x"},
		{name: "WithAttrs come after the record's", service: "rollout",
			derive: func(h slog.Handler) slog.Handler {
				return h.WithAttrs([]slog.Attr{slog.String("run", "chimerax-1"), slog.String("app", "ChimeraX")})
			},
			msg: "progress", attrs: []any{"done", 7, "total", 56},
			want: "17:20:01 rollout   progress  done=7 total=56  run=chimerax-1 app=ChimeraX"},
		{name: "WithAttrs twice, no record attributes", service: "t",
			derive: func(h slog.Handler) slog.Handler {
				return h.WithAttrs([]slog.Attr{slog.Int("a", 1)}).WithAttrs(nil).WithAttrs([]slog.Attr{slog.Int("b", 2)})
			},
			msg: "x", want: "17:20:01 t         x  a=1 b=2"},
		{name: "WithGroup", service: "t",
			derive: func(h slog.Handler) slog.Handler {
				return h.WithAttrs([]slog.Attr{slog.Int("a", 1)}).WithGroup("g").WithAttrs([]slog.Attr{slog.Int("b", 2)}).WithGroup("h").WithGroup("")
			},
			msg: "x", attrs: []any{"c", 3, slog.Group("i", "d", 4)},
			want: "17:20:01 t         x  g.h.c=3 g.h.i.d=4  a=1 g.b=2"},
		{name: "WithGroup without record attributes", service: "t",
			derive: func(h slog.Handler) slog.Handler { return h.WithGroup("g") },
			msg:    "x", want: "17:20:01 t         x"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var b bytes.Buffer
			var h slog.Handler = NewHumanHandler(&b, c.service, slog.LevelDebug)
			if c.derive != nil {
				h = c.derive(h)
			}
			tm := at
			if c.noTime {
				tm = time.Time{}
			}
			r := slog.NewRecord(tm, c.level, c.msg, 0)
			r.Add(c.attrs...)
			if err := h.Handle(context.Background(), r); err != nil {
				t.Fatal(err)
			}
			if got := b.String(); got != c.want+"\n" {
				t.Errorf("got  %q\nwant %q", got, c.want+"\n")
			}
		})
	}
}

func TestHumanHandlerLevel(t *testing.T) {
	var b bytes.Buffer
	lv := new(slog.LevelVar)
	lv.Set(slog.LevelWarn)
	l := slog.New(NewHumanHandler(&b, "t", lv))
	l.Info("quiet")
	l.Warn("loud")
	if got := b.String(); !strings.HasSuffix(got, " t         WARN loud\n") || strings.Count(got, "\n") != 1 {
		t.Fatalf("at warn: %q", got)
	}
	lv.Set(slog.LevelDebug)
	if !l.Enabled(context.Background(), slog.LevelDebug) {
		t.Fatal("debug not enabled after the level changed")
	}
	if h := NewHumanHandler(&b, "t", nil); h.Enabled(context.Background(), slog.LevelDebug) || !h.Enabled(context.Background(), slog.LevelInfo) {
		t.Fatal("a nil level is not info")
	}
}

// TestHumanHandlerConcurrent: loggers derived from one handler write
// whole lines, never interleaved, from many goroutines at once (run with
// -race: the buffer is not safe on its own).
func TestHumanHandlerConcurrent(t *testing.T) {
	var b bytes.Buffer
	base := slog.New(NewHumanHandler(&b, "judge", slog.LevelInfo))
	const goroutines, each = 8, 200
	var wg sync.WaitGroup
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := base.With("worker", g)
			if g%2 == 1 {
				l = l.WithGroup("grp")
			}
			for i := range each {
				l.Info("judged", "n", i, "text", strings.Repeat("x", 1+i%50))
			}
		}()
	}
	wg.Wait()
	line := regexp.MustCompile(`^\d\d:\d\d:\d\d judge     judged  (grp\.)?n=(\d+) (grp\.)?text=x+  worker=(\d+)$`)
	lines := strings.Split(strings.TrimSuffix(b.String(), "\n"), "\n")
	if len(lines) != goroutines*each {
		t.Fatalf("%d lines, want %d", len(lines), goroutines*each)
	}
	seen := map[string]bool{}
	for _, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("malformed line %q", l)
		}
		seen[m[4]+"/"+m[2]] = true
	}
	if len(seen) != goroutines*each {
		t.Fatalf("%d distinct records, want %d", len(seen), goroutines*each)
	}
}

func TestHumanHandlerWriteError(t *testing.T) {
	h := NewHumanHandler(failingWriter{}, "t", nil)
	if err := h.Handle(context.Background(), slog.NewRecord(at, slog.LevelInfo, "x", 0)); err == nil {
		t.Fatal("write error not returned")
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, fmt.Errorf("disk full") }
