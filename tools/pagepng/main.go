// Command pagepng renders a local HTML page in headless Chromium
// (internal/infra/browser) and writes a full-page PNG of it, for a person to look
// at (make report-png renders the run report page with it):
//
//	go run ./tools/pagepng -in page.html -out page.png [-width 1280]
//
// It prints one line, "pagepng: page.png 1280x5123 px, load 412ms,
// Chrome/…", and on stderr every console error and warning, uncaught
// exception and failed load of the page. The PNG is written in any case
// (atomically: a temporary file renamed); the exit status is 1 when the
// page had a console error, an exception or a failed load, or could not be
// rendered in 2 minutes, and 2 on a usage error. Chromium is
// $CODAPIPE_CHROMIUM, else /usr/bin/chromium (make chromium installs it).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/codapipe/codapipe/internal/infra/browser"
)

// timeout bounds the whole rendering (Chromium's start, the load, the
// screenshot).
const timeout = 2 * time.Minute

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is the command; it returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("pagepng", flag.ContinueOnError)
	fs.SetOutput(stderr)
	in := fs.String("in", "", "the local HTML `page` to render")
	out := fs.String("out", "", "the PNG `file` to write")
	width := fs.Int("width", 1280, "the viewport width in CSS `pixels`")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: pagepng -in page.html -out page.png [-width 1280]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if *in == "" || *out == "" || fs.NArg() > 0 || *width <= 0 {
		fs.Usage()
		return 2
	}

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	res, err := browser.Render(ctx, *in, browser.Options{Width: *width, Screenshot: true})
	if err != nil {
		fmt.Fprintln(stderr, "pagepng:", err)
		return 1
	}
	if err := writeFile(*out, res.PNG); err != nil {
		fmt.Fprintln(stderr, "pagepng:", err)
		return 1
	}
	fmt.Fprintf(stdout, "pagepng: %s %dx%d px, load %dms, %s\n", *out, res.Width, res.Height, res.Load.Milliseconds(), res.Version)

	bad := len(res.Exceptions) + len(res.FailedLoads)
	for _, c := range res.Console {
		fmt.Fprintln(stderr, "pagepng: console", c)
		if strings.HasPrefix(c, "error: ") {
			bad++
		}
	}
	for _, e := range res.Exceptions {
		fmt.Fprintln(stderr, "pagepng: exception:", e)
	}
	for _, f := range res.FailedLoads {
		fmt.Fprintln(stderr, "pagepng: failed load:", f)
	}
	if bad > 0 {
		fmt.Fprintf(stderr, "pagepng: %s: %d console errors, exceptions and failed loads\n", *in, bad)
		return 1
	}
	return 0
}

// writeFile writes data to path atomically: into a temporary file beside
// it, renamed over it.
func writeFile(path string, data []byte) (err error) {
	f, err := os.CreateTemp(filepath.Dir(path), ".pagepng-*.png")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(data); err != nil {
		return err
	}
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), path)
}
