// Package pipetest is the one simulated-pipeline fixture of the tests: it
// runs `rollout --sim` (and, when asked, `judge --sim --drain`) as the
// commands do, on a data directory with the embedded NATS server and the
// local blob store (or an external NATS server), with a fixed seed, and
// hands back the data directory and what was published.
//
// The simulator is deterministic for a seed whatever VM runs which
// episode, so a Spec names one corpus: a test that needs, say, clean
// successes of two steps or more gets them by choosing the Spec (seed,
// tasks, skill), and checks they are there (Require*) instead of running
// again until they appear.
//
// Shared runs a Spec once per test binary and gives each test its own copy
// of the data directory; call Cleanup from TestMain.
//
// The judge is given as a command (Spec.Judge, judge.Command()) because
// package judge's own tests use this fixture for raw trajectories.
package pipetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/archive"
	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/codasim"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/sim/serve"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/nats-io/nats.go"
)

// Spec says which simulated pipeline to run. Zero fields take the
// defaults named beside them.
type Spec struct {
	App     string   // simulated application (ChimeraX)
	Tasks   []string // ids of the simulator's tasks of App, e.g. "S01" (none: all of App's)
	Samples int      // K, episodes per task (2)
	Group   int      // G, plans per step besides the executed one (2; -1 for 0)
	VMs     int      // simulated VMs (4)
	Seed    int64    // seed of the simulator and of the model requests (1)
	Run     string   // run name (pipetest)
	// Sim is a JSON overlay of the simulator's configuration (planner
	// skill, judge rates, faults; docs/simulator.md), given to both
	// commands. Empty: the simulator's defaults.
	Sim string
	// TimeScale is the wall time per simulated second (0.0005).
	TimeScale float64
	// RolloutArgs are added to rollout's arguments (e.g. --env-retries 0).
	RolloutArgs []string
	// Judge, when set, runs after the rollout as `judge --sim --drain`
	// (pass judge.Command()); JudgeArgs are added to its arguments
	// (default --max-frames 4).
	Judge     *service.Command
	JudgeArgs []string
	// NATS is the URL of an external NATS server; empty runs the embedded
	// one in the data directory.
	NATS string
	// Start is the run's start time (DefaultStart), recorded in the run
	// ledger before rollout runs, as a resumed run would find it: the
	// trajectory ids derive from it, and the judge's sampling seeds from
	// the ids, so a fixed start makes the judged corpus the same on every
	// run of the Spec.
	Start time.Time
}

// A package whose tests run the pipeline runs the simulator in its own
// process: the same servers on loopback that codasim serves.
func init() { codasim.SetInProcess(serve.Start) }

// DefaultStart is the run start of a Spec that names none.
var DefaultStart = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// withDefaults fills the zero fields.
func (s Spec) withDefaults() Spec {
	if s.App == "" {
		s.App = "ChimeraX"
	}
	if s.Samples == 0 {
		s.Samples = 2
	}
	switch s.Group {
	case 0:
		s.Group = 2
	case -1:
		s.Group = 0
	}
	if s.VMs == 0 {
		s.VMs = 4
	}
	if s.Seed == 0 {
		s.Seed = 1
	}
	if s.Run == "" {
		s.Run = "pipetest"
	}
	if s.TimeScale == 0 {
		s.TimeScale = 0.0005
	}
	if s.Start.IsZero() {
		s.Start = DefaultStart
	}
	if s.JudgeArgs == nil {
		s.JudgeArgs = []string{"--max-frames", "4"}
	}
	return s
}

// key names a Spec for Shared.
func (s Spec) key() string {
	judge := ""
	if s.Judge != nil {
		judge = s.Judge.Name + " " + strings.Join(s.JudgeArgs, " ")
	}
	return fmt.Sprintf("%s|%v|%d|%d|%d|%d|%s|%s|%g|%v|%s|%s|%s", s.App, s.Tasks, s.Samples, s.Group, s.VMs, s.Seed, s.Run, s.Sim, s.TimeScale, s.RolloutArgs, judge, s.NATS, s.Start.Format(time.RFC3339Nano))
}

// Pipeline is a finished simulated pipeline.
type Pipeline struct {
	// Dir is the data directory: the embedded NATS server's store (unless
	// Spec.NATS) and the blob store in Dir/blobs.
	Dir  string
	Spec Spec
	// Trajectories are the run's raw trajectories on the stream, sorted by
	// task and sample.
	Trajectories []*traj.Trajectory
	// Judged are the judged trajectories on the stream (Spec.Judge set),
	// sorted likewise.
	Judged []*traj.Judged
}

