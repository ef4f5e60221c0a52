package judge

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
	"github.com/codapipe/codapipe/internal/infra/service"
	"github.com/codapipe/codapipe/internal/infra/syncio"
	"github.com/codapipe/codapipe/internal/testkit/natstest"
	"github.com/codapipe/codapipe/internal/testkit/poll"
	"github.com/codapipe/codapipe/internal/testkit/servertest"
)

// TestWorkerServesHealth: a judge worker (no --drain) run by Main with
// --metrics-addr answers /healthz, and /readyz once it is connected to
// NATS and its consumer exists; it logs its progress (--progress-every)
// while it waits; it stops cleanly on cancel.
func TestWorkerServesHealth(t *testing.T) {
	addrs, err := servertest.FreeAddrs(1)
	if err != nil {
		t.Fatal(err)
	}
	ns := natstest.Start(t)
	ctx, cancel := context.WithCancel(context.Background())
	var errb syncio.Buffer
	exited := make(chan int, 1)
	go func() { // owned by the test: cancel ends it, waited for below
		exited <- service.MainContext(ctx, Command(), []string{"--data", t.TempDir(), "--nats", ns.URL(), "--sim", "--log-level", "info",
			"--metrics-addr", addrs[0], "--progress-every", "200ms"}, io.Discard, &errb)
	}()
	get := func(path string) (int, string) {
		c := &http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get("http://" + addrs[0] + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, strings.TrimSpace(string(body))
	}
	for _, tc := range []struct{ path, body string }{{"/healthz", "ok"}, {"/readyz", "ready"}} {
		t.Run(tc.path, func(t *testing.T) {
			var code int
			var body string
			defer func() {
				if t.Failed() {
					t.Logf("last %s: %d %q; log:\n%s", tc.path, code, body, errb.String())
				}
			}()
			poll.Until(t, tc.path+" 200", time.Minute, func() bool {
				code, body = get(tc.path)
				return code == http.StatusOK && body == tc.body
			})
		})
	}
	// Stopped once it fetches (a stop while it creates its consumer is an
	// error of its start).
	js := natstest.JetStream(t, ns.URL())
	poll.Until(t, "the worker fetching", time.Minute, func() bool { return natstest.Fetching(ctx, js, bus.StreamName(bus.Raw)) })
	// A long-running worker says how it is doing (issue 36).
	poll.Until(t, "a progress line of the worker", time.Minute, func() bool { return strings.Contains(errb.String(), "progress") })
	cancel()
	select {
	case code := <-exited:
		if code != 0 {
			t.Errorf("exit %d:\n%s", code, errb.String())
		}
	case <-time.After(time.Minute):
		t.Fatal("the judge worker did not stop")
	}
}
