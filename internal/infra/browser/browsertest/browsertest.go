// Package browsertest renders a page in headless Chromium for a test:
// skipped without Chromium, failed instead when the environment requires
// it (make test), and failed on anything the page reports as an error.
package browsertest

import (
	"context"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/browser"
)

// Require skips tb when Chromium is missing, or fails it when
// browser.RequireEnv is "1" (make test sets it).
func Require(tb testing.TB) {
	tb.Helper()
	if _, err := browser.Find(""); err != nil {
		if os.Getenv(browser.RequireEnv) == "1" {
			tb.Fatalf("%v (%s=1: this test needs Chromium; make chromium installs it)", err, browser.RequireEnv)
		}
		tb.Skipf("no Chromium, skipped: %v (make chromium installs it)", err)
	}
}

// Render renders the page at path with o (Require first), and fails tb
// on its console errors, uncaught exceptions and failed loads (warnings
// are not failures).
func Render(tb testing.TB, path string, o browser.Options) *browser.Result {
	tb.Helper()
	Require(tb)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := browser.Render(ctx, path, o)
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range slices.Concat(res.Console, res.Exceptions, res.FailedLoads) {
		if !strings.HasPrefix(l, "warning:") {
			tb.Errorf("%s in %s: %s", path, res.Version, l)
		}
	}
	return res
}
