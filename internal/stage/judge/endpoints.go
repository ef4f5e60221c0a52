package judge

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"golang.org/x/time/rate"

	"github.com/codapipe/codapipe/internal/contract/model"
	"github.com/codapipe/codapipe/internal/infra/redact"
)

// EndpointSpec is one judge endpoint of the ensemble: --judge URL=MODEL.
// A user:password@ in URL is sent as HTTP basic authentication (in place
// of Limits.APIKey) and recorded nowhere: votes, calls, errors and
// metrics name the endpoint by Name.
type EndpointSpec struct {
	URL, Model string
}

// Name is the endpoint as judgements record it: its URL with any
// credentials replaced by *** (redact.URL), stable across password
// changes; New refuses an ensemble whose endpoints differ only in their
// credentials, so it is distinct per endpoint.
func (s EndpointSpec) Name() string {
	if u, err := redact.ParseURL("--judge", s.URL); err == nil {
		return redact.Shown(u) // a ',' in a password is no list separator here
	}
	return redact.URL(s.URL)
}

// ParseEndpoint reads "URL=MODEL", e.g.
// "http://judge-a:8000/v1=Qwen2.5-VL-72B-Instruct" (the last "=" splits).
func ParseEndpoint(v string) (EndpointSpec, error) {
	i := strings.LastIndex(v, "=")
	if i <= 0 || i == len(v)-1 {
		// Not shown: a value that is not URL=MODEL may be a URL whose
		// password makes it unparseable.
		return EndpointSpec{}, errors.New("--judge: want URL=MODEL, e.g. http://judge:8000/v1=Qwen2.5-VL-72B-Instruct (the value is not shown: it may hold a password)")
	}
	u, name := strings.TrimSpace(v[:i]), strings.TrimSpace(v[i+1:])
	if name == "" {
		return EndpointSpec{}, errors.New("--judge: no model after the last \"=\": want URL=MODEL (the value is not shown: it may hold a password)")
	}
	if _, err := model.CheckBaseURL("--judge", u); err != nil {
		return EndpointSpec{}, err
	}
	return EndpointSpec{URL: u, Model: name}, nil
}

// Limits bound the calls to each endpoint.
type Limits struct {
	// Concurrency is the most requests in flight to one endpoint
	// (default 8).
	Concurrency int
	// Rate is the most requests started per second on one endpoint, a
	// token bucket with a burst of Concurrency; 0 is unlimited.
	Rate float64
	// AttemptTimeout bounds one HTTP attempt (default 120 s); Attempts
	// bounds the attempts of one call (429, 5xx and transport errors are
	// retried with exponential backoff from Backoff, with jitter).
	AttemptTimeout time.Duration
	Attempts       int
	Backoff        time.Duration
	// MaxAnswerBytes bounds one answer (model.DefaultMaxAnswerBytes when
	// 0); --max-answer-bytes.
	MaxAnswerBytes int64
	// MaxImagePixels bounds one screenshot (imaging.DefaultMaxPixels when
	// 0; --max-image-pixels), MaxRequestPixels the frames of one call
	// together, as sent (DefaultMaxRequestPixels when 0;
	// --max-request-pixels). A trajectory beyond either is not judged: it
	// goes to the dead letters, with the limit and its flag.
	MaxImagePixels, MaxRequestPixels int64
	// APIKey is sent as a bearer token to every endpoint.
	APIKey string
}

// endpoint is one judge endpoint with its limits: a call holds one of
// its concurrency slots from start to end (retries and their backoff
// included), and every HTTP attempt takes a token of its rate limit.
type endpoint struct {
	spec  EndpointSpec
	name  string // spec.Name()
	model *model.Client
	slots chan struct{}
}

// acquire waits for a concurrency slot; release frees it.
func (e *endpoint) acquire(ctx context.Context) error {
	select {
	case e.slots <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (e *endpoint) release() { <-e.slots }

// rateLimited is a transport that waits for a token of its bucket before
// each request.
type rateLimited struct {
	bucket *rate.Limiter
	base   http.RoundTripper
}

func (l rateLimited) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := l.bucket.Wait(req.Context()); err != nil {
		return nil, err
	}
	return l.base.RoundTrip(req)
}

func newEndpoint(spec EndpointSpec, lim Limits, log *slog.Logger) (*endpoint, error) {
	conc := lim.Concurrency
	if conc <= 0 {
		conc = 8
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = conc
	var rt http.RoundTripper = tr
	if lim.Rate > 0 {
		rt = rateLimited{bucket: rate.NewLimiter(rate.Limit(lim.Rate), conc), base: tr}
	}
	m, err := model.New(model.Config{
		BaseURL: spec.URL, Model: spec.Model, APIKey: lim.APIKey,
		AttemptTimeout: lim.AttemptTimeout, Attempts: lim.Attempts, Backoff: lim.Backoff,
		MaxAnswerBytes: lim.MaxAnswerBytes, MaxAnswerFlag: "--max-answer-bytes",
		// Each attempt's deadline is its context's (AttemptTimeout).
		HTTPClient: &http.Client{Transport: rt},
	}, log)
	if err != nil {
		return nil, err
	}
	return &endpoint{spec: spec, name: spec.Name(), model: m, slots: make(chan struct{}, conc)}, nil
}
