package vmpool

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
	"github.com/codapipe/codapipe/pkg/vmpool/internal/errtext"
)

// VMSpec names one VM of a backend. The pool passes it back to every
// Backend call; a backend keeps whatever else it needs about the VM (vmx
// path, container name, URL) itself, keyed by ID.
type VMSpec struct {
	// ID names the VM in the pool, in logs, in errors and in trajectories.
	// It is unique within the pool and matches [A-Za-z0-9][A-Za-z0-9_.-]*.
	ID string
	// Key identifies the machine itself on this host, whatever the pool
	// file calls it: "vmware:/vms/a/a.vmx", "guest:10.0.0.5:5000",
	// "docker:codapipe-pool1-vm0". The cross-process lock file is named
	// after it, so two pool files that give one machine different ids still
	// exclude each other. Empty means "<backend name>:<ID>".
	Key string
	// Label describes the VM for people (a vmx path, a URL, an image).
	Label string
}

// Endpoint is where a started VM's servers answer.
type Endpoint struct {
	// GuestURL is the OSWorld/ScienceBoard guest server, "http://host:5000".
	GuestURL string
	// StateURL is ScienceBoard's app-state server; "" means the guest's
	// host on port 8000 (see guest.Options.StateURL).
	StateURL string
}

// Backend drives one kind of VM: the simulator's guest servers ("sim"),
// any host running the guest server ("guest"), VMware through vmrun
// ("vmware"), or OSWorld-style Docker containers ("docker").
//
// The pool calls a backend from several goroutines at once, but never two
// calls for the same VM at the same time (except Stop during Close after a
// call that ignored its context). Every call gets a context with a deadline
// and must return when it ends; a call that has not returned by then makes
// the pool quarantine the VM. Errors should name the VM and the operation
// and say what the user can do.
type Backend interface {
	// Name is the backend's name: "sim", "guest", "vmware", "docker".
	Name() string
	// VMs lists the backend's VMs. The pool calls it once, first; a backend
	// does its host-wide setup here (the docker backend takes its pool lock
	// and removes containers an interrupted run left behind).
	VMs(ctx context.Context) ([]VMSpec, error)
	// Start brings a VM up in its clean state (its snapshot, a fresh
	// container) and returns once its guest server answers. The pool calls
	// it once per VM before the VM's first lease (again only after a failed
	// Start).
	Start(ctx context.Context, vm VMSpec) (Endpoint, error)
	// Reset returns a VM to its clean state — revert the snapshot, recreate
	// the container — and returns once its guest server answers. The
	// endpoint may differ from the last one (a new IP, new host ports).
	Reset(ctx context.Context, vm VMSpec) (Endpoint, error)
	// Health checks that a VM is usable now, through g, the pool's client of
	// the VM's guest server (typically one screenshot).
	Health(ctx context.Context, vm VMSpec, g *guest.Client) error
	// Stop is called by Pool.Close for every VM the pool started. A backend
	// does what its configuration asks: the docker backend removes the
	// container, vmware stops the VM only with stop_on_close, sim and guest
	// run their stop command if any.
	Stop(ctx context.Context, vm VMSpec) error
	// Close releases the backend's own resources after the last Stop (the
	// docker backend removes every container with its pool label).
	Close(ctx context.Context) error
}

// Backend names, as the pool file's "backend" field spells them.
const (
	BackendDocker = "docker"
)

// ErrStuck is matched by the error of a VM that did not become ready within
// its deadline after a start or revert: no IP, no answer from its guest
// server, a vmrun or docker call that never returned. The pool quarantines
// such a VM at once.
var ErrStuck = errors.New("vmpool: VM is stuck")

// CommandError is a local command (vmrun, docker, a reset script) that
// failed or did not finish in time.
type CommandError struct {
	Path     string
	Args     []string
	ExitCode int    // -1 when it did not exit by itself
	Stdout   string // at most 64 KiB
	Stderr   string // at most 64 KiB
	// Timeout is the time the command had when it was killed for taking
	// longer (then the error matches context.DeadlineExceeded); 0 otherwise.
	Timeout time.Duration
	Err     error
}

func (e *CommandError) Error() string {
	cmd := commandLine(e.Path, e.Args)
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

func (e *CommandError) Unwrap() error { return e.Err }

// Is reports context.DeadlineExceeded for a command killed for its deadline.
func (e *CommandError) Is(target error) bool {
	return e.Timeout > 0 && target == context.DeadlineExceeded
}

// Output is the command's stdout and stderr, trimmed.
func (e *CommandError) Output() string {
	return strings.TrimSpace(strings.TrimSpace(e.Stdout) + "\n" + strings.TrimSpace(e.Stderr))
}

func commandLine(path string, args []string) string {
	return guest.Command{Argv: append([]string{path}, args...)}.String()
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

// runCommand runs path with args, with extra environment variables env,
// for at most timeout (0: only ctx bounds it). The command runs in its own
// process group, and the whole group is killed when the time is up, so a
// script's children (a hung vmrun under a wrapper) die with it. It returns
// stdout; a failure is a *CommandError.
func runCommand(ctx context.Context, timeout time.Duration, env []string, path string, args ...string) (string, error) {
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

// readyProbe is one readiness check of a VM; nil means ready.
type readyProbe func(ctx context.Context) error

// screenshotProbe checks readiness the way OSWorld does: GET /screenshot
// answers with a PNG.
func screenshotProbe(client *http.Client, ep Endpoint) (readyProbe, error) {
	g, err := guest.New(ep.GuestURL, guest.Options{
		StateURL:          ep.StateURL,
		HTTPClient:        client,
		Retries:           -1, // waitReady polls
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

// waitReady polls probe every interval until it succeeds, for at most
// timeout. When the time is up it returns an error matching ErrStuck that
// names what was waited for and the last failure; when ctx ends first, an
// error matching ctx's.
func waitReady(ctx context.Context, what string, timeout, interval time.Duration, probe readyProbe) error {
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
			return fmt.Errorf("%w: %s: not ready within %v (%d tries; last: %v)", ErrStuck, what, errtext.Duration(time.Since(start)), n+1, last)
		case <-t.C:
		}
	}
}
