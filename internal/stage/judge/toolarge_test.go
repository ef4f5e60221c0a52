package judge

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

// TestJudgeAnswerTooLargeForTheBus (issue 40, "a judge answer too large
// for the bus"): a judge endpoint answers 1.2 MiB, more than NATS takes
// in one message (1 MiB by default), so the answer cannot be kept in the
// vote cache. That is known before writing: each trajectory goes to the
// dead letters once, not after a round of retries, and the summary counts
// it (TooLarge, DeadLettered); no judgement is published.
func TestJudgeAnswerTooLargeForTheBus(t *testing.T) {
	var calls int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls++
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"`+strings.Repeat("y", 6<<18)+`"}}]}`)
	}))
	defer srv.Close()
	nats := natstest.Start(t)
	c := batchCorpus(t) // two trajectories, shared with the race pass's other judge tests
	common := &service.Common{DataDir: t.TempDir(), Store: filepath.Join(c.dir, "blobs")}
	common.NATS.URL = nats.URL()
	_, b, store := pipetest.Open(t, common)
	raw := republish(t, b, c.trajs, "too-large-"+traj.NewID(), 3)
	j := cachedJudge(t, b, common.Topology(), store, EndpointSpec{URL: srv.URL + "/v1", Model: "judge"}, Limits{Backoff: time.Millisecond, Attempts: 1})
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	st, err := Serve(ctx, ServiceConfig{Judge: j, Bus: b, Archive: store, Workers: 2, Drain: true, MaxDeliver: 4,
		RetryDelay: 10 * time.Millisecond, Log: quietLog()})
	if err != nil {
		t.Fatal(err)
	}
	if st.TooLarge != len(raw) || st.DeadLettered != len(raw) || st.Retried != 0 || st.Trajectories() != 0 {
		t.Errorf("too large %d, dead-lettered %d, retried %d, judged %d; want %d, %d, 0, 0", st.TooLarge, st.DeadLettered, st.Retried, st.Trajectories(), len(raw), len(raw))
	}
	if docs, _ := judgedOn(t, b); len(docs) != 0 {
		t.Errorf("%d judgements published", len(docs))
	}
	dead := readStream(t, b, bus.Dead, bus.AllSubjects(bus.Dead))
	if len(dead) != len(raw) {
		t.Errorf("%d dead letters, want one per trajectory (%d)", len(dead), len(raw))
	}
	for _, d := range dead {
		if r := d.Header.Get(bus.HeaderDeadReason); !strings.Contains(r, "payload limit") {
			t.Errorf("dead letter reason %q does not say the payload limit", r)
		}
	}
}
