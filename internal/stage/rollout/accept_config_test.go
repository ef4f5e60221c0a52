package rollout

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/stage/sched"
)

// clearRolloutEnv empties the environment fallbacks of the rollout flags
// so that the machine's environment cannot change what the tests see.
func clearRolloutEnv(t *testing.T) {
	for _, k := range []string{"CODAPIPE_APP", "CODAPIPE_SIM", "CODAPIPE_POOL", "CODAPIPE_TASKS", "CODAPIPE_DATA", "CODAPIPE_RUN",
		"CODAPIPE_PLANNER_URL", "CODAPIPE_PLANNER_MODEL", "CODAPIPE_EXECUTOR_URL", "CODAPIPE_EXECUTOR_MODEL",
		"CODAPIPE_SCHEDULE", "CODAPIPE_SAMPLES", "CODAPIPE_GROUP", "CODAPIPE_SUMMARY", "CODAPIPE_SIM_CONFIG", "NATS_URL", "CODAPIPE_STORE"} {
		t.Setenv(k, "")
	}
}

// Without --sim and without a pool and model endpoints there is nothing to
// run on: Run fails with ErrNotConfigured naming what to configure, before
// it touches the data directory; the command exits 2 with that message.
func TestAcceptNotConfigured(t *testing.T) {
	clearRolloutEnv(t)
	dir := filepath.Join(t.TempDir(), "data")
	sum, err := execute(context.Background(), acceptCfg{Common: &service.Common{DataDir: dir},
		Options: Options{App: "ChimeraX", Group: 8, Samples: 1, Schedule: sched.Dynamic}})
	if !errors.Is(err, ErrNotConfigured) || sum != nil {
		t.Fatalf("Run = %v, %v; want ErrNotConfigured", sum, err)
	}
	for _, want := range []string{"--pool", "--planner-url", "--planner-model", "--executor-url", "--executor-model", "--tasks", "--sim", "SIMULATOR"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not name %s", err, want)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the data directory was touched (%v) although nothing can run", err)
	}

	// The command, from a fresh working directory (its default data
	// directory is ./.codapipe).
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	code := Main(context.Background(), []string{"--app", "ChimeraX"}, &out, &errb)
	if code != 2 {
		t.Errorf("exit %d, want 2; stderr %q", code, errb.String())
	}
	msg := errb.String()
	for _, want := range []string{ErrNotConfigured.Error(), "--pool", "--planner-url", "--executor-url", "--sim"} {
		if !strings.Contains(msg, want) {
			t.Errorf("stderr %q does not contain %q", msg, want)
		}
	}
	if _, err := os.Stat(".codapipe"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("./.codapipe created (%v) although nothing can run", err)
	}

	// No app at all: the message asks for it too.
	_, err = execute(context.Background(), acceptCfg{Common: &service.Common{DataDir: dir},
		Options: Options{Sim: true, Group: 1, Samples: 1, Schedule: sched.Dynamic}})
	if !errors.Is(err, ErrNotConfigured) || !strings.Contains(err.Error(), "--app") {
		t.Errorf("Run without an app: %v; want ErrNotConfigured naming --app", err)
	}
}

// Bad values of --schedule, --samples and --group are refused with a
// message naming the flag and what it wants, before anything starts.
func TestAcceptBadFlagValues(t *testing.T) {
	clearRolloutEnv(t)
	cases := []struct {
		name string
		args []string
		want []string
	}{
		{"schedule", []string{"--schedule", "roundrobin"}, []string{`--schedule "roundrobin"`, "dynamic", "static"}},
		{"samples 0", []string{"--samples", "0"}, []string{"--samples 0", "K >= 1"}},
		{"samples -1", []string{"--samples", "-1"}, []string{"--samples -1", "K >= 1"}},
		{"group", []string{"--group", "-1"}, []string{"--group -1", "G >= 0"}},
		{"samples not a number", []string{"--samples", "two"}, []string{"samples", "two"}},
		{"stray argument", []string{"extra"}, []string{`unexpected argument "extra"`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "data")
			args := append([]string{"--sim", "--app", acceptApp, "--data", dir, "--vms", "1"}, tc.args...)
			var out, errb bytes.Buffer
			code := Main(context.Background(), args, &out, &errb)
			if code == 0 {
				t.Fatalf("exit 0 for %v", tc.args)
			}
			for _, w := range tc.want {
				if !strings.Contains(errb.String(), w) {
					t.Errorf("exit %d, stderr %q does not contain %q", code, errb.String(), w)
				}
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the data directory was created (%v): the run started before the flags were checked", err)
			}
		})
	}
	// Execute itself, for callers without the command line.
	for _, o := range []Options{
		{Schedule: "bogus", Samples: 1},
		{Schedule: sched.Dynamic, Samples: 0},
	} {
		o.App, o.Sim = acceptApp, true
		if _, err := execute(context.Background(), acceptCfg{Common: &service.Common{DataDir: t.TempDir()}, Options: o}); !errors.Is(err, ErrInvalidConfig) {
			t.Errorf("Execute(%+v) = %v, want ErrInvalidConfig", o, err)
		}
	}
}

