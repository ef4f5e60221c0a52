package backendkit

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
)

// CommandError is a local command (vmrun, docker, a reset script) that
// failed or did not finish in time.
type CommandError struct {
	Path     string   // the program
	Args     []string // its arguments
	ExitCode int      // -1 when it did not exit by itself
	Stdout   string   // at most 64 KiB
	Stderr   string   // at most 64 KiB
	// Timeout is the time the command had when it was killed for taking
	// longer (then the error matches context.DeadlineExceeded); 0 otherwise.
	Timeout time.Duration
	Err     error // the error of running it (an *exec.ExitError, ...)
}

// Error names the command and says how it failed, with the last line of
// its stderr (else of its stdout).
func (e *CommandError) Error() string {
	cmd := guest.ArgvCommand(append([]string{e.Path}, e.Args...)...).String()
	if e.Timeout > 0 {
		return fmt.Sprintf("%s: no answer within %v (killed)", cmd, e.Timeout)
	}
	msg := fmt.Sprintf("%s: %v", cmd, e.Err)
	if t := errtext.LastLine(e.Stderr); t != "" {
		msg += ": " + t
	} else if t := errtext.LastLine(e.Stdout); t != "" {
		msg += ": " + t
	}
	return msg
}

// Unwrap is the error of running the command.
func (e *CommandError) Unwrap() error { return e.Err }

// Is reports context.DeadlineExceeded for a command killed for its deadline.
func (e *CommandError) Is(target error) bool {
	return e.Timeout > 0 && target == context.DeadlineExceeded
}

// Output is the command's stdout and stderr, trimmed.
func (e *CommandError) Output() string {
	return strings.TrimSpace(strings.TrimSpace(e.Stdout) + "\n" + strings.TrimSpace(e.Stderr))
}

// capWriter keeps the first n bytes written.
type capWriter struct {
	buf bytes.Buffer
	n   int
}

func (w *capWriter) Write(p []byte) (int, error) {
	if room := w.n - w.buf.Len(); room > 0 {
		w.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// Run runs path with args, with extra environment variables env, for at
// most timeout (0: only ctx bounds it). The command runs in its own
// process group, and the whole group is killed when the time is up, so a
// script's children (a hung vmrun under a wrapper) die with it. It returns
// stdout; a failure is a *CommandError.
func Run(ctx context.Context, timeout time.Duration, env []string, path string, args ...string) (string, error) {
	cctx := ctx
	if timeout > 0 {
		var cancel context.CancelFunc
		cctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	cmd := exec.CommandContext(cctx, path, args...)
	setProcessGroup(cmd)
	cmd.WaitDelay = 2 * time.Second
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	stdout, stderr := &capWriter{n: 64 << 10}, &capWriter{n: 64 << 10}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	start := time.Now()
	err := cmd.Run()
	if err == nil {
		return stdout.buf.String(), nil
	}
	ce := &CommandError{Path: path, Args: args, ExitCode: -1, Stdout: stdout.buf.String(), Stderr: stderr.buf.String(), Err: err}
	var ee *exec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		ce.ExitCode = ee.ExitCode()
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		ce.Err = fmt.Errorf("%w (%v)", context.Canceled, err)
	case cctx.Err() != nil: // our timeout or the caller's deadline
		ce.Timeout = max(errtext.Duration(time.Since(start)), time.Nanosecond)
	}
	return ce.Stdout, ce
}
