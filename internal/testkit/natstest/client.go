package natstest

import (
	"context"
	"testing"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// JetStream connects to the NATS server(s) at url (comma-separated) with opts and returns the
// JetStream API on that connection, which is closed when the test ends. A failure fails the test.
func JetStream(t testing.TB, url string, opts ...nats.Option) jetstream.JetStream {
	t.Helper()
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		t.Fatalf("natstest: connect to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatalf("natstest: JetStream on %s: %v", url, err)
	}
	return js
}

// Replicas returns how many replicas the stream behind key-value bucket kv
// has. A failure fails the test.
func Replicas(ctx context.Context, t testing.TB, kv jetstream.KeyValue) int {
	t.Helper()
	st, err := kv.Status(ctx)
	if err != nil {
		t.Fatalf("natstest: status of bucket %s: %v", kv.Bucket(), err)
	}
	return st.(*jetstream.KeyValueBucketStatus).StreamInfo().Config.Replicas
}

// Fetching reports whether a consumer of stream has a pull request
// waiting: a worker that consumes it is up and waits for work.
func Fetching(ctx context.Context, js jetstream.JetStream, stream string) bool {
	st, err := js.Stream(ctx, stream)
	if err != nil {
		return false
	}
	l := st.ListConsumers(ctx)
	waiting := false
	for ci := range l.Info() {
		waiting = waiting || ci.NumWaiting > 0
	}
	return l.Err() == nil && waiting
}
