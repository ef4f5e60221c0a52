package chaos

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// proc is one pipeline worker as separate OS processes: started, killed
// with SIGKILL and started again with the same arguments, until it exits 0
// (a batch process) or is stopped (a long-lived worker).
type proc struct {
	kind, name string
	bin        string
	args       []string
	env        []string
	logDir     string
	metrics    string // its --metrics-addr
	batch      bool   // exits 0 when done (rollout, --drain, sftpack)
	// maxFailures bounds the non-zero exits that are not our kills.
	maxFailures int

	mu       sync.Mutex
	cmd      *exec.Cmd
	running  bool
	killed   bool // the current process was killed by us
	stopping bool
	starts   int
	kills    int
	failures []string
	finished bool // a batch process exited 0
	samples  [][]Sample
	done     chan struct{}
}

// supervise runs the process until it finishes, fails too often or is
// stopped; it closes p.done when it returns.
func (p *proc) supervise(t *testing.T) {
	defer close(p.done)
	for {
		p.mu.Lock()
		if p.stopping {
			p.mu.Unlock()
			return
		}
		p.starts++
		n := p.starts
		log, err := os.Create(filepath.Join(p.logDir, fmt.Sprintf("%s.%d.log", p.name, n)))
		if err != nil {
			p.mu.Unlock()
			t.Errorf("%s: %v", p.name, err)
			return
		}
		cmd := exec.Command(p.bin, p.args...)
		cmd.Env = p.env
		cmd.Stdout, cmd.Stderr = log, log
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			p.mu.Unlock()
			log.Close()
			t.Errorf("%s: start: %v", p.name, err)
			return
		}
		p.cmd, p.running, p.killed = cmd, true, false
		p.samples = append(p.samples, nil)
		p.mu.Unlock()

		err = cmd.Wait()
		log.Close()
		p.mu.Lock()
		p.running = false
		killed, stopping := p.killed, p.stopping
		switch {
		case killed && !stopping:
			p.mu.Unlock()
			continue // our kill -9: start it again with the same arguments
		case err == nil && (p.batch || stopping):
			p.finished = p.batch
			p.mu.Unlock()
			return
		case stopping:
			p.mu.Unlock()
			return
		}
		p.failures = append(p.failures, fmt.Sprintf("start %d: %v: %s", n, err, tailFile(log.Name(), 600)))
		failed := len(p.failures) > p.maxFailures
		p.mu.Unlock()
		if failed {
			t.Errorf("%s failed %d times; the last: %s", p.name, len(p.failures), p.failures[len(p.failures)-1])
			return
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// kill sends SIGKILL to the running process; false when none runs.
func (p *proc) kill() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.running || p.stopping || p.killed {
		return false
	}
	if err := syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL); err != nil {
		return false
	}
	p.killed = true
	p.kills++
	return true
}

// quit ends a stuck process with SIGQUIT, which makes a Go program print
// every goroutine's stack to its log, and waits for its supervisor.
func (p *proc) quit() {
	p.mu.Lock()
	p.stopping = true
	if p.running {
		_ = syscall.Kill(p.cmd.Process.Pid, syscall.SIGQUIT)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.stop(time.Second)
	}
}

// isRunning: a process of it is alive now.
func (p *proc) isRunning() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.running && !p.killed
}

// stop ends a long-lived worker (SIGTERM, then SIGKILL after grace) and
// waits for its supervisor.
func (p *proc) stop(grace time.Duration) {
	p.mu.Lock()
	p.stopping = true
	if p.running {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
	}
	p.mu.Unlock()
	select {
	case <-p.done:
		return
	case <-time.After(grace):
	}
	p.mu.Lock()
	if p.running {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	}
	p.mu.Unlock()
	<-p.done
}

// sample scrapes the running process's metrics once.
func (p *proc) sample(ctx context.Context, client *http.Client) {
	p.mu.Lock()
	if !p.running || p.killed || p.metrics == "" {
		p.mu.Unlock()
		return
	}
	inc := len(p.samples) - 1
	p.mu.Unlock()
	cctx, cancel := context.WithTimeout(ctx, time.Second)
	s, err := Scrape(cctx, client, "http://"+p.metrics+"/metrics")
	cancel()
	if err != nil {
		return // starting, stopping or killed: no sample
	}
	p.mu.Lock()
	if inc == len(p.samples)-1 {
		p.samples[inc] = append(p.samples[inc], s)
	}
	p.mu.Unlock()
}

// allSamples are every sample of every start, in order.
func (p *proc) allSamples() []Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []Sample
	for _, ss := range p.samples {
		out = append(out, ss...)
	}
	return out
}

// lastStart are the samples of the latest start.
func (p *proc) lastStart() []Sample {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.samples) == 0 {
		return nil
	}
	return append([]Sample(nil), p.samples[len(p.samples)-1]...)
}

// freeAddr returns "127.0.0.1:<port>" of a port that was free a moment ago.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// tailFile is the last n bytes of a file, on one line.
func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return strings.ReplaceAll(strings.TrimSpace(string(b)), "\n", " | ")
}

// repoRoot is the folder of go.mod above the working directory.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal(errors.New("no go.mod above the working directory"))
		}
		dir = parent
	}
}