// --summary FILE writes the summary as one JSON document whose fields are
// what the command prints.
func TestAcceptSummaryFileMatchesPrintout(t *testing.T) {
	clearRolloutEnv(t)
	dir := t.TempDir()
	file := filepath.Join(t.TempDir(), "summary.json")
	tasks := simTaskDir(t, acceptApp, "S01", "S05")
	args := []string{"--sim", "--app", acceptApp, "--group", "1", "--samples", "2", "--vms", "2", "--tasks", tasks,
		"--data", dir, "--run", "accept-summary", "--time-scale", "0.001", "--log-level", "error", "--summary", file}
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if code := Main(ctx, args, &out, &errb); code != 0 {
		t.Fatalf("exit %d\nstdout:\n%s\nstderr:\n%s", code, out.String(), errb.String())
	}
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("--summary file: %v", err)
	}
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		t.Fatalf("summary file is not JSON: %v\n%s", err, data)
	}
	if dec.More() {
		t.Fatalf("summary file holds more than one JSON document:\n%s", data)
	}
	var sum Summary
	if err := json.Unmarshal(data, &sum); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run", "app", "tasks", "samples", "group", "episodes", "already_published", "successes", "success_rate",
		"average_at_k", "pass_at_k", "env_errors", "outcomes", "mean_steps", "env_retries", "publish_failures", "vm_utilisation",
		"quarantined_vms", "wall_seconds", "trajectories_on_stream"} {
		if _, ok := doc[k]; !ok {
			t.Errorf("summary file has no %q field:\n%s", k, data)
		}
	}
	if sum.Run != "accept-summary" || sum.App != acceptApp || sum.Tasks != 2 || sum.Samples != 2 || sum.Group != 1 || sum.Episodes != 4 || sum.OnStream != 4 {
		t.Errorf("summary file %+v: want run accept-summary, 2 tasks × 2 samples, G 1, 4 episodes on the stream", sum)
	}

	// Every number printed is the file's (to the printed precision).
	printed := out.String()
	num := func(re string) []string {
		t.Helper()
		m := regexp.MustCompile(re).FindStringSubmatch(printed)
		if m == nil {
			t.Fatalf("printed summary has no line matching %s:\n%s", re, printed)
		}
		return m[1:]
	}
	atoi := func(s string) int { n, _ := strconv.Atoi(s); return n }
	atof := func(s string) float64 { f, _ := strconv.ParseFloat(s, 64); return f }
	near := func(name string, printed, value float64, prec float64) {
		t.Helper()
		if d := printed - value; d > prec || d < -prec {
			t.Errorf("%s: printed %v, file %v", name, printed, value)
		}
	}
	m := num(`run (\S+) — (\S+): (\d+) tasks × (\d+) samples, G=(\d+)`)
	if m[0] != sum.Run || m[1] != sum.App || atoi(m[2]) != sum.Tasks || atoi(m[3]) != sum.Samples || atoi(m[4]) != sum.Group {
		t.Errorf("printed header %v, file %+v", m, sum)
	}
	m = num(`episodes run\s+(\d+) \(already published before: (\d+)\)`)
	if atoi(m[0]) != sum.Episodes || atoi(m[1]) != sum.Skipped {
		t.Errorf("printed episodes %v, file %d/%d", m, sum.Episodes, sum.Skipped)
	}
	m = num(`success\s+(\d+) \(([\d.]+)% of scored episodes\)`)
	if atoi(m[0]) != sum.Success {
		t.Errorf("printed successes %s, file %d", m[0], sum.Success)
	}
	near("success rate", atof(m[1]), 100*sum.Rate, 0.051)
	near("Average@K", atof(num(`Average@2\s+([\d.]+)%`)[0]), 100*sum.AverageAtK, 0.0051)
	near("Pass@K", atof(num(`Pass@2\s+([\d.]+)%`)[0]), 100*sum.PassAtK, 0.0051)
	m = num(`environment errors\s+(\d+) \(after (\d+) retries`)
	if atoi(m[0]) != sum.EnvErrors || atoi(m[1]) != sum.Retries {
		t.Errorf("printed env errors %v, file %d/%d", m, sum.EnvErrors, sum.Retries)
	}
	near("mean steps", atof(num(`mean steps\s+([\d.]+)`)[0]), sum.MeanSteps, 0.0051)
	near("VM utilisation", atof(num(`VM utilisation\s+([\d.]+)%`)[0]), 100*sum.Utilisation, 0.051)
	outcomes := map[string]int{}
	for _, part := range strings.Split(num(`outcomes\s+(.*)`)[0], ", ") {
		k, v, _ := strings.Cut(part, " ")
		outcomes[k] = atoi(v)
	}
	if len(outcomes) != len(sum.Outcomes) {
		t.Errorf("printed outcomes %v, file %v", outcomes, sum.Outcomes)
	}
	for k, v := range sum.Outcomes {
		if outcomes[k] != v {
			t.Errorf("printed outcomes %v, file %v", outcomes, sum.Outcomes)
		}
	}
	if atoi(num(`trajectories of run \S+ on the stream: (\d+) of`)[0]) != int(sum.OnStream) {
		t.Errorf("printed stream count differs from the file's %d", sum.OnStream)
	}
	if strings.Contains(printed, "quarantined VMs") != (len(sum.Quarantined) > 0) {
		t.Errorf("printed quarantine line disagrees with the file's %v", sum.Quarantined)
	}
}
