package rollout

// Helpers of the acceptance tests of issue 6 (accept_*_test.go): they run
// the real rollout.Run on the SIMULATOR with the embedded NATS server and
// the local blob store, and read back what was published.

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	simtasks "github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/internal/stage/sched"
	"github.com/codapipe/codapipe/pkg/traj"
	"github.com/codapipe/codapipe/pkg/uitars"
	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// acceptApp is the app the acceptance tests run: its simulated tasks have
// one setup item (launch) and short oracle plans, so episodes are short.
const acceptApp = "KAlgebra"

// simTaskDir writes the simulator's task files for the given ids of app
// (e.g. "S01") into a fresh ScienceBoard-layout folder and returns it, so a
// run can use a few tasks instead of all of them (Config.Tasks).
func simTaskDir(t testing.TB, app string, ids ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := simtasks.Write(dir, taskNames(app, ids)...); err != nil {
		t.Fatal(err)
	}
	return dir
}

// taskNames are the full task ids of the given ids of app ("S01" →
// "KAlgebra/S01"), as the task files and the ledger name them.
func taskNames(app string, ids []string) []string {
	names := make([]string, len(ids))
	for i, id := range ids {
		names[i] = strings.ReplaceAll(app, " ", "") + "/" + id
	}
	return names
}

// writeSimConfig writes a sim.WorldConfig overlay (JSON, decoded over
// sim.DefaultWorldConfig by Run) to a temp file and returns its path.
func writeSimConfig(t testing.TB, doc string) string {
	t.Helper()
	var probe map[string]any
	if err := json.Unmarshal([]byte(doc), &probe); err != nil {
		t.Fatalf("sim config is not JSON: %v\n%s", err, doc)
	}
	p := filepath.Join(t.TempDir(), "sim.json")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// logRecord is one captured log record with its attributes as text.
type logRecord struct {
	Level slog.Level
	Msg   string
	Attrs map[string]string
}

// logCapture is a slog.Handler that keeps every record (of level >= min)
// in memory; the rollout's logs are not printed (go test -v stays readable).
type logCapture struct {
	mu    *sync.Mutex
	recs  *[]logRecord
	attrs []slog.Attr
	min   slog.Level
}

func newLogCapture(min slog.Level) (*slog.Logger, *logCapture) {
	h := &logCapture{mu: &sync.Mutex{}, recs: &[]logRecord{}, min: min}
	return slog.New(h), h
}

func (h *logCapture) Enabled(_ context.Context, l slog.Level) bool { return l >= h.min }

func (h *logCapture) Handle(_ context.Context, r slog.Record) error {
	rec := logRecord{Level: r.Level, Msg: r.Message, Attrs: map[string]string{}}
	for _, a := range h.attrs {
		rec.Attrs[a.Key] = a.Value.String()
	}
	r.Attrs(func(a slog.Attr) bool {
		rec.Attrs[a.Key] = a.Value.String()
		return true
	})
	h.mu.Lock()
	*h.recs = append(*h.recs, rec)
	h.mu.Unlock()
	return nil
}

func (h *logCapture) WithAttrs(as []slog.Attr) slog.Handler {
	c := *h
	c.attrs = append(append([]slog.Attr(nil), h.attrs...), as...)
	return &c
}

func (h *logCapture) WithGroup(string) slog.Handler { return h }

// records returns the captured records whose message is msg.
func (h *logCapture) records(msg string) []logRecord {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []logRecord
	for _, r := range *h.recs {
		if r.Msg == msg {
			out = append(out, r)
		}
	}
	return out
}

// dump logs the captured records of level >= min (for failures).
func (h *logCapture) dump(t *testing.T, min slog.Level) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, r := range *h.recs {
		if r.Level >= min {
			t.Logf("log %s %s %v", r.Level, r.Msg, r.Attrs)
		}
	}
}

// acceptCfg is what an acceptance test runs: the command's options, its
// common flags and a logger.
type acceptCfg struct {
	Options
	Common *service.Common
	Log    *slog.Logger
}

