package bus_test

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// A consumer created with a StartTime delivers only what was stored from
// then on; once it exists it keeps that start, whatever a later Consume
// asks (JetStream cannot move it); one created without a StartTime
// delivers the whole history. ConsumerExists tells new from existing.
func TestConsumerStartTime(t *testing.T) {
	b := open(t, t.TempDir())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	subj := bus.Subject(bus.Raw, "ChimeraX")
	pub := func(id string) {
		t.Helper()
		publish(t, b, subj, id, []byte(id))
	}
	drain := func(durable string, start time.Time) []string {
		t.Helper()
		var mu sync.Mutex
		var got []string
		s := spec(durable)
		s.Drain, s.StartTime = true, start
		if _, err := b.Consume(ctx, s, func(_ context.Context, m *bus.Msg) bus.Result {
			mu.Lock()
			got = append(got, m.ID)
			mu.Unlock()
			return bus.Ack()
		}); err != nil {
			t.Fatal(err)
		}
		slices.Sort(got)
		return got
	}
	exists := func(durable string) bool {
		t.Helper()
		ok, err := b.ConsumerExists(ctx, bus.StreamName(bus.Raw), durable)
		if err != nil {
			t.Fatal(err)
		}
		return ok
	}
	pub("old")
	mid := time.Now()
	pub("new")
	if exists("fresh") {
		t.Fatal("ConsumerExists says a consumer never created exists")
	}
	steps := []struct {
		name    string
		durable string
		start   time.Time
		publish string
		want    []string
	}{
		{"created with a start", "fresh", mid, "", []string{"new"}},
		{"existing keeps its start", "fresh", time.Time{}, "later", []string{"later"}},
		{"created without a start takes the history", "all", time.Time{}, "", []string{"later", "new", "old"}},
		{"an earlier start asked later changes nothing", "fresh", mid.Add(-time.Hour), "", nil},
	}
	for _, st := range steps {
		if st.publish != "" {
			pub(st.publish)
		}
		if got := drain(st.durable, st.start); !slices.Equal(got, st.want) {
			t.Errorf("%s: delivered %q, want %q", st.name, got, st.want)
		}
	}
	if !exists("fresh") || !exists("all") {
		t.Error("ConsumerExists does not see the consumers made")
	}
}
