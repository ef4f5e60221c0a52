package guest

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/infra/redact"
)

// Defaults of Options. The retry and screenshot values are those of the
// OSWorld/ScienceBoard Python clients (3 retries 5 s apart, 10 s for a
// screenshot); DefaultExecuteTimeout sits above the guest's own 120 s limit
// so the guest's timeout answer arrives before ours fires.
const (
	DefaultPort                 = 5000
	DefaultStatePort            = 8000
	DefaultScreenshotTimeout    = 10 * time.Second
	DefaultExecuteTimeout       = 130 * time.Second
	DefaultAccessibilityTimeout = 30 * time.Second
	DefaultStateTimeout         = 30 * time.Second
	DefaultFileTimeout          = 60 * time.Second
	DefaultCallTimeout          = 10 * time.Second
	DefaultRetries              = 3
	DefaultRetryWait            = 5 * time.Second
	DefaultMaxRetryWait         = 30 * time.Second
	DefaultMaxBodyBytes         = 256 << 20
	DefaultPython               = "python3"
)

// PyAutoGUIPrefix is what ExecPyAutoGUI puts before the code, as the
// OSWorld Python controller does.
const PyAutoGUIPrefix = "import pyautogui; import time; pyautogui.FAILSAFE = False; "

// Options configure a Client. The zero value is the defaults.
type Options struct {
	// StateURL is the base URL of a ScienceBoard VM's app server: the
	// application's own HTTP server (KAlgebra /vars, /func/2d, /tab;
	// Celestia POST /dump; GRASS GIS /dump, /gcmd, /init/*; ChimeraX's
	// REST server GET /run?command=), which Call sends
	// Request{Server: ServerApp} to. The guest server's own routes (/chimerax/run,
	// /read, /write, /append, /lean/check, /tex/check) are on the base
	// URL. Default: the guest's host on port 8000, where ScienceBoard
	// puts it. The simulator serves its app server on a port of its own:
	// pass its URL (internal/sim/guest Server.AppURL; the pool's sim
	// backend reads it from GET /sim/health).
	StateURL string
	// HTTPClient sends the requests. Default: NewHTTPClient(). Its
	// Timeout, if any, applies on top of ours.
	HTTPClient *http.Client

	// Per-call timeouts; zero or negative means the default. A call never
	// waits without a bound. Each attempt of a call gets the full timeout;
	// the caller's context bounds the whole call.
	ScreenshotTimeout    time.Duration // GET /screenshot; default 10 s
	ExecuteTimeout       time.Duration // /execute, /setup/execute; default 130 s
	AccessibilityTimeout time.Duration // GET /accessibility; default 30 s
	StateTimeout         time.Duration // app server calls; default 30 s
	FileTimeout          time.Duration // /file, /setup/upload; default 60 s
	DefaultTimeout       time.Duration // everything else; default 10 s

	// Retries is the number of retries after the first attempt of an
	// idempotent call that failed with a transport error, a 5xx answer or
	// a malformed payload (0: DefaultRetries; negative: no retries). A call
	// that timed out is not retried: a guest that does not answer is
	// wedged far more often than slow, and the pool, not the client,
	// decides what to do with it.
	Retries int
	// RetryWait is the wait before the first retry (0: DefaultRetryWait;
	// negative: no wait). It doubles with each retry up to MaxRetryWait
	// (0: DefaultMaxRetryWait), and each wait is drawn uniformly from its
	// upper half (jitter), so many clients do not retry in step.
	RetryWait    time.Duration
	MaxRetryWait time.Duration // the longest wait before a retry

	// Python is the interpreter ExecPyAutoGUI runs (default "python3").
	Python string
	// MaxBodyBytes caps the size of an answer (default 256 MiB).
	MaxBodyBytes int64
}

// Client is a client of one guest server. It is safe for concurrent use.
type Client struct {
	base    *url.URL // guest server, no trailing slash
	state   *url.URL // app-state server
	client  *http.Client
	opts    Options // defaults filled in
	retries int
}

