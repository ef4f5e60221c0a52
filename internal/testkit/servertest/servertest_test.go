package servertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// FreeAddrs gives distinct addresses (a cluster of 8 nodes asks for 24),
// each free to listen on once FreeAddrs has returned.
func TestFreeAddrs(t *testing.T) {
	addrs, err := FreeAddrs(24)
	if err != nil {
		t.Fatal(err)
	}
	if len(addrs) != 24 {
		t.Fatalf("%d addresses, want 24", len(addrs))
	}
	seen := map[string]bool{}
	for _, addr := range addrs {
		if seen[addr] {
			t.Fatalf("address %s given twice: %v", addr, addrs)
		}
		seen[addr] = true
		l, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatalf("listen on FreeAddrs' %s: %v", addr, err)
		}
		defer l.Close()
	}
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

// server stops when its context ends.
type server struct{ done chan struct{} }

func (s *server) Wait() { <-s.done }

// Serve cancels the server's context when the test ends and waits for it.
func TestServe(t *testing.T) {
	var srv *server
	t.Run("serve", func(t *testing.T) {
		srv = Serve(t, "the test server", func(ctx context.Context) (*server, error) {
			s := &server{done: make(chan struct{})}
			go func() { <-ctx.Done(); close(s.done) }()
			return s, nil
		})
		select {
		case <-srv.done:
			t.Fatal("stopped before the test ended")
		default:
		}
	})
	select {
	case <-srv.done:
	default:
		t.Fatal("still running after the test ended")
	}
}

// A start error fails the test and names the server.
func TestServeStartError(t *testing.T) {
	ft := &fatalT{TB: t}
	done := make(chan struct{})
	go func() { // Fatalf ends the goroutine, as it ends a test's
		defer close(done)
		Serve(ft, "the test server", func(context.Context) (*server, error) { return nil, errors.New("no port") })
	}()
	<-done
	if ft.msg != "start the test server: no port" {
		t.Errorf("Fatalf(%q), want the server's name and the error", ft.msg)
	}
}

// fatalT records a Fatalf and ends its goroutine.
type fatalT struct {
	testing.TB
	msg string
}

func (f *fatalT) Helper() {}

func (f *fatalT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// Once Down has returned, no connection forwards any more, including
// one the proxy accepted while Down ran (a connection that slipped
// through kept an HTTP client talking to a "down" planner through a whole
// outage).
func TestProxyDownCutsEveryConnection(t *testing.T) {
	echo, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer echo.Close()
	go func() { // owned by the test: ends when echo closes
		for {
			c, err := echo.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	for round := 0; round < 200; round++ {
		p := NewProxy(t)
		p.Route("http://" + echo.Addr().String())
		var down atomic.Bool
		var leaked atomic.Int64
		var wg sync.WaitGroup
		for i := 0; i < 6; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for j := 0; j < 40; j++ {
					c, err := net.DialTimeout("tcp", p.addr, time.Second)
					if err != nil {
						return // Down: refused
					}
					c.SetDeadline(time.Now().Add(200 * time.Millisecond))
					buf := make([]byte, 1)
					if _, err := c.Write([]byte{'x'}); err == nil {
						if _, err := io.ReadFull(c, buf); err == nil {
							// A connection open when Down returned must not echo.
							wasDown := down.Load()
							c.SetDeadline(time.Now().Add(200 * time.Millisecond))
							if _, err := c.Write([]byte{'y'}); err == nil {
								if _, err := io.ReadFull(c, buf); err == nil && wasDown {
									leaked.Add(1)
								}
							}
						}
					}
					c.Close()
				}
			}()
		}
		time.Sleep(time.Duration(round%5) * time.Millisecond)
		p.Down()
		down.Store(true)
		wg.Wait()
		if n := leaked.Load(); n > 0 {
			t.Fatalf("round %d: %d connections still forwarded after Down", round, n)
		}
	}
}
