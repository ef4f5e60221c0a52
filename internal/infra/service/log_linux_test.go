package service

import (
	"bytes"
	"fmt"
	"os"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/codapipe/codapipe/internal/infra/redact"
)

// openPTY opens a pseudo-terminal: the master to read what is written to
// the terminal, the terminal itself.
func openPTY(t *testing.T) (master, tty *os.File) {
	t.Helper()
	m, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { m.Close() })
	var n uint32
	var ioctlErr error
	rc, err := m.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	err = rc.Control(func(fd uintptr) {
		var unlock int32
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCSPTLCK, uintptr(unsafe.Pointer(&unlock))); e != 0 {
			ioctlErr = fmt.Errorf("unlock: %w", e)
			return
		}
		if _, _, e := syscall.Syscall(syscall.SYS_IOCTL, fd, syscall.TIOCGPTN, uintptr(unsafe.Pointer(&n))); e != 0 {
			ioctlErr = fmt.Errorf("pty number: %w", e)
		}
	})
	if err != nil || ioctlErr != nil {
		t.Skipf("no pseudo-terminal here: %v %v", err, ioctlErr)
	}
	s, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminal here: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return m, s
}

// TestAutoIsTextOnATerminal: with the default format a terminal gets the
// human line.
func TestAutoIsTextOnATerminal(t *testing.T) {
	master, tty := openPTY(t)
	if !IsTerminal(tty) {
		t.Fatal("IsTerminal is false for a terminal")
	}
	var secrets redact.Secrets
	if !IsTerminal(secrets.Writer(tty)) {
		t.Fatal("IsTerminal is false for a terminal behind the redacting writer Main wraps stderr in")
	}
	l, err := NewLogger(tty, LogConfig{Service: "t"})
	if err != nil {
		t.Fatal(err)
	}
	l.Info("hello", "n", 1)
	if err := master.SetReadDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 512)
	for !bytes.Contains(got, []byte("\n")) {
		n, err := master.Read(buf)
		if err != nil {
			t.Fatalf("reading the terminal: %v (so far %q)", err, got)
		}
		got = append(got, buf[:n]...)
	}
	out := string(bytes.ReplaceAll(got, []byte("\r\n"), []byte("\n"))) // the terminal's line discipline adds \r
	if !humanHello.MatchString(out) {
		t.Fatalf("the terminal got %q, want the human line", out)
	}
}
