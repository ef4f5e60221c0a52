package chaos

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/nats-io/nats.go"
)

// TestAccountFindsLostAndDuplicated: the accounting is not a table of
// zeros. On a real server: an episode without a trajectory is lost, an
// episode with two trajectories is duplicated, a trajectory without a
// judgement or with one that does not decode is lost, a judgement without
// its archive record is lost, and a
// rollout dead letter accounts for its episode.
func TestAccountFindsLostAndDuplicated(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	srv := natstest.Start(t)
	b, err := bus.Open(ctx, bus.Config{URL: srv.URL(), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	archive, err := blob.OpenBucket(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	const app, run = "KAlgebra", "r1"
	publish := func(subject, id, task string, sample int, extra nats.Header) {
		t.Helper()
		h := nats.Header{}
		h.Set(headerRun, run)
		h.Set(headerTask, task)
		h.Set(headerSample, strconv.Itoa(sample))
		h.Set(headerOutcome, "finished")
		for k, v := range extra {
			h[k] = v
		}
		if _, err := b.Publish(ctx, subject, id, []byte("{}"), h); err != nil {
			t.Fatal(err)
		}
	}
	raw := bus.Subject(bus.Raw, app)
	publish(raw, "A", "T1", 0, nil)
	publish(raw, "B", "T2", 0, nil)
	publish(raw, "B2", "T2", 0, nil) // T2#0 run twice under two ids
	other := nats.Header{headerRun: {"another-run"}}
	publish(raw, "X", "T3", 0, other) // another run's: not counted
	// T3#0: nothing (lost). T4#0: rollout dead-lettered it as invalid.
	publish(bus.DeadSubject(raw), "D", "T4", 0, nats.Header{bus.HeaderDeadReason: {"trajectory invalid: steps[0]: ..."}})
	// A judgement of A only, with no archive record.
	if _, err := b.Publish(ctx, bus.Subject(bus.Judged, app), "A.v1", []byte("{}"), nil); err != nil {
		t.Fatal(err)
	}

	rep, err := Account(ctx, Config{Bus: b, Archive: archive,
		Runs: []Run{{Name: run, App: app, Tasks: []string{"T1", "T2", "T3", "T4"}, Samples: 1}}})
	if err != nil {
		t.Fatal(err)
	}
	var out strings.Builder
	rep.Print(&out)
	t.Logf("\n%s", out.String())
	for _, c := range []struct {
		stage                                        string
		planned, present, accounted, lost, duplicate int
	}{
		{"trajectories", 4, 2, 1, 1, 1},
		{"judgements", 3, 0, 0, 3, 0}, // A's judgement does not decode
		{"archive", 1, 0, 0, 1, 0},
	} {
		s := rep.Stage(c.stage)
		if s == nil {
			t.Fatalf("no stage %s", c.stage)
		}
		got := [5]int{s.Planned, s.Present, s.Accounted, s.Lost, s.Duplicated}
		if want := [5]int{c.planned, c.present, c.accounted, c.lost, c.duplicate}; got != want {
			t.Errorf("%s: planned/present/accounted/lost/duplicated = %v, want %v", c.stage, got, want)
		}
	}
	if rep.OK() {
		t.Error("OK() with lost and duplicated items")
	}
	if len(rep.DeadLetters) != 1 || !strings.Contains(rep.DeadLetters[0].Reason, "invalid") {
		t.Errorf("dead letters %+v, want rollout's one", rep.DeadLetters)
	}
	for _, want := range []string{"trajectories lost (1): r1/T3#0", "r1/T2#0=B,B2", "judgements lost (2)", "judged messages unreadable (1): A.v1", "archive records missing"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report does not say %q", want)
		}
	}
}
