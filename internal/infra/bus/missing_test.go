package bus_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// Damage to a stream's store (a truncated block file) is not silent: a
// consumer that drains the stream reports the sequences it will never see,
// in its Stats and in a warning naming the range; a consumer that had
// handled them before they were lost reports nothing.
func TestConsumeReportsMessagesLostToStoreDamage(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	b := open(t, dir)
	body := bytes.Repeat([]byte("x"), 1000)
	for i := range 12 {
		publish(t, b, bus.Subject(bus.Raw, "ChimeraX"), fmt.Sprint("m", i), body)
	}
	early := spec("early") // handles every message before the damage
	early.Drain = true
	if _, err := b.Consume(ctx, early, func(context.Context, *bus.Msg) bus.Result { return bus.Ack() }); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	natstest.TruncateStreamBlock(t, filepath.Join(dir, "nats"), bus.StreamName(bus.Raw))

	var logs syncio.Buffer
	claims, err := blob.Open(ctx, filepath.Join(dir, "blobs"), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	b2, err := bus.Open(ctx, bus.Config{DataDir: dir, Claims: claims, Timeout: 5 * time.Second,
		Logger: slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	held := streamMsgs(t, b2, bus.Raw)
	if held == 0 || held >= 12 {
		t.Fatalf("the damaged stream holds %d of 12 messages: the damage did not take", held)
	}
	wantGap := fmt.Sprintf("%d-12", held+1)
	late := spec("late")
	late.Drain = true
	handled := 0
	st, err := b2.Consume(ctx, late, func(context.Context, *bus.Msg) bus.Result { handled++; return bus.Ack() })
	if err != nil {
		t.Fatal(err)
	}
	if uint64(handled) != held || st.Missing.String() != wantGap || st.Missing.Messages() != 12-held {
		t.Fatalf("handled %d, missing %q (%d messages); want %d handled, missing %q", handled, st.Missing, st.Missing.Messages(), held, wantGap)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "missing="+wantGap) || !strings.Contains(l, "stream="+bus.StreamName(bus.Raw)) {
		t.Fatalf("no warning naming the stream and the missing range %s:\n%s", wantGap, l)
	}
	// Reported once: the next run of the same consumer does not again.
	publish(t, b2, bus.Subject(bus.Raw, "ChimeraX"), "after", body)
	st, err = b2.Consume(ctx, late, func(context.Context, *bus.Msg) bus.Result { return bus.Ack() })
	if err != nil || len(st.Missing) != 0 || st.Acked != 1 {
		t.Fatalf("the next run of the consumer: missing %q, %d acked, err %v; want nothing missing, 1 acked", st.Missing, st.Acked, err)
	}
	if n := strings.Count(logs.String(), "missing="); n != 1 {
		t.Fatalf("%d warnings of missing messages, want 1:\n%s", n, logs.String())
	}
	// The consumer that handled them before the damage misses nothing.
	st, err = b2.Consume(ctx, early, func(context.Context, *bus.Msg) bus.Result { return bus.Ack() })
	if err != nil || len(st.Missing) != 0 {
		t.Fatalf("the consumer that handled everything before the damage: missing %q, err %v", st.Missing, err)
	}
}
