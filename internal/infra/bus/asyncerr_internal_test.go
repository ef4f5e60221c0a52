package bus

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

// syncBuffer is a bytes.Buffer for a logger written from the client's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// TestAsyncErrorsAreLogged: an asynchronous error of the NATS client (here
// a slow consumer: a subscription whose pending limit is exceeded) goes
// through the bus's logger, in its format, not raw to stderr.
func TestAsyncErrorsAreLogged(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var logs syncBuffer
	b, err := Open(ctx, Config{DataDir: t.TempDir(), Name: "async-test", Logger: slog.New(slog.NewJSONHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	release := make(chan struct{})
	sub, err := b.nc.Subscribe("async.test", func(*nats.Msg) { <-release })
	if err != nil {
		t.Fatal(err)
	}
	defer func() { close(release); sub.Unsubscribe() }()
	if err := sub.SetPendingLimits(1, 1<<20); err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if err := b.nc.Publish("async.test", []byte("x")); err != nil {
			t.Fatal(err)
		}
	}
	if err := b.nc.Flush(); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(logs.String(), `"msg":"nats: asynchronous error"`) {
		if ctx.Err() != nil {
			t.Fatalf("no log record of the slow consumer; the log holds:\n%s", logs.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if !strings.Contains(logs.String(), "slow consumer") || !strings.Contains(logs.String(), `"subject":"async.test"`) {
		t.Errorf("the record does not name the error and the subject:\n%s", logs.String())
	}
}
