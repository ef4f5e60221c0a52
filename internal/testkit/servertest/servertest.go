// Package servertest starts servers for tests and stops them when the test ends. For the test
// helpers that run a real server binary (internal/testkit/miniotest, internal/testkit/natstest): the binary, found
// or the test skipped (failed under CI=true); a free loopback port; the server as a child process
// in its own process group, so that a signal reaches it and whatever it started, with its exit
// watched. For in-process servers (the simulator's world, its guest and model servers): Serve.
package servertest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/testkit/toolbin"
)

// Binary returns the path of the tool name that `make tools` builds (see toolbin.Find; env
// overrides it). When it is missing it skips the test, or fails it when CI=true: a missing server
// is a CI failure, not a reason to skip its tests silently. what names the server in the message.
func Binary(t testing.TB, env, name, what string) string {
	t.Helper()
	bin, err := toolbin.Find(env, name)
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s not installed (CI=true, so this is a failure): %v", what, err)
		}
		t.Skipf("%s not installed: run make tools (%v)", what, err)
	}
	return bin
}

// FreeAddrs returns n addresses "127.0.0.1:<port>" of ports that were free
// a moment ago, all different: each is held open until all are chosen (a
// port closed before the next is asked for may be handed out again, and
// two nodes of one cluster then share it). Another process may still take
// one before the server binds it: callers retry on "address already in use".
func FreeAddrs(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		addrs = append(addrs, l.Addr().String())
	}
	return addrs, nil
}

// Process is a server started by Start.
type Process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Start starts cmd in a new process group and watches for its exit.
func Start(cmd *exec.Cmd) (*Process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{cmd: cmd, done: make(chan struct{})}
	go func() { // owned by the process: returns when it exits
		_ = cmd.Wait() // its exit status is of no interest: Signal ends it
		close(p.done)
	}()
	return p, nil
}

// Done is closed when the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// State is how the process ended; read it once Done is closed.
func (p *Process) State() *os.ProcessState { return p.cmd.ProcessState }

// Signal sends sig to the process group and waits until the process has exited; when grace > 0
// and it is still running after grace, it sends SIGKILL. A process that has exited is left alone.
func (p *Process) Signal(sig syscall.Signal, grace time.Duration) {
	if !p.Running() {
		return
	}
	pgid := p.cmd.Process.Pid
	_ = syscall.Kill(-pgid, sig)
	if grace <= 0 {
		<-p.done
		return
	}
	select {
	case <-p.done:
	case <-time.After(grace):
		_ = syscall.Kill(-pgid, syscall.SIGKILL)
		<-p.done
	}
}

// Server is an in-process server whose Wait returns when it has stopped.
type Server interface {
	Wait()
}

// stopTimeout bounds Serve's wait for a server to stop at the end of the test.
const stopTimeout = 10 * time.Second

// Serve starts a server with start on a context that is canceled when the test ends; then it waits
// for the server to stop and reports an error naming what when it has not within 10 s. A start
// error fails the test.
func Serve[S Server](t testing.TB, what string, start func(context.Context) (S, error)) S {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	srv, err := start(ctx)
	if err != nil {
		cancel()
		t.Fatalf("start %s: %v", what, err)
	}
	t.Cleanup(func() {
		cancel()
		stopped := make(chan struct{})
		go func() { // returns when the server has stopped (not at all when it hangs: the test fails)
			srv.Wait()
			close(stopped)
		}()
		select {
		case <-stopped:
		case <-time.After(stopTimeout):
			t.Errorf("%s did not stop within %v", what, stopTimeout)
		}
	})
	return srv
}
