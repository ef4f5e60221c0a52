package rollout

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/ledger"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// --verify keeps an episode whose trajectory the stream lost after it was
// judged (its judgement stands; running it again would give its group a
// second trajectory), and runs the unjudged lost one again.
func TestVerifyKeepsEpisodesJudgedBeforeTheLoss(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := openBus(ctx, t)
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	l, err := ledger.Open(ctx, b, bus.DefaultTopology())
	if err != nil {
		t.Fatal(err)
	}
	const run = "verify-judged"
	judgedEp, lostEp := ledger.EpisodeKey{Task: "KAlgebra/S01", Sample: 0}, ledger.EpisodeKey{Task: "KAlgebra/S01", Sample: 1}
	done := map[ledger.EpisodeKey]ledger.Record{judgedEp: {ID: "t-judged"}, lostEp: {ID: "t-lost"}}
	for k, r := range done {
		if err := l.MarkDone(ctx, run, k, r, false); err != nil {
			t.Fatal(err)
		}
	}
	want := map[ledger.EpisodeKey]bool{judgedEp: true, lostEp: true}
	var asked []string
	judged := func(_ context.Context, r ledger.Record) (bool, error) {
		asked = append(asked, r.ID)
		return r.ID == "t-judged", nil
	}
	_, lost, err := reconcile(ctx, b, l, bus.Subject(bus.Raw, "KAlgebra"), run, "ckpt", time.Now(), want, done, true, judged, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if len(lost) != 1 || lost[0] != lostEp {
		t.Fatalf("lost = %v, want only %v (asked about %v)", lost, lostEp, asked)
	}
	if _, ok := done[judgedEp]; !ok {
		t.Errorf("the judged episode was taken out of done")
	}
	if _, ok, err := l.Published(ctx, run, judgedEp); err != nil || !ok {
		t.Errorf("the judged episode's ledger record: present %v (%v), want kept", ok, err)
	}
	if _, ok, err := l.Published(ctx, run, lostEp); err != nil || ok {
		t.Errorf("the lost episode's ledger record: present %v (%v), want forgotten", ok, err)
	}
}

// --verify refuses a run older than the raw stream's age limit: what is
// missing may have expired.
func TestVerifyRefusesRunsOlderThanTheStreamKeeps(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b := openBus(ctx, t)
	topo := bus.DefaultTopology()
	if err := b.EnsureTopology(ctx, topo); err != nil {
		t.Fatal(err)
	}
	age := topo.MaxAge[bus.Raw]
	if age <= 0 {
		t.Skip("the raw stream has no age limit in the default topology")
	}
	if err := checkAgeLimit(ctx, b, "young", time.Now().Add(-age/2)); err != nil {
		t.Errorf("a run younger than the age limit: %v", err)
	}
	if err := checkAgeLimit(ctx, b, "old", time.Now().Add(-age-time.Hour)); err == nil {
		t.Errorf("a run older than the age limit (%v) was not refused", age)
	}
}

func openBus(ctx context.Context, t *testing.T) *bus.Bus {
	t.Helper()
	b, err := bus.Open(ctx, bus.Config{URL: natstest.Start(t).URL(), Name: t.Name()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}
