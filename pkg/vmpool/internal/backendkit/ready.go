package backendkit

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
)

// Probe is one readiness check of a VM; nil means ready.
type Probe func(ctx context.Context) error

// ScreenshotProbe checks readiness the way OSWorld does: GET /screenshot
// at ep answers with a PNG (one try of at most 10 s, sent with client).
func ScreenshotProbe(client *http.Client, ep vmpool.Endpoint) (Probe, error) {
	g, err := guest.New(ep.GuestURL, guest.Options{
		StateURL:          ep.StateURL,
		HTTPClient:        client,
		Retries:           -1, // WaitReady polls
		ScreenshotTimeout: 10 * time.Second,
	})
	if err != nil {
		return nil, err
	}
	return func(ctx context.Context) error {
		_, err := g.Screenshot(ctx)
		return err
	}, nil
}

// WaitReady polls probe every interval until it succeeds, for at most
// timeout. When the time is up it returns an error matching
// vmpool.ErrStuck that names what was waited for and the last failure;
// when ctx ends first, an error matching ctx's.
func WaitReady(ctx context.Context, what string, timeout, interval time.Duration, probe Probe) error {
	rctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := time.Now()
	var last error
	for n := 0; ; n++ {
		last = probe(rctx)
		if last == nil {
			return nil
		}
		if ctx.Err() != nil {
			return fmt.Errorf("%s: %w (last try: %v)", what, ctx.Err(), last)
		}
		wait := interval
		if dl, _ := rctx.Deadline(); time.Until(dl) < wait {
			wait = time.Until(dl)
		}
		t := time.NewTimer(max(wait, 0))
		select {
		case <-rctx.Done():
			t.Stop()
			if ctx.Err() != nil {
				return fmt.Errorf("%s: %w (last try: %v)", what, ctx.Err(), last)
			}
			return fmt.Errorf("%w: %s: not ready within %v (%d tries; last: %v)", vmpool.ErrStuck, what, errtext.Duration(time.Since(start)), n+1, last)
		case <-t.C:
		}
	}
}

// WaitGuest is WaitReady with ScreenshotProbe: it returns once the guest
// server at ep answers a screenshot, or fails after timeout.
func WaitGuest(ctx context.Context, client *http.Client, ep vmpool.Endpoint, what string, timeout, interval time.Duration) error {
	probe, err := ScreenshotProbe(client, ep)
	if err != nil {
		return err
	}
	return WaitReady(ctx, what, timeout, interval, probe)
}

// ScreenshotHealth is the health check of a real guest: one screenshot
// through g, the pool's client of the VM.
func ScreenshotHealth(ctx context.Context, g *guest.Client) error {
	_, err := g.Screenshot(ctx)
	return err
}
