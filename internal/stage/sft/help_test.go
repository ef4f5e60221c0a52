package sft

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/service"
)

// TestHelpHasNoEmptyFlagSection: sftpack has no flags of its own (its
// subcommands do): its --help lists the subcommands and no empty
// "Flags:" section; sftpack build's lists its flags by concern.
func TestHelpHasNoEmptyFlagSection(t *testing.T) {
	var out, errb bytes.Buffer
	if code := service.MainContext(context.Background(), Command(), []string{"--help"}, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	if help := errb.String(); strings.Contains(help, "Flags:") || !strings.Contains(help, "Subcommands:\n  build") {
		t.Errorf("sftpack --help:\n%s", help)
	}
	errb.Reset()
	service.MainContext(context.Background(), Command(), []string{"build", "--help"}, &out, &errb)
	for _, want := range []string{"\nSelection:\n  -apps", "\nOutput:\n", "\nBus and storage:\n"} {
		if !strings.Contains(errb.String(), want) {
			t.Errorf("sftpack build --help lacks %q:\n%s", want, errb.String())
		}
	}
}