// acceptConfig is a small simulated run of acceptApp in dataDir: few
// tasks, small G, a fast simulated clock.
func acceptConfig(dataDir, tasks, run string, log *slog.Logger) acceptCfg {
	seed := int64(1)
	return acceptCfg{
		Common: &service.Common{DataDir: dataDir},
		Log:    log,
		Options: Options{
			App:        acceptApp,
			Group:      2,
			Samples:    1,
			Tasks:      tasks,
			Run:        run,
			VMs:        2,
			Sim:        true,
			Seed:       &seed,
			TimeScale:  0.001,
			EnvRetries: 2,
			Schedule:   sched.Dynamic,
		},
	}
}

// execute runs cfg as the rollout command does (Execute with an Env over
// cfg's common flags) and closes the Env.
func execute(ctx context.Context, cfg acceptCfg) (*Summary, error) {
	env := service.NewEnv("rollout", cfg.Common, cfg.Log, nil, nil)
	defer env.Close()
	return Execute(ctx, env, cfg.Options)
}

// openTestBus opens the bus on dataDir: the embedded NATS server on the
// same file store Run uses (Run must not be running on it).
func openTestBus(t *testing.T, dataDir string) *bus.Bus {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	log, _ := newLogCapture(slog.LevelError)
	b, err := bus.Open(ctx, bus.Config{DataDir: dataDir, Name: "accept-test", Logger: log})
	if err != nil {
		t.Fatalf("open the bus on %s: %v", dataDir, err)
	}
	return b
}

// published is one message of coda.traj.<app>.
type published struct {
	Seq    uint64
	Header nats.Header
	Body   []byte
	Traj   *traj.Trajectory
	Task   string // Coda-Task header
	Sample int    // Coda-Sample header
}

// readPublished reads every message of coda.traj.<app> with an ordered
// consumer on CODA_TRAJ and decodes it (bodies kept in the claim store are
// fetched from store). A transient error (a stream leader election on a
// loaded cluster) reads again from the start.
func readPublished(t *testing.T, b *bus.Bus, store *blob.Store, app string) []published {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []published
	if err := bus.RetryTransient(ctx, 0, func(ctx context.Context) error {
		var err error
		out, err = readPublishedOnce(ctx, b, store, app)
		return err
	}, func(attempt int, err error) { t.Logf("read %s: attempt %d: %v", app, attempt, err) }); err != nil {
		t.Fatal(err)
	}
	return out
}

func readPublishedOnce(ctx context.Context, b *bus.Bus, store *blob.Store, app string) ([]published, error) {
	subject := bus.Subject(bus.Raw, app)
	n, err := b.SubjectCount(ctx, bus.Raw, subject)
	if err != nil {
		return nil, fmt.Errorf("count %s: %w", subject, err)
	}
	s, err := b.JetStream().Stream(ctx, bus.StreamName(bus.Raw))
	if err != nil {
		return nil, err
	}
	c, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("ordered consumer on %s: %w", subject, err)
	}
	var out []published
	for uint64(len(out)) < n {
		batch, err := c.Fetch(int(n)-len(out), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return nil, fmt.Errorf("fetch %s: %w", subject, err)
		}
		got := 0
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return nil, err
			}
			body := m.Data()
			if ref := m.Headers().Get(bus.HeaderClaim); ref != "" {
				if body, err = store.GetBytes(ctx, strings.TrimPrefix(ref, "sha256:")); err != nil {
					return nil, fmt.Errorf("claim %s: %w", ref, err)
				}
			}
			p := published{Seq: md.Sequence.Stream, Header: m.Headers(), Body: body, Task: m.Headers().Get("Coda-Task")}
			if p.Sample, err = strconv.Atoi(m.Headers().Get("Coda-Sample")); err != nil {
				return nil, fmt.Errorf("message %d: Coda-Sample header %q: %w", p.Seq, m.Headers().Get("Coda-Sample"), err)
			}
			if p.Traj, err = traj.DecodeTrajectory(body); err != nil {
				return nil, fmt.Errorf("message %d does not decode: %w", p.Seq, err)
			}
			out = append(out, p)
		}
		if err := batch.Error(); err != nil {
			return nil, fmt.Errorf("fetch %s: %w", subject, err)
		}
		if got == 0 {
			return nil, fmt.Errorf("stream says %d messages on %s, read %d", n, subject, len(out))
		}
	}
	return out, nil
}