// New returns a client of the guest server at baseURL
// ("http://10.0.0.5:5000"; a bare "host" or "host:port" means http, port
// 5000 by default).
func New(baseURL string, opts Options) (*Client, error) {
	base, err := ParseURL(baseURL, DefaultPort)
	if err != nil {
		return nil, fmt.Errorf("vmpool: guest URL: %w", err)
	}
	var state *url.URL
	if opts.StateURL != "" {
		if state, err = ParseURL(opts.StateURL, DefaultStatePort); err != nil {
			return nil, fmt.Errorf("vmpool: state URL: %w", err)
		}
	} else {
		s := *base
		s.Host = net.JoinHostPort(base.Hostname(), strconv.Itoa(DefaultStatePort))
		state = &s
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.ScreenshotTimeout, DefaultScreenshotTimeout)
	def(&opts.ExecuteTimeout, DefaultExecuteTimeout)
	def(&opts.AccessibilityTimeout, DefaultAccessibilityTimeout)
	def(&opts.StateTimeout, DefaultStateTimeout)
	def(&opts.FileTimeout, DefaultFileTimeout)
	def(&opts.DefaultTimeout, DefaultCallTimeout)
	def(&opts.MaxRetryWait, DefaultMaxRetryWait)
	switch {
	case opts.RetryWait == 0:
		opts.RetryWait = DefaultRetryWait
	case opts.RetryWait < 0:
		opts.RetryWait = 0
	}
	retries := opts.Retries
	switch {
	case retries == 0:
		retries = DefaultRetries
	case retries < 0:
		retries = 0
	}
	if opts.Python == "" {
		opts.Python = DefaultPython
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	client := opts.HTTPClient
	if client == nil {
		client = NewHTTPClient()
	}
	opts.StateURL = state.String()
	return &Client{base: base, state: state, client: client, opts: opts, retries: retries}, nil
}

// NewHTTPClient returns an HTTP client with a transport of its own (5 s
// dial timeout, up to 4 idle connections a host), the client New uses when
// Options.HTTPClient is nil. Its CloseIdleConnections leaves no goroutine
// behind.
func NewHTTPClient() *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	tr.MaxIdleConnsPerHost = 4
	return &http.Client{Transport: tr}
}

// ParseURL parses the address of a guest or app-state server as New does:
// a bare "host" or "host:port" means http, a missing port is defaultPort,
// and a trailing slash is dropped. Only scheme://host:port[/path] is
// accepted.
func ParseURL(raw string, defaultPort int) (*url.URL, error) {
	s := strings.TrimSpace(raw)
	if s == "" {
		return nil, errors.New("empty")
	}
	if !strings.Contains(s, "://") {
		s = "http://" + s
	}
	if strings.Contains(s, "@") {
		// Not shown: an '@' is where user information ends, and a
		// password may hold what makes the URL not parse.
		return nil, errors.New("an '@' in the URL: want scheme://host:port[/path] only, without user information (the URL is not shown: it may hold a password)")
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("%q: %w", redact.URL(raw), err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%q: scheme %q, want http or https", redact.URL(raw), u.Scheme)
	}
	if u.Hostname() == "" {
		return nil, fmt.Errorf("%q: no host", redact.URL(raw))
	}
	if u.Port() == "" {
		u.Host = net.JoinHostPort(u.Hostname(), strconv.Itoa(defaultPort))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%q: want scheme://host:port[/path] only", redact.URL(raw))
	}
	u.Path = strings.TrimRight(u.Path, "/")
	u.RawPath = ""
	return u, nil
}

// Host is the guest server's host:port, as errors name it.
func (g *Client) Host() string { return g.base.Host }

// BaseURL is the guest server's base URL.
func (g *Client) BaseURL() string { return g.base.String() }

// StateURL is the app-state server's base URL.
func (g *Client) StateURL() string { return g.state.String() }
