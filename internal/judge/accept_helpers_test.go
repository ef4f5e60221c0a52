package judge

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/bus"
	"github.com/codapipe/codapipe/internal/pipetest"
	"github.com/codapipe/codapipe/pkg/traj"
)

const acceptApp = "ChimeraX"

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// readStream reads every message on subject of stream k with its body.
func readStream(t testing.TB, b *bus.Bus, k bus.Kind, subject string) []pipetest.Message {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	msgs, err := pipetest.ReadStream(ctx, b, k, subject)
	if err != nil {
		t.Fatal(err)
	}
	return msgs
}

// judgedOn reads the judged trajectories of coda.judged.> and fails on
// any that does not decode and validate.
func judgedOn(t testing.TB, b *bus.Bus) ([]*traj.Judged, []pipetest.Message) {
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
	docs, damaged := pipetest.Archived(t, store.Bucket())
	if len(damaged) > 0 {
		t.Fatalf("archive entries that do not decode: %q", damaged)
	}
	return docs
}
