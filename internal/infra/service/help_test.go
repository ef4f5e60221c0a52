package service

import (
	"bytes"
	"context"
	"flag"
	"strings"
	"testing"
)

// helpCommand has flags in two groups, one before any group, and the
// common ones (which add their own sections and --drain to Run control).
func helpCommand() Command {
	var s string
	var n int
	return Command{
		Name: "t", Summary: "test", Common: true, Consumer: true,
		Flags: func(f *Flags) {
			f.String(&s, "loose", "", "", "a flag before any group")
			f.Group(GroupRun)
			f.Int(&n, "group", "", 8, "G")
			f.Int(&n, "samples", "", 1, "K")
			f.Group(GroupEndpoints)
			f.String(&s, "planner-url", "", "", "planner")
		},
		Run: func(context.Context, *Env) error { return nil },
	}
}

// TestHelpSections: --help lists the flags in their groups' sections, in
// the order the groups were started, each flag once; a group the common
// flags share gets them too; no section is empty.
func TestHelpSections(t *testing.T) {
	cmd := helpCommand()
	var out, errb bytes.Buffer
	if code := MainContext(context.Background(), cmd, []string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d", code)
	}
	help := errb.String()
	sections := map[string][]string{}
	var order []string
	cur := ""
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasSuffix(line, ":") && !strings.HasPrefix(line, " "):
			cur = strings.TrimSuffix(line, ":")
			order = append(order, cur)
		case strings.HasPrefix(line, "  -"):
			sections[cur] = append(sections[cur], strings.Fields(line)[0])
		}
	}
	if want := []string{"Flags", GroupRun, GroupEndpoints, GroupBus, GroupOutput}; strings.Join(order, "|") != strings.Join(want, "|") {
		t.Errorf("sections %q, want %q:\n%s", order, want, help)
	}
	for name, want := range map[string]string{"Flags": "-loose", GroupRun: "-drain -group -samples", GroupEndpoints: "-planner-url", GroupOutput: "-log-format -log-level -metrics-addr -progress-every"} {
		if got := strings.Join(sections[name], " "); got != want {
			t.Errorf("section %s: %s, want %s", name, got, want)
		}
	}
	seen := map[string]int{}
	for _, fl := range sections {
		for _, f := range fl {
			seen[f]++
		}
	}
	cmd.FlagSet().VisitAll(func(f *flag.Flag) {
		if seen["-"+f.Name] != 1 {
			t.Errorf("--help lists -%s %d times, want once", f.Name, seen["-"+f.Name])
		}
	})

	// A command without flags has no flag section.
	errb.Reset()
	noFlags := Command{Name: "top", Summary: "s", Sub: []Command{{Name: "top sub", Summary: "a sub"}}}
	MainContext(context.Background(), noFlags, []string{"--help"}, &out, &errb)
	if strings.Contains(errb.String(), "Flags:") || strings.HasSuffix(errb.String(), "\n\n") {
		t.Errorf("help of a command without flags:\n%q", errb.String())
	}
}

// TestMistypedFlag: a flag Main cannot parse prints the error, the
// nearest flag for an unknown one and where the help is, in a few lines,
// not the whole help.
func TestMistypedFlag(t *testing.T) {
	for _, tc := range []struct {
		args    []string
		want    string
		notWant string
	}{
		{[]string{"--gorup", "8"}, "t: unknown flag --gorup; did you mean --group?", ""},
		{[]string{"-planer-url", "x"}, "did you mean --planner-url?", ""},
		{[]string{"--dran"}, "did you mean --drain?", ""},
		{[]string{"--zebra"}, "t: unknown flag --zebra\n", "did you mean"},
		{[]string{"--group", "eight"}, `invalid value "eight" for flag -group`, "did you mean"},
	} {
		t.Run(tc.args[0], func(t *testing.T) {
			var out, errb bytes.Buffer
			code := MainContext(context.Background(), helpCommand(), tc.args, &out, &errb)
			msg := errb.String()
			if code != 2 || !strings.Contains(msg, tc.want) || tc.notWant != "" && strings.Contains(msg, tc.notWant) {
				t.Fatalf("exit %d, stderr %q; want 2 and %q", code, msg, tc.want)
			}
			if n := strings.Count(msg, "\n"); n >= 5 || !strings.Contains(msg, "Run 't --help'") || strings.Contains(msg, "Flags:") {
				t.Errorf("%d lines, want a few pointing at --help and no flag list:\n%s", n, msg)
			}
		})
	}
}
