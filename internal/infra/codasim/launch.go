package codasim

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/codapipe/codapipe/internal/infra/syncio"
)

// Name is the simulator command's name.
const Name = "codasim"

// EnvBinary names the codasim binary to start, overriding the search.
const EnvBinary = "CODAPIPE_CODASIM"

// ErrNoBinary is returned when no codasim binary is found.
var ErrNoBinary = errors.New("codasim: the SIMULATOR's binary, codasim, is not found")

// The deadlines of a codasim process: to print its addresses after it
// started, and to exit after its stdin closed.
const (
	startTimeout = 2 * time.Minute
	stopTimeout  = 10 * time.Second
)

// Binary finds the codasim binary: $CODAPIPE_CODASIM, else beside this
// executable (make build puts the commands together in ./bin), else on
// PATH, else ./bin/codasim.
func Binary() (string, error) {
	if p := os.Getenv(EnvBinary); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%w: $%s: %w", ErrNoBinary, EnvBinary, err)
		}
		return p, nil
	}
	if exe, err := os.Executable(); err == nil {
		p := filepath.Join(filepath.Dir(exe), Name)
		if st, err := os.Stat(p); err == nil && !st.IsDir() {
			return p, nil
		}
	}
	if p, err := exec.LookPath(Name); err == nil {
		return p, nil
	}
	p := filepath.Join("bin", Name)
	if st, err := os.Stat(p); err == nil && !st.IsDir() {
		return filepath.Abs(p)
	}
	return "", fmt.Errorf("%w beside this program, on PATH or in ./bin: build it (make build, or go build -o bin/ ./cmd/codasim) or set $%s", ErrNoBinary, EnvBinary)
}

// Args are codasim's arguments for r: JSON addresses on the first line,
// and an exit when its stdin closes (the parent gone).
func Args(r Request, tasks string) []string {
	args := []string{"--json", "--vms", strconv.Itoa(r.VMs),
		"--time-scale", strconv.FormatFloat(r.TimeScaleOrDefault(), 'g', -1, 64)}
	if r.Seed != nil {
		args = append(args, "--seed", strconv.FormatInt(*r.Seed, 10))
	}
	if r.Config != "" {
		args = append(args, "--sim-config", r.Config)
	}
	if r.PlannerCoords != "" {
		args = append(args, "--planner-coords", r.PlannerCoords)
	}
	if r.ExecutorCoords != "" {
		args = append(args, "--executor-coords", r.ExecutorCoords)
	}
	if tasks != "" {
		args = append(args, "--tasks-out", tasks)
	}
	return args
}

// Launch starts codasim as a child process and reads its addresses; ctx
// bounds the start. The child stops when the World is closed or when this
// process dies (its stdin closes).
func Launch(ctx context.Context, r Request) (*World, error) {
	bin := r.Binary
	var err error
	if bin == "" {
		if bin, err = Binary(); err != nil {
			return nil, err
		}
	}
	var tasks string
	if r.Tasks {
		if tasks, err = os.MkdirTemp("", "codasim-tasks-"); err != nil {
			return nil, fmt.Errorf("codasim: %w", err)
		}
	}
	removeTasks := func() {
		if tasks != "" {
			_ = os.RemoveAll(tasks)
		}
	}
	cmd := exec.Command(bin, Args(r, tasks)...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		removeTasks()
		return nil, fmt.Errorf("codasim: %w", err)
	}
	first := &firstLine{line: make(chan []byte, 1)}
	tail := &syncio.Ring{Max: 4096}
	cmd.Stdout = first
	cmd.Stderr = tail
	if r.Stderr != nil {
		cmd.Stderr = io.MultiWriter(r.Stderr, tail)
	}
	if err := cmd.Start(); err != nil {
		removeTasks()
		return nil, fmt.Errorf("codasim: start %s: %w", bin, err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }() // owned by the World: its stop waits for it
	var once sync.Once
	var stopErr error
	stopped := make(chan struct{})
	stop := func() error {
		once.Do(func() {
			defer close(stopped)
			_ = stdin.Close() // codasim exits when its stdin closes
			select {
			case err := <-exited:
				if err != nil {
					stopErr = fmt.Errorf("codasim: %s exited: %w: %s", Name, err, tailText(tail))
				}
			case <-time.After(stopTimeout):
				_ = cmd.Process.Kill()
				<-exited
				stopErr = fmt.Errorf("codasim: %s did not exit %v after its stdin closed; killed", Name, stopTimeout)
			}
			removeTasks()
		})
		return stopErr
	}
	timer := time.NewTimer(startTimeout)
	defer timer.Stop()
	var line []byte
	select {
	case line = <-first.line:
	case err := <-exited:
		exited <- err // for stop
		_ = stop()
		select {
		case line = <-first.line: // a configuration error, said before it exited
		default:
			return nil, fmt.Errorf("codasim: %s exited before printing its addresses (%v): %s", bin, err, tailText(tail))
		}
	case <-timer.C:
		_ = cmd.Process.Kill()
		_ = stop()
		return nil, fmt.Errorf("codasim: %s printed no addresses in %v: %s", bin, startTimeout, tailText(tail))
	case <-ctx.Done():
		_ = stop()
		return nil, ctx.Err()
	}
	var w World
	if err := json.Unmarshal(line, &w); err != nil {
		_ = stop()
		return nil, fmt.Errorf("codasim: %s's first line is not its addresses (%w): %.200q", bin, err, line)
	}
	if w.ConfigError != "" {
		_ = stop()
		return nil, &ConfigError{errors.New(w.ConfigError)}
	}
	w.Process = cmd.Process.Pid
	w.Tasks = tasks
	world := NewWorld(w, stop)
	return world, nil
}

// firstLine keeps the first line written to it (up to 1 MiB) and discards
// the rest.
type firstLine struct {
	mu   sync.Mutex
	buf  []byte
	sent bool
	line chan []byte
}

func (f *firstLine) Write(p []byte) (int, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.sent {
		return len(p), nil
	}
	f.buf = append(f.buf, p...)
	if i := bytes.IndexByte(f.buf, '\n'); i >= 0 || len(f.buf) > 1<<20 {
		if i < 0 {
			i = len(f.buf)
		}
		f.sent = true
		f.line <- f.buf[:i]
		f.buf = nil
	}
	return len(p), nil
}

// tailText is the end of a child's output for an error.
func tailText(r *syncio.Ring) string {
	if s := r.Tail(4096); s != "" {
		return s
	}
	return "(no output)"
}
