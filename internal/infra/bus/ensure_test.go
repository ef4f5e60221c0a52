package bus_test

import (
	"context"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/nats-io/nats.go/jetstream"
)

// TestEnsureTopologyLeavesOperatorStreams: on a 3-server cluster the
// streams are created with the configured replicas; a later start with the
// default topology (one replica, 30 days) leaves a stream the operator
// changed exactly as it is, and --update-topology applies ours.
func TestEnsureTopologyLeavesOperatorStreams(t *testing.T) {
	cl := natstest.StartEmbeddedCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	b, err := bus.Open(ctx, bus.Config{URL: cl.URL(), Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	info := func(k bus.Kind) jetstream.StreamConfig {
		t.Helper()
		s, err := b.JetStream().Stream(ctx, bus.StreamName(k))
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config
	}

	three := bus.DefaultTopology()
	three.Replicas = 3
	if err := b.EnsureTopology(ctx, three); err != nil {
		t.Fatal(err)
	}
	for _, k := range bus.Kinds {
		if c := info(k); c.Replicas != 3 || c.MaxAge != three.MaxAge[k] {
			t.Fatalf("%s created with replicas %d, max age %v; want 3, %v", k, c.Replicas, c.MaxAge, three.MaxAge[k])
		}
	}
	// The operator keeps raw trajectories a week.
	c := info(bus.Raw)
	c.MaxAge = 7 * 24 * time.Hour
	if _, err := b.JetStream().UpdateStream(ctx, c); err != nil {
		t.Fatal(err)
	}
	// A process started with the defaults (one replica, 30 days) changes
	// nothing.
	if err := b.EnsureTopology(ctx, bus.DefaultTopology()); err != nil {
		t.Fatal(err)
	}
	for _, k := range bus.Kinds {
		want := three.MaxAge[k]
		if k == bus.Raw {
			want = 7 * 24 * time.Hour
		}
		if c := info(k); c.Replicas != 3 || c.MaxAge != want {
			t.Errorf("%s after a default start: replicas %d, max age %v; want 3, %v (left as configured)", k, c.Replicas, c.MaxAge, want)
		}
	}
	// --update-topology applies ours (keeping 3 replicas here).
	upd := three
	upd.Update = true
	if err := b.EnsureTopology(ctx, upd); err != nil {
		t.Fatal(err)
	}
	if c := info(bus.Raw); c.MaxAge != three.MaxAge[bus.Raw] || c.Replicas != 3 {
		t.Errorf("after --update-topology: replicas %d, max age %v; want 3, %v", c.Replicas, c.MaxAge, three.MaxAge[bus.Raw])
	}

	// Key-value buckets: created with the replicas, then left as they are.
	kvc := jetstream.KeyValueConfig{Bucket: "ENSURE_TEST", History: 1}
	kv, err := b.EnsureKeyValue(ctx, three, kvc)
	if err != nil {
		t.Fatal(err)
	}
	if r := natstest.Replicas(ctx, t, kv); r != 3 {
		t.Fatalf("bucket created with %d replicas, want 3", r)
	}
	kv, err = b.EnsureKeyValue(ctx, bus.DefaultTopology(), kvc)
	if err != nil {
		t.Fatal(err)
	}
	if r := natstest.Replicas(ctx, t, kv); r != 3 {
		t.Errorf("bucket after a default start: %d replicas, want 3 (left as configured)", r)
	}
}
