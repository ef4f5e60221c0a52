package nightly

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/advantage"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/internal/stage/sft"
)

// TestEveryCommandPrintsItsVersion: each of the five commands and each
// of their subcommands answers --version with its name and the build
// (module, version, revision, Go version) on one line, exit 0, as
// cmd/*/main.go runs them.
func TestEveryCommandPrintsItsVersion(t *testing.T) {
	want := service.Version().String()
	for _, cmd := range []service.Command{rollout.Command(), judge.Command(), advantage.Command(), sft.Command(), Command()} {
		cases := [][]string{{"--version"}}
		for _, sub := range cmd.Sub {
			name := sub.Name[strings.LastIndexByte(sub.Name, ' ')+1:]
			cases = append(cases, []string{name, "--version"})
		}
		for _, args := range cases {
			name := cmd.Name + " " + strings.Join(args, " ")
			t.Run(name, func(t *testing.T) {
				var out, errb bytes.Buffer
				code := service.MainContext(context.Background(), cmd, args, &out, &errb)
				printed := strings.TrimSuffix(out.String(), "\n")
				if code != 0 || errb.Len() > 0 {
					t.Fatalf("exit %d, stderr %q", code, errb.String())
				}
				if !strings.HasSuffix(printed, " "+want) || strings.Contains(printed, "\n") ||
					!strings.Contains(printed, service.Module) || !strings.Contains(printed, " go1.") {
					t.Errorf("printed %q, want one line ending in %q", out.String(), want)
				}
				if prog := strings.TrimSuffix(printed, " "+want); !strings.HasPrefix(name, prog+" ") {
					t.Errorf("printed %q, want it to start with the command's name (%s)", printed, name)
				}
			})
		}
	}
}
