package bus

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestIsTransient(t *testing.T) {
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"timeout", fmt.Errorf("publish: %w", nats.ErrTimeout), true},
		{"deadline", context.DeadlineExceeded, true},
		{"no responders", nats.ErrNoResponders, true},
		{"no stream response", jetstream.ErrNoStreamResponse, true},
		{"reconnecting", nats.ErrConnectionReconnecting, true},
		{"cluster unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008}, true},
		{"stream offline", &jetstream.APIError{Code: 500, ErrorCode: 10118}, true},
		{"no suitable peers", &jetstream.APIError{Code: 400, ErrorCode: 10005}, true},
		{"duplicate id in process", &jetstream.APIError{Code: 409, ErrorCode: 10158}, true},
		{"stream not found", jetstream.ErrStreamNotFound, false},
		{"key exists", jetstream.ErrKeyExists, false},
		{"wrong last sequence", &jetstream.APIError{Code: 400, ErrorCode: 10071}, false},
		{"cancelled", context.Canceled, false},
		{"other", errors.New("boom"), false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := IsTransient(c.err); got != c.want {
				t.Errorf("IsTransient(%v) = %v, want %v", c.err, got, c.want)
			}
		})
	}
}

func TestRetryTransient(t *testing.T) {
	t.Run("transient then success", func(t *testing.T) {
		n, retries := 0, 0
		err := RetryTransient(context.Background(), time.Minute, func(context.Context) error {
			if n++; n < 3 {
				return nats.ErrNoResponders
			}
			return nil
		}, func(int, error) { retries++ })
		if err != nil || n != 3 || retries != 2 {
			t.Fatalf("err %v after %d calls, %d retries; want nil after 3 calls, 2 retries", err, n, retries)
		}
	})
	t.Run("permanent error returns at once", func(t *testing.T) {
		n := 0
		err := RetryTransient(context.Background(), time.Minute, func(context.Context) error { n++; return jetstream.ErrKeyExists }, nil)
		if !errors.Is(err, jetstream.ErrKeyExists) || n != 1 {
			t.Fatalf("err %v after %d calls; want ErrKeyExists after 1", err, n)
		}
	})
	t.Run("budget spent", func(t *testing.T) {
		err := RetryTransient(context.Background(), 300*time.Millisecond, func(context.Context) error { return nats.ErrTimeout }, nil)
		if !errors.Is(err, ErrRetryBudget) || !errors.Is(err, nats.ErrTimeout) {
			t.Fatalf("err %v; want ErrRetryBudget wrapping nats.ErrTimeout", err)
		}
	})
	t.Run("cancelled context", func(t *testing.T) {
		ctx, cancel := context.WithCancel(context.Background())
		n := 0
		err := RetryTransient(ctx, time.Minute, func(context.Context) error {
			n++
			cancel()
			return nats.ErrTimeout
		}, nil)
		if !errors.Is(err, nats.ErrTimeout) || n != 1 {
			t.Fatalf("err %v after %d calls; want the op's error after 1", err, n)
		}
	})
}
