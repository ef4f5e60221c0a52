package bus

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/infra/redact"
)

// URLSchemes are the schemes a NATS URL may have: nats (plain or TLS as
// the server asks), tls (TLS required), ws and wss (WebSocket). A seed
// without a scheme (host:port) is nats.
var URLSchemes = []string{"nats", "tls", "ws", "wss"}

// probeTimeout bounds each wait of probeProtocol for a server's answer.
const probeTimeout = 2 * time.Second

// ErrBadURL is matched (errors.Is) by the errors of CheckURL.
var ErrBadURL = errors.New("not a NATS URL")

// ErrNotNATS is matched by the error of Open when a server answered but
// not with the NATS protocol (an HTTP port, another service).
var ErrNotNATS = errors.New("the server does not speak the NATS protocol")

// CheckURL checks a NATS URL as Config.URL takes it: comma-separated
// seeds, each host:port or a URL whose scheme is one of URLSchemes. An
// http or https URL is refused with the hint that NATS's HTTP port (8222)
// is for monitoring and clients connect to the client port (4222). The
// empty URL (the embedded server) is valid. Errors show the URL without
// its credentials.
func CheckURL(s string) error {
	if strings.TrimSpace(s) == "" {
		return nil
	}
	seeds := strings.Split(s, ",")
	for i, seed := range seeds {
		seed = strings.TrimSpace(seed)
		if seed == "" {
			return fmt.Errorf("%w: an empty server between commas (server %d of %d)", ErrBadURL, i+1, len(seeds))
		}
		scheme, _, ok := strings.Cut(seed, "://")
		if !ok {
			// host:port, nats:// by default, as the client reads it: its
			// parse errors would show a password the seed holds.
			scheme, seed = "nats", "nats://"+seed
		}
		u, err := redact.ParseURL("NATS server URL", seed)
		if err != nil {
			return fmt.Errorf("%w: %w", ErrBadURL, err)
		}
		// A single URL is shown without its credentials; a server of a
		// list only by its place: a ',' in a password splits it, and
		// what follows could pass for a host.
		name, host := redact.Shown(u), u.Hostname()
		if len(seeds) > 1 {
			name, host = fmt.Sprintf("server %d of %d", i+1, len(seeds)), ""
		}
		switch scheme = strings.ToLower(scheme); {
		case slices.Contains(URLSchemes, scheme):
			if u.Hostname() == "" {
				return fmt.Errorf("%w: %s has no host", ErrBadURL, name)
			}
		case scheme == "http" || scheme == "https":
			return fmt.Errorf("%w: %s is an HTTP URL; NATS clients connect with %s (the HTTP port, 8222 by default, is the server's monitoring port; the client port is usually 4222, e.g. nats://%s:4222)",
				ErrBadURL, name, schemeList(), hostOr(host, "HOST"))
		default:
			return fmt.Errorf("%w: %s: scheme %q; want %s", ErrBadURL, name, scheme, schemeList())
		}
	}
	return nil
}

func schemeList() string {
	s := make([]string, len(URLSchemes))
	for i, v := range URLSchemes {
		s[i] = v + "://"
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}

func hostOr(host, def string) string {
	if host == "" {
		return def
	}
	if strings.Contains(host, ":") {
		return "[" + host + "]"
	}
	return host
}

// probeProtocol tells why a connect to url failed when a server answered
// but not as NATS does: it dials each nats:// seed (tls:// may want a TLS
// handshake first, ws and wss speak HTTP) and reads its greeting, which a
// NATS server sends at once ("INFO {...}"). A seed that sends something
// else, answers a GET with HTTP or closes the connection is an error
// matching ErrNotNATS; nil when every seed greets as NATS or cannot be
// reached (the connect error says why).
func probeProtocol(ctx context.Context, url string, timeout time.Duration) error {
	for _, seed := range strings.Split(url, ",") {
		seed = strings.TrimSpace(seed)
		scheme, rest, ok := strings.Cut(seed, "://")
		if !ok {
			scheme, rest = "nats", seed
		}
		if strings.ToLower(scheme) != "nats" {
			continue
		}
		host := rest
		if i := strings.IndexAny(host, "/?#"); i >= 0 {
			host = host[:i]
		}
		if i := strings.LastIndexByte(host, '@'); i >= 0 {
			host = host[i+1:]
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(strings.Trim(host, "[]"), "4222")
		}
		if what := greeting(ctx, host, timeout); what != "" {
			return fmt.Errorf("%w: %s %s (is it the right port? NATS clients use the client port, usually 4222; 8222 is the monitoring port)", ErrNotNATS, redact.URL(seed), what)
		}
	}
	return nil
}

// greeting dials addr and says what it answered instead of NATS's INFO
// line ("" for INFO, or when it cannot be reached).
func greeting(ctx context.Context, addr string, timeout time.Duration) string {
	d := net.Dialer{Timeout: timeout}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ""
	}
	defer conn.Close()
	first := readSome(conn, timeout)
	switch {
	case bytes.HasPrefix(first, []byte("INFO")):
		return ""
	case len(first) > 0:
		if bytes.HasPrefix(first, []byte("HTTP/")) {
			return "answered HTTP"
		}
		return fmt.Sprintf("sent %q, not NATS's INFO greeting", trimGreeting(first))
	}
	// Silent, or closed: an HTTP server waits for a request.
	if _, err := conn.Write([]byte("GET / HTTP/1.0\r\n\r\n")); err != nil {
		return "closed the connection without NATS's INFO greeting"
	}
	if bytes.HasPrefix(readSome(conn, timeout), []byte("HTTP/")) {
		return "is an HTTP server"
	}
	return "sent no NATS INFO greeting"
}

// readSome reads what conn sends within timeout (at most 64 bytes).
func readSome(conn net.Conn, timeout time.Duration) []byte {
	_ = conn.SetReadDeadline(time.Now().Add(timeout))
	buf := make([]byte, 64)
	n := 0
	for n < 5 {
		k, err := conn.Read(buf[n:])
		n += k
		if err != nil {
			break
		}
	}
	return buf[:n]
}

func trimGreeting(b []byte) string {
	if i := bytes.IndexAny(b, "\r\n"); i >= 0 {
		b = b[:i]
	}
	return string(b)
}
