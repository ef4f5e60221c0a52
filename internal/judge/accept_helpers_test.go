package judge

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/codapipe/codapipe/internal/archive"
	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/rollout"
	"github.com/codapipe/codapipe/internal/sched"
	"github.com/codapipe/codapipe/internal/service"
	"github.com/codapipe/codapipe/pkg/traj"
)

const acceptApp = "ChimeraX"

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// simConfigFile writes a sim.WorldConfig overlay (JSON) to a temp file.
func simConfigFile(t testing.TB, doc string) string {
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

// rolloutOptions are a small simulated rollout of acceptApp.
func rolloutOptions(run string, samples int) rollout.Options {
	seed := int64(1)
	return rollout.Options{
		App: acceptApp, Group: 1, Samples: samples, Run: run, VMs: 4, Sim: true, Seed: &seed,
		TimeScale: 0.0005, EnvRetries: 0, Schedule: sched.Dynamic,
	}
}

// produce runs a simulated rollout as `rollout --sim` does on common (the
// embedded NATS server in its data directory unless it names a URL) and
// returns the trajectories it published, in stream order.
func produce(t testing.TB, common *service.Common, o rollout.Options) []*traj.Trajectory {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env := service.NewEnv("rollout", common, quietLog(), nil, nil)
	sum, err := rollout.Execute(ctx, env, o)
	if err != nil {
		env.Close()
		t.Fatalf("rollout: %v", err)
	}
	b, err := env.Bus(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var out []*traj.Trajectory
	for _, m := range readStream(t, b, bus.Raw, bus.Subject(bus.Raw, o.App)) {
		tr, err := traj.DecodeTrajectory(m.Body)
		if err != nil {
			t.Fatal(err)
		}
		if tr.Run == o.Run {
			out = append(out, tr)
		}
	}
	env.Close()
	if len(out) != sum.Episodes {
		t.Fatalf("rollout: %d episodes but %d trajectories on the stream", sum.Episodes, len(out))
	}
	return out
}

// stored is one message read back from a stream.
type stored struct {
	Seq    uint64
	Header nats.Header
	Body   []byte
}

// readStream reads every message on subject of stream k with its body.
func readStream(t testing.TB, b *bus.Bus, k bus.Kind, subject string) []stored {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	var out []stored
	err := b.Scan(ctx, k, subject, time.Time{}, func(s bus.Stored) error {
		body, hdr, err := b.Get(ctx, k, s.Seq)
		if err != nil {
			return err
		}
		out = append(out, stored{Seq: s.Seq, Header: hdr, Body: body})
		return nil
	})
	if err != nil {
		t.Fatalf("read %s: %v", subject, err)
	}
	return out
}

// judgedOn reads the judged trajectories of coda.judged.> and fails on
// any that does not decode and validate.
func judgedOn(t testing.TB, b *bus.Bus) ([]*traj.Judged, []stored) {
	t.Helper()
	msgs := readStream(t, b, bus.Judged, bus.AllSubjects(bus.Judged))
	var out []*traj.Judged
	for _, m := range msgs {
		doc, err := traj.DecodeJudged(m.Body)
		if err == nil {
			err = doc.Validate()
		}
		if err != nil {
			t.Fatalf("judged message %d: %v", m.Seq, err)
		}
		out = append(out, doc)
	}
	return out, msgs
}

// archived reads the judged archive of store: key → document.
func archived(t testing.TB, store *blob.Store) map[string]*traj.Judged {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out := map[string]*traj.Judged{}
	for info, err := range store.Bucket().List(ctx, archive.Prefix) {
		if err != nil {
			t.Fatal(err)
		}
		rc, _, err := store.Bucket().Get(ctx, info.Key)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(rc)
		rc.Close()
		if err != nil {
			t.Fatal(err)
		}
		doc, err := traj.DecodeJudged(body)
		if err != nil {
			t.Fatalf("archive %s: %v", info.Key, err)
		}
		out[info.Key] = doc
	}
	return out
}
