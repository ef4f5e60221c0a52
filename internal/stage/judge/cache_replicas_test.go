package judge

import (
	"context"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
)

// The vote cache bucket is created with the topology's replicas
// (--replicas): three on a 3-server cluster.
func TestVoteCacheReplicas(t *testing.T) {
	cl := natstest.StartEmbeddedCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b := pipetest.Bus(t, cl.URL())
	topo := bus.DefaultTopology()
	topo.Replicas = 3
	if _, err := OpenCache(ctx, b, topo, 0); err != nil {
		t.Fatal(err)
	}
	kv, err := b.JetStream().KeyValue(ctx, VoteBucket)
	if err != nil {
		t.Fatal(err)
	}
	if r := natstest.Replicas(ctx, t, kv); r != 3 {
		t.Fatalf("%s created with %d replicas, want 3", VoteBucket, r)
	}
}