// openStore opens the local blob store of dataDir.
func openStore(t *testing.T, dataDir string) *blob.Store {
	t.Helper()
	st, err := blob.Open(context.Background(), filepath.Join(dataDir, "blobs"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// withoutPrediction is a ledger record without the length prediction
// rollout adds to ledger.RecordOf's (ledger.Record.PredictedS).
func withoutPrediction(r ledger.Record) ledger.Record {
	r.PredictedS, r.PredictedFromHistory = 0, false
	return r
}

// checkSummaryAgrees compares the summary of a run that published every
// trajectory on the stream (no earlier invocation) with the summary that a
// resumed run computes from the stream alone — each trajectory's ledger
// record, as reconcile writes it — so the live counts must be what was
// published; and it counts two figures straight off the trajectories: the
// outcomes, and the successes (an evaluator that passed). summarize's
// arithmetic is checked against hand-computed figures in summary_test.go.
func checkSummaryAgrees(t *testing.T, sum *Summary, ps []published) {
	t.Helper()
	done := map[ledger.EpisodeKey]ledger.Record{}
	for _, p := range ps {
		done[ledger.EpisodeKey{Task: p.Traj.Task.ID, Sample: p.Traj.Sample}] = ledger.RecordOf(p.Traj)
	}
	ec, err := uitars.ParseCoords(sum.ExecutorCoords)
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Run: sum.Run, App: sum.App, Samples: sum.Samples, Group: sum.Group, Tasks: make([]scienceboard.Task, sum.Tasks), ExecutorCoords: ec}
	want := summarize(cfg, nil, done, 0, vmpool.Stats{})
	check := func(name string, got, want any) {
		t.Helper()
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("summary %s = %v, the stream says %v", name, got, want)
		}
	}
	outcomes, passed := map[string]int{}, 0
	for _, p := range ps {
		outcomes[string(p.Traj.Outcome.Kind)]++
		if p.Traj.Eval != nil && p.Traj.Eval.Passed {
			passed++
		}
	}
	check("outcomes (counted)", sum.Outcomes, outcomes)
	check("successes (counted)", sum.Success, passed)
	check("episodes", sum.Episodes, len(ps))
	check("trajectories_on_stream", sum.OnStream, len(ps))
	check("env_errors", sum.EnvErrors, want.EnvErrors)
	check("unscored", sum.Unscored, want.Unscored)
	check("successes", sum.Success, want.Success)
	check("outcomes", sum.Outcomes, want.Outcomes)
	check("grounding", sum.Grounding, want.Grounding)
	check("publish_failures", sum.PublishFailures, 0)
	check("lease_failures", sum.LeaseFailures, 0)
	for _, f := range []struct {
		name      string
		got, want float64
	}{{"success_rate", sum.Rate, want.Rate}, {"average_at_k", sum.AverageAtK, want.AverageAtK}, {"pass_at_k", sum.PassAtK, want.PassAtK}, {"mean_steps", sum.MeanSteps, want.MeanSteps}} {
		if math.Abs(f.got-f.want) > 1e-9 {
			t.Errorf("summary %s = %v, the stream says %v", f.name, f.got, f.want)
		}
	}
}

// runWithin runs Run under a deadline; a Run that does not return in time
// fails the test (nothing may hang).
func runWithin(t *testing.T, d time.Duration, cfg acceptCfg) (*Summary, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	start := time.Now()
	sum, err := execute(ctx, cfg)
	if ctx.Err() != nil {
		t.Fatalf("Run did not finish within %v (err %v)", d, err)
	}
	t.Logf("Run %s: %v, err %v", cfg.Run, time.Since(start).Round(time.Millisecond), err)
	return sum, err
}

// runOK is runWithin 2 minutes for a Run that must succeed: a failure
// fails the test, with the warnings logs holds (nil: none).
func runOK(t *testing.T, cfg acceptCfg, logs *logCapture) *Summary {
	t.Helper()
	sum, err := runWithin(t, 2*time.Minute, cfg)
	if err != nil {
		if logs != nil {
			logs.dump(t, slog.LevelWarn)
		}
		t.Fatalf("Run %s: %v", cfg.Run, err)
	}
	return sum
}