// Common returns the common settings the commands of the pipeline ran
// with (data directory, NATS URL).
func (p *Pipeline) Common() *service.Common {
	c := &service.Common{DataDir: p.Dir}
	c.NATS.URL = p.Spec.NATS
	return c
}

// StoreDir is the blob store's folder.
func (p *Pipeline) StoreDir() string { return filepath.Join(p.Dir, "blobs") }

// Store opens the blob store.
func (p *Pipeline) Store(t testing.TB) *blob.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := blob.Open(ctx, p.StoreDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// CleanSuccesses are the judged trajectories decided clean successes with
// at least minSteps steps.
func (p *Pipeline) CleanSuccesses(minSteps int) []*traj.Judged {
	var out []*traj.Judged
	for _, jd := range p.Judged {
		if jd.Judgement.Decision == traj.CleanSuccess && len(jd.Trajectory.Steps) >= minSteps {
			out = append(out, jd)
		}
	}
	return out
}

// RequireCleanSuccesses fails the test unless the pipeline holds at least
// n clean successes of minSteps steps or more: the Spec does not give the
// corpus the test was written for (choose another seed or skill).
func (p *Pipeline) RequireCleanSuccesses(t testing.TB, n, minSteps int) []*traj.Judged {
	t.Helper()
	got := p.CleanSuccesses(minSteps)
	if len(got) < n {
		t.Fatalf("pipetest: the corpus of run %q (%s, tasks %v × %d, seed %d) has %d clean successes of %d+ steps, the test needs %d: change the Spec (seed, tasks, skill)",
			p.Spec.Run, p.Spec.App, p.Spec.Tasks, p.Spec.Samples, p.Spec.Seed, len(got), minSteps, n)
	}
	return got
}

// Run runs the pipeline of s in the data directory dir (created when
// missing) and reads back what it published.
func Run(t testing.TB, dir string, s Spec) *Pipeline {
	t.Helper()
	p, err := run(dir, s.withDefaults())
	if err != nil {
		t.Fatalf("pipetest: %v", err)
	}
	return p
}

func run(dir string, s Spec) (*Pipeline, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	inputs, err := os.MkdirTemp("", "codapipe-pipetest-inputs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(inputs)
	tasks := filepath.Join(inputs, "tasks")
	names := make([]string, len(s.Tasks))
	for i, id := range s.Tasks {
		names[i] = strings.ReplaceAll(s.App, " ", "") + "/" + id
	}
	// No names: every task of every app; rollout --app picks App's.
	if err := simtasks.Write(tasks, names...); err != nil {
		return nil, fmt.Errorf("write the simulator's tasks: %w", err)
	}
	common := []string{"--data", dir, "--log-level", "warn"}
	if s.NATS != "" {
		common = append(common, "--nats", s.NATS)
	}
	var simArgs []string
	if s.Sim != "" {
		f := filepath.Join(inputs, "sim.json")
		if err := os.WriteFile(f, []byte(s.Sim), 0o644); err != nil {
			return nil, err
		}
		simArgs = []string{"--sim-config", f}
	}
	if err := startRun(ctx, dir, s); err != nil {
		return nil, fmt.Errorf("record the run's start in the ledger: %w", err)
	}
	args := append(slices.Clone(common), "--sim", "--app", s.App, "--tasks", tasks,
		"--group", strconv.Itoa(s.Group), "--samples", strconv.Itoa(s.Samples), "--run", s.Run,
		"--vms", strconv.Itoa(s.VMs), "--seed", strconv.FormatInt(s.Seed, 10),
		"--time-scale", strconv.FormatFloat(s.TimeScale, 'g', -1, 64))
	args = append(append(args, simArgs...), s.RolloutArgs...)
	if err := runCommand(ctx, rollout.Command(), args); err != nil {
		return nil, err
	}
	if s.Judge != nil {
		args := append(slices.Clone(common), "--sim", "--drain")
		args = append(append(args, simArgs...), s.JudgeArgs...)
		if err := runCommand(ctx, *s.Judge, args); err != nil {
			return nil, err
		}
	}
	p := &Pipeline{Dir: dir, Spec: s}
	if err := p.read(ctx); err != nil {
		return nil, fmt.Errorf("read what the pipeline published: %w", err)
	}
	return p, nil
}

// startRun records the run's start in the run ledger.
func startRun(ctx context.Context, dir string, s Spec) error {
	p := &Pipeline{Dir: dir, Spec: s}
	env := service.NewEnv("pipetest", p.Common(), slog.New(slog.DiscardHandler), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		return err
	}
	runs, err := ledger.Open(ctx, b, env.Common.Topology())
	if err != nil {
		return err
	}
	_, err = runs.Start(ctx, s.Run, s.Start)
	return err
}

// runCommand runs cmd with args as its main function does.
func runCommand(ctx context.Context, cmd service.Command, args []string) error {
	var out, errb bytes.Buffer
	if code := service.MainContext(ctx, cmd, args, &out, &errb); code != 0 {
		return fmt.Errorf("%s %s: exit %d\n%s", cmd.Name, strings.Join(args, " "), code, errb.String())
	}
	return nil
}

// read reads the run's raw trajectories and the judged ones back from the
// streams.
func (p *Pipeline) read(ctx context.Context) error {
	env := service.NewEnv("pipetest", p.Common(), slog.New(slog.DiscardHandler), nil, nil)
	defer env.Close()
	b, err := env.Bus(ctx)
	if err != nil {
		return err
	}
	raw, err := ReadStream(ctx, b, bus.Raw, bus.Subject(bus.Raw, p.Spec.App))
	if err != nil {
		return err
	}
	for _, m := range raw {
		t, err := traj.DecodeTrajectory(m.Body)
		if err != nil {
			return fmt.Errorf("raw message %d: %w", m.Seq, err)
		}
		if t.Run == p.Spec.Run {
			p.Trajectories = append(p.Trajectories, t)
		}
	}
	slices.SortFunc(p.Trajectories, func(a, b *traj.Trajectory) int { return compareEpisodes(a, b) })
	if p.Spec.Judge == nil {
		return nil
	}
	judged, err := ReadStream(ctx, b, bus.Judged, bus.AllSubjects(bus.Judged))
	if err != nil {
		return err
	}
	for _, m := range judged {
		jd, err := traj.DecodeJudged(m.Body)
		if err == nil {
			err = jd.Validate()
		}
		if err != nil {
			return fmt.Errorf("judged message %d: %w", m.Seq, err)
		}
		if jd.Trajectory.Run == p.Spec.Run {
			p.Judged = append(p.Judged, jd)
		}
	}
	slices.SortFunc(p.Judged, func(a, b *traj.Judged) int { return compareEpisodes(&a.Trajectory, &b.Trajectory) })
	return nil
}

func compareEpisodes(a, b *traj.Trajectory) int {
	if c := strings.Compare(a.Task.ID, b.Task.ID); c != 0 {
		return c
	}
	return a.Sample - b.Sample
}

// Message is one message read back from a stream.
type Message struct {
	Seq    uint64
	Header nats.Header
	Body   []byte
}

// ReadStream reads every message on subject of stream k with its body, in
// stream order.
func ReadStream(ctx context.Context, b *bus.Bus, k bus.Kind, subject string) ([]Message, error) {
	var out []Message
	err := b.Scan(ctx, k, subject, time.Time{}, func(s bus.Stored) error {
		body, hdr, err := b.Get(ctx, k, s.Seq)
		if err != nil {
			return err
		}
		out = append(out, Message{Seq: s.Seq, Header: hdr, Body: body})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", subject, err)
	}
	return out, nil
}

var shared struct {
	mu   sync.Mutex
	runs map[string]*sharedRun
	dirs []string
}

type sharedRun struct {
	once sync.Once
	p    *Pipeline
	err  error
}

// Once returns the pipeline of s, run once per test binary, itself: the
// tests that share it may read it and add to its stores under names of
// their own (another run name), and must not change or remove anything in
// it. Shared gives a test a copy it may change.
func Once(t testing.TB, s Spec) *Pipeline {
	t.Helper()
	s = s.withDefaults()
	if s.NATS != "" {
		t.Fatal("pipetest: Once runs on the embedded server only")
	}
	shared.mu.Lock()
	if shared.runs == nil {
		shared.runs = map[string]*sharedRun{}
	}
	r := shared.runs[s.key()]
	if r == nil {
		r = &sharedRun{}
		shared.runs[s.key()] = r
	}
	shared.mu.Unlock()
	r.once.Do(func() {
		dir, err := os.MkdirTemp("", "codapipe-pipetest-")
		if err != nil {
			r.err = err
			return
		}
		shared.mu.Lock()
		shared.dirs = append(shared.dirs, dir)
		shared.mu.Unlock()
		r.p, r.err = run(dir, s)
	})
	if r.err != nil {
		t.Fatalf("pipetest: shared pipeline: %v", r.err)
	}
	return r.p
}

// Shared returns the pipeline of s, run once per test binary, in a copy of
// its data directory that belongs to the test (t.TempDir()). The copy is
// the test's to change. s.NATS must be empty: an external server's
// streams cannot be copied.
func Shared(t testing.TB, s Spec) *Pipeline {
	t.Helper()
	orig := Once(t, s)
	dir := t.TempDir()
	if err := copyDir(dir, orig.Dir); err != nil {
		t.Fatalf("pipetest: copy the shared pipeline: %v", err)
	}
	// Read back from the copy: the test's trajectories are its own too,
	// and the copied streams are known to be readable.
	cp := &Pipeline{Dir: dir, Spec: orig.Spec}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if err := cp.read(ctx); err != nil {
		t.Fatalf("pipetest: read the copy of the shared pipeline: %v", err)
	}
	return cp
}

// copyDir copies src into dst, leaving out the temporary files of an
// interrupted write.
func copyDir(dst, src string) error {
	return filepath.WalkDir(src, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(src, p)
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(target, 0o755)
		}
		if strings.HasPrefix(d.Name(), ".tmp") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o644)
	})
}

