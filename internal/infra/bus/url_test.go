package bus

import (
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestCheckURL(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want []string // in the error; none: valid
	}{
		{"", nil},
		{"nats://127.0.0.1:4222", nil},
		{"127.0.0.1:4222", nil},
		{"NATS://h:4222", nil},
		{"tls://h:4222", nil},
		{"ws://h:8080", nil},
		{"wss://h", nil},
		{"nats://u:p@a:4222, nats://b:4222", nil},
		{"natss://h:4222", []string{`scheme "natss"`, "want nats://, tls://, ws:// or wss://"}},
		{"nats://a:4222,redis://b:6379", []string{`server 2 of 2: scheme "redis"`}},
		{"http://127.0.0.1:8222", []string{"http://127.0.0.1:8222 is an HTTP URL", "monitoring port", "usually 4222", "nats://127.0.0.1:4222"}},
		{"https://nats.example:8222", []string{"HTTP URL", "nats://nats.example:4222"}},
		{"nats://a:4222,,nats://b:4222", []string{"empty server"}},
		{"nats://", []string{"no host"}},
		{"http://user:hunter2@h:8222", []string{"***@h:8222"}},
	} {
		t.Run(tc.url, func(t *testing.T) {
			err := CheckURL(tc.url)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("CheckURL(%q) = %v, want nil", tc.url, err)
				}
				return
			}
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("CheckURL(%q) = %v, want ErrBadURL", tc.url, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), "hunter2") {
				t.Errorf("error %q shows the password", err)
			}
		})
	}
}

// serveTCP serves every connection of a loopback listener with handle
// until the test ends; it returns the address.
func serveTCP(t *testing.T, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				handle(c)
			}()
		}
	}()
	return ln.Addr().String()
}

// TestOpenNotNATS: a server that answers but not with the NATS protocol
// (NATS's HTTP monitoring port, another service, one that hangs up) is
// named as such, not a bare "EOF" or timeout; a bad scheme is refused
// before any connection.
func TestOpenNotNATS(t *testing.T) {
	web := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("{}")) }))
	t.Cleanup(web.Close)
	ssh := serveTCP(t, func(c net.Conn) { c.Write([]byte("SSH-2.0-OpenSSH_9.6\r\n")); time.Sleep(5 * time.Second) })
	hangup := serveTCP(t, func(net.Conn) {})
	for _, tc := range []struct {
		name, url string
		is        error
		want      string
	}{
		{"HTTP port", "nats://" + strings.TrimPrefix(web.URL, "http://"), ErrNotNATS, "is an HTTP server"},
		{"HTTP port without a scheme", strings.TrimPrefix(web.URL, "http://"), ErrNotNATS, "usually 4222"},
		{"another protocol", "nats://" + ssh, ErrNotNATS, `sent "SSH-2.0-OpenSSH_9.6"`},
		{"hangs up", "nats://" + hangup, ErrNotNATS, "NATS INFO greeting"},
		{"bad scheme", "natss://127.0.0.1:1", ErrBadURL, "want nats://"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			b, err := Open(ctx, Config{URL: tc.url, Timeout: time.Second})
			if err == nil {
				b.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q: want %v and %q", err, tc.is, tc.want)
			}
		})
	}
}
