package bus_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/nats-io/nats.go"
)

func TestScanAndGet(t *testing.T) {
	b := open(t, t.TempDir())
	ctx := context.Background()
	subj, other := bus.Subject(bus.Raw, "ChimeraX"), bus.Subject(bus.Raw, "GRASS")
	publish := func(subject, id string, body []byte) uint64 {
		t.Helper()
		h := nats.Header{}
		h.Set("Coda-Test", id)
		ack, err := b.Publish(ctx, subject, id, body, h)
		if err != nil {
			t.Fatal(err)
		}
		return ack.Seq
	}

	// Nothing stored yet: Scan returns at once with nothing.
	n := 0
	if err := b.Scan(ctx, bus.Raw, subj, time.Time{}, func(bus.Stored) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("scan of an empty subject: %d messages, %v", n, err)
	}

	// More than one fetch batch, interleaved with another subject, and
	// one body large enough to travel by claim check.
	const total = 1200
	big := bytes.Repeat([]byte("x"), int(b.MaxPayload())+1)
	seqs := map[string]uint64{}
	var mid time.Time
	for i := range total {
		id := fmt.Sprintf("m%04d", i)
		body := []byte(id)
		if i == 7 {
			body = big
		}
		seqs[id] = publish(subj, id, body)
		if i%3 == 0 {
			publish(other, "o"+id, []byte("other"))
		}
		if i == total/2-1 {
			time.Sleep(20 * time.Millisecond)
			mid = time.Now()
			time.Sleep(20 * time.Millisecond)
		}
	}

	var got []bus.Stored
	if err := b.Scan(ctx, bus.Raw, subj, time.Time{}, func(m bus.Stored) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != total {
		t.Fatalf("scan saw %d messages, want %d", len(got), total)
	}
	for i, m := range got {
		id := fmt.Sprintf("m%04d", i)
		if m.Header.Get("Coda-Test") != id || m.Seq != seqs[id] || m.Time.IsZero() {
			t.Fatalf("message %d: seq %d, header %q, time %v; want %s at seq %d", i, m.Seq, m.Header.Get("Coda-Test"), m.Time, id, seqs[id])
		}
	}

	// From a start time: only the later half.
	got = got[:0]
	if err := b.Scan(ctx, bus.Raw, subj, mid, func(m bus.Stored) error { got = append(got, m); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != total/2 || got[0].Header.Get("Coda-Test") != fmt.Sprintf("m%04d", total/2) {
		t.Fatalf("scan since the middle saw %d messages starting at %q, want %d from m%04d", len(got), got[0].Header.Get("Coda-Test"), total/2, total/2)
	}
	// A start time after the last message: nothing, at once.
	n = 0
	if err := b.Scan(ctx, bus.Raw, subj, time.Now().Add(time.Minute), func(bus.Stored) error { n++; return nil }); err != nil || n != 0 {
		t.Fatalf("scan from the future: %d messages, %v", n, err)
	}

	// fn's error stops the scan and comes back.
	stop := errors.New("stop here")
	n = 0
	if err := b.Scan(ctx, bus.Raw, subj, time.Time{}, func(bus.Stored) error { n++; return stop }); !errors.Is(err, stop) || n != 1 {
		t.Fatalf("scan with a failing fn: %d calls, %v", n, err)
	}

	// Get returns bodies, claim-checked or inline, and the headers.
	for id, want := range map[string][]byte{"m0003": []byte("m0003"), "m0007": big} {
		body, h, err := b.Get(ctx, bus.Raw, seqs[id])
		if err != nil {
			t.Fatalf("get %s: %v", id, err)
		}
		if !bytes.Equal(body, want) || h.Get("Coda-Test") != id {
			t.Fatalf("get %s: %d bytes, header %q", id, len(body), h.Get("Coda-Test"))
		}
	}
	if _, _, err := b.Get(ctx, bus.Raw, 1<<40); err == nil {
		t.Fatal("get of a sequence that does not exist succeeded")
	}
}
