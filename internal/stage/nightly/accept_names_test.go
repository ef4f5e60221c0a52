package nightly

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/advantage"
	"github.com/codapipe/codapipe/internal/stage/judge"
	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/internal/stage/sft"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/nats-io/nats.go/jetstream"
)

// hostileCase is one hostile name of issue 25 (acceptance 2), made for a
// kind of name: the whole run name, app name or task id.
type hostileCase struct {
	name string
	// value returns the name for a kind; a task id is "ChimeraX/<stem>".
	value func(k traj.NameKind) string
	// works lists the kinds for which the name works (safely encoded
	// wherever it goes); for the others it is refused at start.
	works []traj.NameKind
}

const taskApp = "ChimeraX"

// hostileCases lists every case × kind: which work and which are refused.
func hostileCases() []hostileCase {
	all := []traj.NameKind{traj.RunName, traj.AppName, traj.TaskName}
	notApp := []traj.NameKind{traj.RunName, traj.TaskName}
	plain := func(s string) func(traj.NameKind) string {
		return func(k traj.NameKind) string {
			if k == traj.TaskName {
				return taskApp + "/" + s
			}
			return s
		}
	}
	// sized fills the kind's limit (plus extra bytes) with two-byte
	// characters: the worst case for the encodings, which write every
	// such byte as three.
	sized := func(extra int) func(traj.NameKind) string {
		return func(k traj.NameKind) string {
			prefix := ""
			if k == traj.TaskName {
				prefix = taskApp + "/"
			}
			n := traj.MaxNameBytes(k) - len(prefix)
			s := strings.Repeat("Ω", n/2) + strings.Repeat("a", n%2+extra)
			return prefix + s
		}
	}
	return []hostileCase{
		{"dot-dot slash", plain("../"), notApp}, // '/' is the task id's separator: no app name has one
		{"dot-dot etc", plain("../../etc"), notApp},
		{"star", plain("*"), all},
		{"greater than", plain(">"), all},
		{"dot", plain("a.b"), all},
		{"spaces", plain("a b  c"), all},
		{"unicode", plain("ChimeraX-Ωμέγα"), all},
		{"emoji", plain("🧪👩‍🔬"), all},
		{"at the limit", sized(0), all},
		{"newline", plain("x\nrun fake 100%"), nil},
		{"ANSI escape", plain("\x1b[31mred"), nil},
		{"NUL", plain("a\x00b"), nil},
		{"U+202E", plain("a\u202eb"), nil},
		{"1 MB", plain(strings.Repeat("a", 1<<20)), nil},
		{"limit+1", sized(1), nil},
	}
}

// TestAcceptHostileNames (issue 25, acceptance 2) gives every hostile name
// as a run name, an app name and a task id. Each either works — a real
// simulated rollout and judge on one NATS server: nothing is written
// outside the data directory, every subject is three plain tokens, the
// judged archive gives the exact name back, the summary shows it — or is
// refused at start by every command that takes it, with an error that
// names the flag and the limit, shows the value quoted and cut, and is no
// transport error. Names that arrive from the stream (a trajectory someone
// else published) are judged when valid and dead-lettered with the reason
// when not, by judge (trajectories) and by advantage (judged ones).
func TestAcceptHostileNames(t *testing.T) {
	cases := hostileCases()
	t.Run("refused at start", func(t *testing.T) {
		for _, k := range []traj.NameKind{traj.RunName, traj.AppName, traj.TaskName} {
			for _, c := range cases {
				if slices.Contains(c.works, k) {
					continue
				}
				t.Run(string(k)+"/"+c.name, func(t *testing.T) { checkRefused(t, k, c.value(k)) })
			}
		}
	})
	t.Run("work safely", func(t *testing.T) { checkWorks(t, cases) })
	t.Run("printed escaped", checkPrinted)
}

