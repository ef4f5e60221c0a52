package bus

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// consumerKey names a durable consumer on a stream.
type consumerKey struct{ stream, durable string }

// needStream records that the bus works with the stream name from now on (Ready checks
// that it exists).
func (b *Bus) needStream(name string) {
	b.readyMu.Lock()
	defer b.readyMu.Unlock()
	if b.streams == nil {
		b.streams = map[string]bool{}
	}
	b.streams[name] = true
}

// needConsumer records that Consume runs the durable consumer on stream
// until the returned func is called (Ready checks that it exists).
func (b *Bus) needConsumer(stream, durable string) (release func()) {
	k := consumerKey{stream, durable}
	b.readyMu.Lock()
	defer b.readyMu.Unlock()
	if b.consumers == nil {
		b.consumers = map[consumerKey]int{}
	}
	b.consumers[k]++
	return func() {
		b.readyMu.Lock()
		defer b.readyMu.Unlock()
		if b.consumers[k]--; b.consumers[k] <= 0 {
			delete(b.consumers, k)
		}
	}
}

// Consuming is the number of consumers Consume is running now.
func (b *Bus) Consuming() int {
	b.readyMu.Lock()
	defer b.readyMu.Unlock()
	return len(b.consumers)
}

// Ready reports whether the bus can do its work now: nil when the
// connection to NATS is up, every stream the bus ensured (EnsureTopology,
// EnsureWorkStream) exists and every consumer Consume is running exists.
// Otherwise its error says what is wrong, in a few words: "disconnected",
// "reconnecting", "stream CODA_TRAJ missing", "consumer judge_x on
// CODA_TRAJ missing". It asks the server (one request for the streams, one
// per consumer), each bounded by ctx and the bus's timeout. It must not be
// called after Close.
func (b *Bus) Ready(ctx context.Context) error {
	if st := b.nc.Status(); st != nats.CONNECTED {
		return errors.New(strings.ToLower(st.String()))
	}
	b.readyMu.Lock()
	streams := make([]string, 0, len(b.streams))
	for s := range b.streams {
		streams = append(streams, s)
	}
	consumers := make([]consumerKey, 0, len(b.consumers))
	for k := range b.consumers {
		consumers = append(consumers, k)
	}
	b.readyMu.Unlock()
	slices.Sort(streams)
	slices.SortFunc(consumers, func(x, y consumerKey) int {
		return strings.Compare(x.stream+"\x00"+x.durable, y.stream+"\x00"+y.durable)
	})

	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if len(streams) > 0 {
		have := map[string]bool{}
		names := b.js.StreamNames(cctx)
		for n := range names.Name() {
			have[n] = true
		}
		if err := names.Err(); err != nil {
			return fmt.Errorf("list streams: %w", err)
		}
		var missing []string
		for _, s := range streams {
			if !have[s] {
				missing = append(missing, s)
			}
		}
		switch len(missing) {
		case 0:
		case 1:
			return fmt.Errorf("stream %s missing", missing[0])
		default:
			return fmt.Errorf("streams %s missing", strings.Join(missing, ", "))
		}
	}
	for _, k := range consumers {
		_, err := b.js.Consumer(cctx, k.stream, k.durable)
		switch {
		case errors.Is(err, jetstream.ErrConsumerNotFound) || errors.Is(err, jetstream.ErrStreamNotFound):
			return fmt.Errorf("consumer %s on %s missing", k.durable, k.stream)
		case err != nil:
			return fmt.Errorf("consumer %s on %s: %w", k.durable, k.stream, err)
		}
	}
	return nil
}
