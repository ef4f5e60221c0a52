package service

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
)

// get returns the status and trimmed body of GET url (status 0 and the
// error as body when the request fails).
func get(url string) (int, string) {
	c := &http.Client{Timeout: 5 * time.Second}
	resp, err := c.Get(url)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(body))
}

// metricsAddr waits for the "metrics" record Main logs to errb and
// returns its address.
func metricsAddr(t *testing.T, errb *syncio.Buffer) string {
	t.Helper()
	var addr string
	poll.Until(t, "the metrics address in the log", 30*time.Second, func() bool {
		for _, line := range strings.Split(errb.String(), "\n") {
			var rec map[string]any
			if json.Unmarshal([]byte(line), &rec) == nil && rec["msg"] == "metrics" {
				addr, _ = rec["addr"].(string)
			}
		}
		return addr != ""
	})
	return addr
}

// TestHealthAndReadiness runs a consumer command through Main with
// --metrics-addr against a real NATS server and follows /healthz and
// /readyz through its life: not ready before it connects, ready while
// connected with its streams and consumer, not ready while NATS is down,
// ready again once NATS is back, not ready when its consumer or a stream
// is deleted.
func TestHealthAndReadiness(t *testing.T) {
	ns := natstest.Start(t)
	const durable = "health_test"
	connect := make(chan struct{})
	cmd := Command{
		Name: "t", Common: true, Consumer: true,
		Run: func(ctx context.Context, env *Env) error {
			select {
			case <-connect:
			case <-ctx.Done():
				return nil
			}
			b, err := env.Bus(ctx)
			if err != nil {
				return err
			}
			_, err = b.Consume(ctx, bus.ConsumerSpec{Stream: bus.StreamName(bus.Raw), Durable: durable,
				FetchWait: 100 * time.Millisecond, ShutdownGrace: time.Second},
				func(context.Context, *bus.Msg) bus.Result { return bus.Ack() })
			return err
		},
	}
	ctx, cancel := context.WithCancel(context.Background())
	var errb syncio.Buffer
	exited := make(chan int, 1)
	go func() { // owned by the test: cancel ends it, waited for below
		exited <- MainContext(ctx, cmd, []string{"--metrics-addr", "127.0.0.1:0", "--data", t.TempDir(),
			"--nats", ns.URL()}, io.Discard, &errb)
	}()
	defer func() {
		cancel()
		select {
		case code := <-exited:
			if code != 0 {
				t.Errorf("exit %d: %s", code, errb.String())
			}
		case <-time.After(30 * time.Second):
			t.Error("the command did not return")
		}
	}()
	base := "http://" + metricsAddr(t, &errb)
	js := natstest.JetStream(t, ns.URL())

	steps := []struct {
		name string
		do   func(t *testing.T)
		code int
		body string // the body, or for a 503 what it contains
	}{
		{"before connecting", nil, http.StatusServiceUnavailable, "nats: not connected"},
		{"connected, consumer running", func(*testing.T) { close(connect) }, http.StatusOK, "ready"},
		{"NATS down", func(t *testing.T) {
			// Once the worker fetches: a server stopped while it creates
			// its consumer can swallow the reply, and it waits out its
			// request deadline.
			poll.Until(t, "the worker fetching", 30*time.Second, func() bool {
				c, err := js.Consumer(ctx, bus.StreamName(bus.Raw), durable)
				return err == nil && c.CachedInfo().NumWaiting > 0
			})
			ns.Shutdown()
		}, http.StatusServiceUnavailable, "nats: reconnecting"},
		{"NATS back", func(*testing.T) { ns.Restart() }, http.StatusOK, "ready"},
		{"consumer deleted", func(t *testing.T) {
			if err := js.DeleteConsumer(ctx, bus.StreamName(bus.Raw), durable); err != nil {
				t.Fatal(err)
			}
		}, http.StatusServiceUnavailable, "nats: consumer " + durable + " on " + bus.StreamName(bus.Raw) + " missing"},
		{"stream deleted", func(t *testing.T) {
			if err := js.DeleteStream(ctx, bus.StreamName(bus.Dead)); err != nil {
				t.Fatal(err)
			}
		}, http.StatusServiceUnavailable, "nats: stream " + bus.StreamName(bus.Dead) + " missing"},
	}
	for _, st := range steps {
		t.Run(st.name, func(t *testing.T) {
			if st.do != nil {
				st.do(t)
			}
			var code int
			var body string
			defer func() {
				if t.Failed() {
					t.Logf("last /readyz: %d %q", code, body)
				}
			}()
			poll.Until(t, "/readyz "+st.body, 30*time.Second, func() bool {
				code, body = get(base + "/readyz")
				return code == st.code && body == st.body
			})
			if code, body := get(base + "/healthz"); code != http.StatusOK || body != "ok" {
				t.Errorf("/healthz: %d %q", code, body)
			}
		})
	}
}

// TestHealthCheck: the command is ready when every registered check
// passes; each failing one is a "name: reason" line, in registration
// order; a name registered again replaces its check.
func TestHealthCheck(t *testing.T) {
	fail := func(msg string) func(context.Context) error {
		return func(context.Context) error { return errors.New(msg) }
	}
	ok := func(context.Context) error { return nil }
	type reg struct {
		name  string
		check func(context.Context) error
	}
	for _, tc := range []struct {
		name   string
		checks []reg
		want   string // "" ready
	}{
		{"none", nil, ""},
		{"all pass", []reg{{"a", ok}, {"b", ok}}, ""},
		{"one fails", []reg{{"a", ok}, {"b", fail("down")}}, "b: down"},
		{"two fail", []reg{{"b", fail("x")}, {"a", fail("y")}}, "b: x\na: y"},
		{"replaced", []reg{{"a", fail("x")}, {"a", ok}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Health
			for _, r := range tc.checks {
				h.Ready(r.name, r.check)
			}
			got := ""
			if err := h.Check(context.Background()); err != nil {
				got = err.Error()
			}
			if got != tc.want {
				t.Errorf("Check = %q, want %q", got, tc.want)
			}
		})
	}
}