// checkRefused runs every command that takes a name of kind k with v and
// wants a clear refusal before any connection.
func checkRefused(t *testing.T, k traj.NameKind, v string) {
	dir := t.TempDir()
	data := filepath.Join(dir, "data")
	type call struct {
		cmd  service.Command
		args []string
		flag string
	}
	var calls []call
	switch k {
	case traj.RunName:
		calls = []call{
			{rollout.Command(), []string{"--sim", "--app", taskApp, "--run", v}, "--run"},
			{rollout.Command(), []string{"report", "--run", v}, "--run"},
			{judge.Command(), []string{"report", "--run", v}, "--run"},
			{advantage.Command(), []string{"--drain", "--runs", v}, "--runs"},
			{sft.Command(), []string{"build", "--runs", v, "--out", filepath.Join(dir, "sft")}, "--runs"},
		}
		if len(v) > traj.MaxRunNameBytes { // the night's own rule is stricter: its limit shows when it is only too long
			calls = append(calls, call{Command(), []string{"--sim", "--apps", taskApp, "--night", v}, "--night"})
		}
	case traj.AppName:
		calls = []call{
			{rollout.Command(), []string{"--sim", "--app", v}, "--app"},
			{judge.Command(), []string{"--sim", "--drain", "--app", v}, "--app"},
			{judge.Command(), []string{"report", "--app", v}, "--app"},
			{advantage.Command(), []string{"--drain", "--app", v}, "--app"},
			{sft.Command(), []string{"build", "--apps", v, "--out", filepath.Join(dir, "sft")}, "--apps"},
			{Command(), []string{"--sim", "--apps", v}, "--apps"},
		}
	case traj.TaskName:
		stem := strings.TrimPrefix(v, taskApp+"/")
		if strings.ContainsAny(stem, "/\x00") || len(stem) > 200 {
			t.Skipf("no task file can be named %s: only a trajectory from the stream carries it (see work safely)", traj.QuoteName(stem))
		}
		tasks := filepath.Join(dir, "tasks")
		writeTask(t, filepath.Join(tasks, stem+".json"), taskApp)
		calls = []call{{rollout.Command(), []string{"--sim", "--app", taskApp, "--tasks", tasks}, "--tasks"}}
	}
	for _, c := range calls {
		var out, errb bytes.Buffer
		args := append(slices.Clone(c.args), "--data", data, "--log-format", "text")
		code := service.MainContext(t.Context(), c.cmd, args, &out, &errb)
		msg := errb.String()
		what := c.cmd.Name + " " + c.args[0]
		switch {
		case code == 0:
			t.Errorf("%s: exit 0, want a refusal", what)
		case !strings.Contains(msg, c.flag) || !strings.Contains(msg, fmt.Sprintf("1 to %d bytes", traj.MaxNameBytes(k))):
			t.Errorf("%s: %q: want the flag %s and the limit of a %s", what, msg, c.flag, k)
		case len(msg) > 2048, len(v) > 64 && strings.Contains(msg, v[:65]):
			t.Errorf("%s: %d bytes of error, the value in it: want it quoted and cut", what, len(msg))
		case strings.ContainsAny(msg, "\x1b\x00\u202e"), strings.Contains(msg, "\nrun fake"):
			t.Errorf("%s: %q: a raw control character", what, msg)
		case strings.Contains(strings.ToLower(msg), "nats:"), strings.Contains(msg, "connection"):
			t.Errorf("%s: %q: a transport error", what, msg)
		}
		if _, err := os.Stat(filepath.Join(data, "nats")); err == nil {
			t.Errorf("%s: started NATS before refusing", what)
		}
	}
}

