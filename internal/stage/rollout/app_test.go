package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAppMatchedToItsTasks: --app is matched to the spelling of the task
// files ignoring case, and the run is that app's (its subject, history
// and summary), not a new app; an app without tasks is refused with the
// list of the apps there are.
func TestAppMatchedToItsTasks(t *testing.T) {
	clearRolloutEnv(t)
	tasks := simTaskDir(t, acceptApp, "S01")
	for _, tc := range []struct {
		name, app string
		code      int
		want      string // in stderr
	}{
		{"other case", strings.ToLower(acceptApp), 0, ""},
		{"unknown", "Photoshop", 1, `unknown app "Photoshop" (known apps: ` + acceptApp + ")"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "summary.json")
			args := []string{"--sim", "--app", tc.app, "--group", "1", "--samples", "1", "--vms", "1", "--tasks", tasks,
				"--data", t.TempDir(), "--run", "app-case", "--time-scale", "0.001", "--log-level", "error", "--summary", file}
			var out, errb bytes.Buffer
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			if code := Main(ctx, args, &out, &errb); code != tc.code || !strings.Contains(errb.String(), tc.want) {
				t.Fatalf("exit %d (want %d), stderr %q does not contain %q", code, tc.code, errb.String(), tc.want)
			}
			if tc.code != 0 {
				return
			}
			data, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var sum Summary
			if err := json.Unmarshal(data, &sum); err != nil {
				t.Fatal(err)
			}
			if sum.App != acceptApp || sum.Episodes != 1 || sum.OnStream != 1 {
				t.Errorf("summary app %q, %d episodes, %d on the stream; want %s, 1, 1", sum.App, sum.Episodes, sum.OnStream, acceptApp)
			}
		})
	}
}
