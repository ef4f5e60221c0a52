package natstest_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestClusterStreamSurvivesLeaderKill: on a 3-node cluster of separate processes, an R3
// stream whose leader node is killed (SIGKILL) elects a new leader on another node and keeps
// every message; the killed node restarts on its ports and store and catches up.
func TestClusterStreamSurvivesLeaderKill(t *testing.T) {
	cl := natstest.StartCluster(t, 3)
	if cl.N() != 3 || len(strings.Split(cl.URL(), ",")) != 3 || cl.Name(2) != "n2" {
		t.Fatalf("cluster N %d, URL %q, name %q", cl.N(), cl.URL(), cl.Name(2))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Second)
	defer cancel()
	if _, err := cl.MetaLeader(ctx); err != nil {
		t.Fatal(err)
	}
	js := natstest.JetStream(t, cl.URL(), nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	// retry repeats a request through the election (the harness's own test does not use the
	// bus package's rule, to stay below it).
	retry := func(what string, op func(ctx context.Context) error) {
		t.Helper()
		var err error
		for ctx.Err() == nil {
			rctx, rcancel := context.WithTimeout(ctx, 2*time.Second)
			err = op(rctx)
			rcancel()
			if err == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
		t.Fatalf("%s: %v", what, err)
	}
	retry("create the stream", func(ctx context.Context) error {
		_, err := js.CreateOrUpdateStream(ctx, jetstream.StreamConfig{Name: "T", Subjects: []string{"t.>"}, Replicas: 3, Storage: jetstream.FileStorage})
		return err
	})
	publish := func(from, to int) {
		t.Helper()
		for i := from; i < to; i++ {
			retry("publish", func(ctx context.Context) error {
				_, err := js.Publish(ctx, "t.x", []byte(fmt.Sprint(i)), jetstream.WithMsgID(fmt.Sprint(i)))
				return err
			})
		}
	}
	publish(0, 100)
	old, err := cl.StreamLeader(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	cl.Kill(old)
	if cl.Running(old) {
		t.Fatalf("node %d still running after Kill", old)
	}
	leader, err := cl.StreamLeader(ctx, "T")
	if err != nil {
		t.Fatal(err)
	}
	if leader == old {
		t.Fatalf("stream leader is still the killed node %d", old)
	}
	publish(100, 120) // a repeated id is deduplicated, so a retried publish stores once
	var msgs uint64
	retry("stream info", func(ctx context.Context) error {
		s, err := js.Stream(ctx, "T")
		if err != nil {
			return err
		}
		msgs = s.CachedInfo().State.Msgs
		if s.CachedInfo().Cluster.Leader == cl.Name(old) {
			return errors.New("the killed node still named leader")
		}
		return nil
	})
	if msgs != 120 {
		t.Fatalf("stream holds %d messages after the leader was killed, want 120", msgs)
	}

	cl.Restart(old)
	if err := cl.WaitReady(ctx); err != nil {
		t.Fatal(err)
	}
	// The restarted node catches up: its own /jsz shows all 120 messages.
	for {
		n, err := streamMsgs(ctx, cl.MonitorURL(old), "T")
		if err == nil && n == 120 {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("restarted node %s holds %d messages of T (%v), want 120", cl.Name(old), n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !strings.Contains(cl.Log(old), "restart 1 of "+cl.Name(old)) {
		t.Errorf("node log does not mark the restart")
	}
}

// streamMsgs reads the message count of stream from one node's /jsz.
func streamMsgs(ctx context.Context, monitor, stream string) (uint64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, monitor+"/jsz?accounts=true&streams=true", nil)
	if err != nil {
		return 0, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	var j struct {
		Accounts []struct {
			Streams []struct {
				Name  string `json:"name"`
				State struct {
					Msgs uint64 `json:"messages"`
				} `json:"state"`
			} `json:"stream_detail"`
		} `json:"account_details"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&j); err != nil {
		return 0, err
	}
	for _, a := range j.Accounts {
		for _, s := range a.Streams {
			if s.Name == stream {
				return s.State.Msgs, nil
			}
		}
	}
	return 0, fmt.Errorf("no stream %s on %s", stream, monitor)
}