// writeTask writes the simulator's ChimeraX/S01 as a one-step task of app
// at path.
func writeTask(t *testing.T, path, app string) {
	t.Helper()
	raw, err := fs.ReadFile(simtasks.FS(), "VM/ChimeraX/S01.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	doc["type"], doc["steps"] = app, 1
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// episode is what one works case expects to find judged.
type episode struct{ run, app, task string }

// checkWorks runs the cases that work through rollout (one one-step
// episode per run name and for three app names, every task name in one
// run) and judge on one NATS server, publishes a trajectory per case and
// kind as someone else would (each name that works is judged, each other
// one dead-lettered), and checks where the names went.
func checkWorks(t *testing.T, cases []hostileCase) {
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	srv := natstest.Start(t)
	parent := t.TempDir() // holds data and tasks only, whatever the names
	data, tasks := filepath.Join(parent, "data"), filepath.Join(parent, "tasks")
	common := []string{"--nats", srv.URL(), "--data", data, "--log-format", "text"}
	rolloutArgs := []string{"--sim", "--group", "0", "--samples", "1", "--vms", "1", "--time-scale", "0.0001"}

	type job struct {
		args []string
		want []episode
		out  bytes.Buffer
		err  bytes.Buffer
		code int
	}
	var jobs []*job
	taskDir := filepath.Join(tasks, "tasks")
	taskJob := &job{args: []string{"--app", taskApp, "--tasks", taskDir, "--run", "hostile-tasks"}}
	for i, c := range cases {
		for _, k := range c.works {
			v := c.value(k)
			switch k {
			case traj.RunName:
				dir := filepath.Join(tasks, fmt.Sprintf("run-%d", i))
				writeTask(t, filepath.Join(dir, "S01.json"), taskApp)
				jobs = append(jobs, &job{args: []string{"--app", taskApp, "--tasks", dir, "--run", v},
					want: []episode{{v, taskApp, taskApp + "/S01"}}})
			case traj.AppName:
				if !slices.Contains([]string{"spaces", "unicode", "at the limit"}, c.name) {
					continue // the stream below carries every app name: a rollout per app costs a second of CPU
				}
				dir := filepath.Join(tasks, fmt.Sprintf("app-%d", i))
				writeTask(t, filepath.Join(dir, "S01.json"), v)
				run := fmt.Sprintf("hostile-app-%d", i)
				jobs = append(jobs, &job{args: []string{"--app", v, "--tasks", dir, "--run", run},
					want: []episode{{run, v, v + "/S01"}}})
			case traj.TaskName:
				stem := strings.TrimPrefix(v, taskApp+"/")
				if strings.Contains(stem, "/") { // no file is named so: from the stream below
					continue
				}
				writeTask(t, filepath.Join(taskDir, stem+".json"), taskApp)
				taskJob.want = append(taskJob.want, episode{"hostile-tasks", taskApp, v})
			}
		}
	}
	jobs = append(jobs, taskJob)
	var wg sync.WaitGroup
	for _, j := range jobs {
		wg.Go(func() {
			args := slices.Concat(rolloutArgs, j.args, common)
			j.code = service.MainContext(ctx, rollout.Command(), args, &j.out, &j.err)
		})
	}
	wg.Wait()
	var want []episode
	for _, j := range jobs {
		if j.code != 0 {
			t.Fatalf("rollout %s: exit %d\n%s", traj.QuoteName(strings.Join(j.args, " ")), j.code, j.err.String())
		}
		if first, _, _ := strings.Cut(j.out.String(), "\n"); !strings.HasPrefix(first, "run "+j.want[0].run+" — "+j.want[0].app+": ") {
			t.Errorf("summary %q: want the run and app names as they are", first)
		}
		want = append(want, j.want...)
	}

	// Names from the stream: a copy of a trajectory per case and kind,
	// published as another program would (the 1 MB case at 100 KB, under
	// the server's 1 MB message limit).
	cfg := &service.Common{DataDir: data}
	cfg.NATS.URL = srv.URL()
	env := service.NewEnv("names-test", cfg, slog.New(slog.DiscardHandler), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := pipetest.ReadStream(ctx, b, bus.Raw, bus.AllSubjects(bus.Raw))
	if err != nil || len(raw) == 0 {
		t.Fatalf("raw stream: %d messages, %v", len(raw), err)
	}
	var deadWant int
	for _, c := range cases {
		for _, k := range []traj.NameKind{traj.RunName, traj.AppName, traj.TaskName} {
			tr, err := traj.DecodeTrajectory(raw[0].Body)
			if err != nil {
				t.Fatal(err)
			}
			v := c.value(k)
			if len(v) > 100<<10 {
				v = v[:100<<10]
			}
			tr.ID = traj.NewID()
			switch k {
			case traj.RunName:
				tr.Run = v
			case traj.AppName:
				tr.Task.App, tr.Task.ID = v, v+"/S01"
			case traj.TaskName:
				tr.Task.App, tr.Task.ID = taskApp, v
			}
			body, err := json.Marshal(tr)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Publish(ctx, bus.Subject(bus.Raw, tr.Task.App), tr.ID, body, nil); err != nil {
				t.Fatalf("publish %s %s: %s", k, c.name, traj.QuoteName(err.Error()))
			}
			if slices.Contains(c.works, k) {
				want = append(want, episode{tr.Run, tr.Task.App, tr.Task.ID})
			} else {
				deadWant++
			}
		}
	}

	var jout, jerr bytes.Buffer
	if code := service.MainContext(ctx, judge.Command(), slices.Concat([]string{"--sim", "--drain", "--max-frames", "2"}, common), &jout, &jerr); code != 0 {
		t.Fatalf("judge: exit %d\n%s", code, jerr.String())
	}

	// Nothing outside the data directory; every subject three plain
	// tokens; the archive gives every name back exactly.
	entries, err := os.ReadDir(parent)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.Name() != "data" && e.Name() != "tasks" {
			t.Errorf("%s written beside the data directory", e.Name())
		}
	}
	for _, k := range []bus.Kind{bus.Raw, bus.Judged, bus.Dead} {
		msgs, err := pipetest.ReadStream(ctx, b, k, bus.AllSubjects(k))
		if err != nil {
			t.Fatal(err)
		}
		if k == bus.Dead {
			if len(msgs) != deadWant {
				t.Errorf("%d dead letters, want %d (one per refused name from the stream)", len(msgs), deadWant)
			}
			for _, m := range msgs {
				reason := m.Header.Get(bus.HeaderDeadReason)
				if !strings.Contains(reason, "name") && !strings.Contains(reason, "task id") || len(reason) > 2100 || strings.ContainsAny(reason, "\x1b\x00\u202e") {
					t.Errorf("dead letter reason %q: want the name rule, short, escaped", reason)
				}
			}
		}
	}
	js := natstest.JetStream(t, srv.URL())
	var subjects []string
	for _, k := range []bus.Kind{bus.Raw, bus.Judged} {
		st, err := js.Stream(ctx, bus.StreamName(k))
		if err != nil {
			t.Fatal(err)
		}
		info, err := st.Info(ctx, jetstream.WithSubjectFilter(">"))
		if err != nil {
			t.Fatal(err)
		}
		for s := range info.State.Subjects {
			subjects = append(subjects, s)
		}
	}
	for _, s := range subjects {
		toks := strings.Split(s, ".")
		if len(toks) != 3 || slices.ContainsFunc(toks, func(x string) bool { return x == "" || strings.ContainsAny(x, "*> \t") }) {
			t.Errorf("subject %q: want three plain tokens", s)
		}
	}
	blobs := filepath.Join(data, "blobs")
	var got []episode
	var judgedDoc []byte // one archived judged trajectory, the same bytes as its message
	err = filepath.WalkDir(filepath.Join(blobs, strings.TrimSuffix(archive.Prefix, "/")), func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		key, _ := filepath.Rel(blobs, p)
		n, ok := archive.Parse(filepath.ToSlash(key))
		if !ok {
			return fmt.Errorf("archive key %q does not parse", key)
		}
		body, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		j, err := traj.DecodeJudged(body)
		if err != nil {
			return err
		}
		if n.Run != j.Trajectory.Run || n.App != j.Trajectory.Task.App {
			return fmt.Errorf("archive key %q names run %q app %q, the document %q %q", key, n.Run, n.App, j.Trajectory.Run, j.Trajectory.Task.App)
		}
		got = append(got, episode{j.Trajectory.Run, j.Trajectory.Task.App, j.Trajectory.Task.ID})
		judgedDoc = body
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	checkAdvantageRefuses(ctx, t, b, judgedDoc, cases, slices.Concat([]string{"--drain", "--runs", "hostile-tasks", "--out", filepath.Join(data, "shards")}, common))
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("no judged trajectory of run %s app %s task %s in the archive", traj.QuoteName(w.run), traj.QuoteName(w.app), traj.QuoteName(w.task))
		}
	}
	t.Logf("%d rollouts, %d judged names, %d dead letters", len(jobs), len(got), deadWant)
}

// checkAdvantageRefuses publishes a judged trajectory per refused case and
// kind (copies of doc with the name changed, the 1 MB case at 100 KB), as
// another program would, runs advantage with args, and wants each one
// dead-lettered with the name rule as the reason.
func checkAdvantageRefuses(ctx context.Context, t *testing.T, b *bus.Bus, doc []byte, cases []hostileCase, args []string) {
	t.Helper()
	n := 0
	for _, c := range cases {
		for _, k := range []traj.NameKind{traj.RunName, traj.AppName, traj.TaskName} {
			if slices.Contains(c.works, k) {
				continue
			}
			jd, err := traj.DecodeJudged(doc)
			if err != nil {
				t.Fatal(err)
			}
			v := c.value(k)
			if len(v) > 100<<10 {
				v = v[:100<<10]
			}
			id := traj.NewID()
			jd.Trajectory.ID, jd.Judgement.TrajectoryID = id, id
			switch k {
			case traj.RunName:
				jd.Trajectory.Run, jd.Judgement.Run = v, v
			case traj.AppName:
				jd.Trajectory.Task.App, jd.Judgement.App = v, v
				jd.Trajectory.Task.ID, jd.Judgement.TaskID = v+"/S01", v+"/S01"
			case traj.TaskName:
				jd.Trajectory.Task.ID, jd.Judgement.TaskID = v, v
			}
			body, err := json.Marshal(jd)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := b.Publish(ctx, bus.Subject(bus.Judged, jd.Trajectory.Task.App), id+".hostile", body, nil); err != nil {
				t.Fatalf("publish %s %s: %s", k, c.name, traj.QuoteName(err.Error()))
			}
			n++
		}
	}
	var out, errb bytes.Buffer
	if code := service.MainContext(ctx, advantage.Command(), args, &out, &errb); code != 0 {
		t.Fatalf("advantage: exit %d\n%s", code, errb.String())
	}
	dead, err := pipetest.ReadStream(ctx, b, bus.Dead, bus.DeadSubject(bus.AllSubjects(bus.Judged)))
	if err != nil {
		t.Fatal(err)
	}
	if len(dead) != n {
		t.Errorf("advantage: %d dead letters, want %d (one per refused name)", len(dead), n)
	}
	for _, m := range dead {
		reason := m.Header.Get(bus.HeaderDeadReason)
		if !strings.Contains(reason, "name") && !strings.Contains(reason, "task id") || strings.ContainsAny(reason, "\x1b\x00\u202e") {
			t.Errorf("advantage dead letter reason %q: want the name rule, escaped", reason)
		}
	}
}

// checkPrinted prints hostile names that reached a summary: each is quoted
// with its control characters escaped.
func checkPrinted(t *testing.T) {
	const run, app = "x\nrun fake 100%", "\x1b[31mred\u202e"
	var b bytes.Buffer
	(&rollout.Summary{Run: run, App: app, Samples: 1}).Print(&b)
	(&Summary{Night: "n", Apps: []App{{App: app, Run: run}}}).Print(&b)
	out := b.String()
	if strings.ContainsAny(out, "\x1b\u202e") || strings.Contains(out, "\nrun fake") ||
		!strings.Contains(out, `"x\nrun fake 100%"`) || !strings.Contains(out, `"\x1b[31mred\u202e"`) {
		t.Errorf("summaries:\n%s\nwant the names quoted and escaped", out)
	}
}
