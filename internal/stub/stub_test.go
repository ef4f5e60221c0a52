package stub

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/service"
)

func TestHelpSaysWhatIsNotBuilt(t *testing.T) {
	for _, c := range []service.Command{SFTPack} {
		t.Run(c.Name, func(t *testing.T) {
			var out, errb bytes.Buffer
			if code := service.MainContext(context.Background(), c, []string{"--help"}, &out, &errb); code != 0 {
				t.Fatalf("--help exit %d", code)
			}
			if !strings.Contains(errb.String(), "NOT BUILT YET") || !strings.Contains(errb.String(), "-nats") {
				t.Fatalf("help lacks the status or the common flags:\n%s", errb.String())
			}
			errb.Reset()
			if code := service.MainContext(context.Background(), c, nil, &out, &errb); code != 2 || !strings.Contains(errb.String(), "not built yet") {
				t.Fatalf("run: exit %d, %q", code, errb.String())
			}
		})
	}
}
