package servertest

import (
	"net"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestFreeAddr(t *testing.T) {
	addr, err := FreeAddr()
	if err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listen on FreeAddr's %s: %v", addr, err)
	}
	l.Close()
}

// Signal ends the process group; a process that ignores SIGTERM is killed after the grace
// period; a process that has exited is left alone.
func TestSignal(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		sig          syscall.Signal
		grace        time.Duration
	}{
		{"term", "sleep 60", syscall.SIGTERM, 5 * time.Second},
		{"term ignored", `trap "" TERM; sleep 60 & wait`, syscall.SIGTERM, 100 * time.Millisecond},
		{"kill", "sleep 60", syscall.SIGKILL, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start(exec.Command("sh", "-c", tc.script))
			if err != nil {
				t.Fatal(err)
			}
			if !p.Running() {
				t.Fatal("not running after Start")
			}
			start := time.Now()
			p.Signal(tc.sig, tc.grace)
			if p.Running() {
				t.Fatal("still running after Signal")
			}
			if d := time.Since(start); d > 4*time.Second {
				t.Errorf("Signal took %v", d)
			}
			if p.State() == nil || p.State().Success() {
				t.Errorf("State = %v, want a process ended by a signal", p.State())
			}
			p.Signal(syscall.SIGKILL, 0) // exited: nothing happens
		})
	}
}