// Cleanup removes the shared pipelines' data directories; call it from
// TestMain after m.Run.
func Cleanup() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for _, d := range shared.dirs {
		os.RemoveAll(d)
	}
	shared.dirs = nil
}

// Archived reads the judged archive of bucket: key → document, and the
// keys of the documents that are damaged: they do not decode
// (archive.ErrDamaged) or do not match their recorded checksum
// (blob.Damaged: a truncated record).
func Archived(t testing.TB, b blob.Bucket) (docs map[string]*traj.Judged, damaged []string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	docs = map[string]*traj.Judged{}
	for info, err := range b.List(ctx, archive.Prefix) {
		if err != nil {
			t.Fatal(err)
		}
		jd, _, err := archive.Read(ctx, b, info.Key)
		switch {
		case errors.Is(err, archive.ErrDamaged), blob.Damaged(err):
			damaged = append(damaged, info.Key)
		case err != nil:
			t.Fatal(err)
		default:
			docs[info.Key] = jd
		}
	}
	return docs, damaged
}

// CheckDeadLetters fails the test unless the dead-letter stream of b holds
// exactly the messages of want (message id → what its reason must say,
// each string a part of the reason).
func CheckDeadLetters(t testing.TB, b *bus.Bus, want map[string][]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	dead, err := ReadStream(ctx, b, bus.Dead, bus.AllSubjects(bus.Dead))
	if err != nil {
		t.Fatal(err)
	}
	reasons := map[string]string{}
	for _, m := range dead {
		reasons[m.Header.Get(bus.HeaderDeadMsgID)] = m.Header.Get(bus.HeaderDeadReason)
	}
	for id, parts := range want {
		r, ok := reasons[id]
		if !ok {
			t.Errorf("message %s was not dead-lettered (dead letters: %v)", id, reasons)
			continue
		}
		for _, p := range parts {
			if !strings.Contains(r, p) {
				t.Errorf("the dead-letter reason of %s lacks %q: %s", id, p, r)
			}
		}
	}
	if len(dead) != len(want) {
		t.Errorf("%d dead letters, want %d: %v", len(dead), len(want), reasons)
	}
}

// Open opens the bus and the blob store of common as a command would
// (service.Env), for a test to publish and read; the Env is closed at the
// end of the test, or before when the test closes it (to let a command
// open the embedded server of the same data directory).
func Open(t testing.TB, common *service.Common) (*service.Env, *bus.Bus, *blob.Store) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	env := service.NewEnv("test", common, slog.New(slog.DiscardHandler), nil, nil)
	t.Cleanup(env.Close)
	var store *blob.Store
	b, err := env.Bus(ctx)
	if err == nil {
		store, err = env.Store(ctx)
	}
	if err != nil {
		t.Fatal(err)
	}
	return env, b, store
}

// Bus connects to the NATS server at url for the rest of the test.
func Bus(t testing.TB, url string) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := bus.Open(ctx, bus.Config{URL: url, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// ReadJSON decodes the JSON file at path (a command's --summary) into v,
// failing the test when it cannot.
func ReadJSON(t testing.TB, path string, v any) {
	t.Helper()
	body, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(body, v)
	}
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
}
