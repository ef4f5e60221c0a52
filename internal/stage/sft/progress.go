package sft

import (
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
)

// progress reports a phase of the build: a bar on a terminal, a log line
// every 10 s otherwise (and at the end of a phase that had work).
type progress struct {
	mu      sync.Mutex
	w       io.Writer
	tty     bool
	log     *slog.Logger
	phase   string
	unit    string
	n       int
	total   int
	samples int
	// bytes of totalBytes uploaded (export), shown when totalBytes > 0.
	bytes, totalBytes int64
	start             time.Time
	last              time.Time
	open              bool
}

func newProgress(w io.Writer, log *slog.Logger) *progress {
	return &progress{w: w, tty: w != nil && service.IsTerminal(w), log: log}
}

// begin starts a phase of total units.
func (p *progress) begin(phase, unit string, total int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.phase, p.unit, p.n, p.total, p.samples, p.bytes, p.totalBytes = phase, unit, 0, total, 0, 0, 0
	p.start, p.last = time.Now(), time.Now()
	p.draw(false)
}

// add counts n units done and samples written.
func (p *progress) add(n, samples int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	p.samples += samples
	p.draw(false)
}

// set sets the units done and the bytes uploaded of all.
func (p *progress) set(n int, bytes, totalBytes int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n, p.bytes, p.totalBytes = n, bytes, totalBytes
	p.draw(false)
}

// end closes the phase.
func (p *progress) end() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.draw(true)
	if p.tty && p.open {
		fmt.Fprintln(p.w)
	}
	p.open = false
}

func (p *progress) line() string {
	s := fmt.Sprintf("%s: %d/%d %s", p.phase, p.n, p.total, p.unit)
	if p.samples > 0 {
		s += fmt.Sprintf(", %d samples written", p.samples)
	}
	if p.totalBytes > 0 {
		s += fmt.Sprintf(", %.1f/%.1f MB uploaded", float64(p.bytes)/1e6, float64(p.totalBytes)/1e6)
	}
	return s
}

func (p *progress) draw(final bool) {
	if p.tty {
		if !final && time.Since(p.last) < 100*time.Millisecond && p.n != p.total && p.n != 0 {
			return
		}
		p.last = time.Now()
		const width = 30
		fill := width
		if p.total > 0 {
			fill = width * p.n / p.total
		}
		fmt.Fprintf(p.w, "\r[%s%s] %s   ", strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.line())
		p.open = true
		return
	}
	if p.log == nil {
		return
	}
	if final && p.total == 0 {
		return // an empty phase (no val split): nothing to tell
	}
	if final || time.Since(p.last) >= 10*time.Second {
		p.last = time.Now()
		attrs := []any{"phase", p.phase, "done", p.n, "total", p.total, "unit", p.unit}
		if p.samples > 0 {
			attrs = append(attrs, "samples", p.samples)
		}
		if p.totalBytes > 0 {
			attrs = append(attrs, "bytes", p.bytes, "total_bytes", p.totalBytes)
		}
		p.log.Info("sftpack: progress", append(attrs, "elapsed", time.Since(p.start).Round(time.Millisecond).String())...)
	}
}
