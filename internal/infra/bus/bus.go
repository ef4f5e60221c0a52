package bus

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ClaimStore keeps message bodies that are too large for the server's
// payload limit. *blob.Store implements it.
type ClaimStore interface {
	PutBytes(ctx context.Context, b []byte) (blob.Ref, error)
	Get(ctx context.Context, sha256 string) (io.ReadCloser, error)
}

// Config says how to reach NATS.
type Config struct {
	// URL of an external server or cluster (comma-separated seeds). Empty
	// starts an embedded server with its file store under DataDir/nats.
	URL string
	// DataDir is the data directory of the embedded server.
	DataDir string
	// Credentials for an external server: user/password, token, or a
	// .creds file (JWT + nkey).
	User, Password, Token, CredsFile string
	// TLS for an external server: CA bundle, client certificate and key.
	TLSCA, TLSCert, TLSKey string
	// Name is the connection name shown by the server (e.g. "judge@host").
	Name string
	// Timeout bounds every request to the server (default 10 s).
	Timeout time.Duration
	// Claims stores bodies above the payload limit; nil makes such a
	// publish fail with ErrTooLarge.
	Claims ClaimStore
	// Logger (default slog.Default()).
	Logger *slog.Logger
	// Metrics (default: unregistered metrics; see NewMetrics).
	Metrics *Metrics
	// EmbeddedMaxPayload overrides the embedded server's payload limit
	// (default 1 MiB, the NATS default).
	EmbeddedMaxPayload int32
	// RetryBudget bounds how long Publish, dead-letter copies and acks keep
	// retrying transient errors (leader elections, a node restarting, a
	// short outage; see IsTransient) before they fail (default
	// DefaultRetryBudget).
	RetryBudget time.Duration
}

// ErrTooLarge is returned for a body above the payload limit when no claim
// store is configured.
var ErrTooLarge = errors.New("message above the server's payload limit")

// ErrDataDirInUse is returned when another process runs the embedded
// server on the same data directory.
var ErrDataDirInUse = errors.New("data directory in use by another codapipe process")

// Bus is a connection to JetStream, with the embedded server it started, if any.
type Bus struct {
	nc      *nats.Conn
	js      jetstream.JetStream
	srv     *server.Server
	lock    *os.File
	claims  ClaimStore
	log     *slog.Logger
	metrics *Metrics
	timeout time.Duration
	budget  time.Duration
	// lastSettle is when this bus last acked, nakked or terminated a
	// message (unix nanoseconds), for stopEmbedded.
	lastSettle atomic.Int64

	// What Ready checks: the streams ensured and the consumers running
	// (counted: Consume may run one durable twice at once).
	readyMu   sync.Mutex
	streams   map[string]bool
	consumers map[consumerKey]int
}

// consumerFlushWait is how long after the last ack the embedded server is
// left running before it stops. nats-server (v2.15) writes a consumer's
// state to its file store from a flusher at most every 100 ms; when an ack
// lands between the flusher encoding the state and writing it, the write
// of the older state clears the "dirty" mark, and a stop within the next
// 100 ms writes nothing more: the ack is lost on disk and the acked message
// is delivered again after the restart (TestRestartKeepsUnacknowledgedMessages
// flaked so). Waiting this long lets the flusher's next pass write the
// newest state first.
const consumerFlushWait = 300 * time.Millisecond

// settled records that a message was just acked, nakked or terminated.
func (b *Bus) settled() { b.lastSettle.Store(time.Now().UnixNano()) }

// Open connects to NATS (or starts the embedded server) and returns a Bus.
// Close it to release the connection and stop the embedded server.
func Open(ctx context.Context, cfg Config) (*Bus, error) {
	b := &Bus{claims: cfg.Claims, log: cfg.Logger, metrics: cfg.Metrics, timeout: cfg.Timeout, budget: cfg.RetryBudget}
	if b.log == nil {
		b.log = slog.Default()
	}
	if b.metrics == nil {
		b.metrics = NewMetrics(nil)
	}
	if b.timeout <= 0 {
		b.timeout = 10 * time.Second
	}
	url := cfg.URL
	opts := []nats.Option{
		nats.Name(cfg.Name),
		nats.Timeout(b.timeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(time.Second),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				b.log.Warn("nats disconnected", "err", err)
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) { b.log.Info("nats reconnected", "url", nc.ConnectedUrlRedacted()) }),
		// The client's asynchronous errors (a pull request whose consumer
		// is gone while the server is away, a slow consumer) go through
		// the log, in its format; without a handler the library writes
		// them raw to stderr.
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			if sub != nil {
				b.log.Warn("nats: asynchronous error", "subject", sub.Subject, "err", err)
				return
			}
			b.log.Warn("nats: asynchronous error", "err", err)
		}),
	}
	if url == "" {
		if err := b.startEmbedded(cfg); err != nil {
			return nil, err
		}
		url = b.srv.ClientURL()
	} else {
		if err := CheckURL(url); err != nil {
			return nil, fmt.Errorf("bus: %w", err)
		}
		o, err := authOptions(cfg)
		if err != nil {
			return nil, err
		}
		opts = append(opts, o...)
	}
	nc, err := nats.Connect(url, opts...)
	if err != nil {
		b.stopEmbedded()
		if cfg.URL != "" { // a server that answered, but not as NATS does, says so
			if perr := probeProtocol(ctx, url, min(b.timeout, probeTimeout)); perr != nil {
				return nil, fmt.Errorf("bus: connect to %s: %w (%w)", redact.URL(url), perr, err)
			}
		}
		return nil, fmt.Errorf("bus: connect to %s: %w", redact.URL(url), err)
	}
	b.nc = nc
	js, err := jetstream.New(nc, jetstream.WithDefaultTimeout(b.timeout))
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("bus: jetstream: %w", err)
	}
	b.js = js
	// Fail early with a clear message when JetStream is not enabled.
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	if _, err := js.AccountInfo(cctx); err != nil {
		b.Close()
		return nil, fmt.Errorf("bus: %s: JetStream not available (is it enabled on the server?): %w", redact.URL(url), err)
	}
	return b, nil
}

func authOptions(cfg Config) ([]nats.Option, error) {
	var o []nats.Option
	if cfg.User != "" || cfg.Password != "" {
		o = append(o, nats.UserInfo(cfg.User, cfg.Password))
	}
	if cfg.Token != "" {
		o = append(o, nats.Token(cfg.Token))
	}
	if cfg.CredsFile != "" {
		if _, err := os.Stat(cfg.CredsFile); err != nil {
			return nil, fmt.Errorf("bus: credentials file: %w", err)
		}
		o = append(o, nats.UserCredentials(cfg.CredsFile))
	}
	if cfg.TLSCA != "" {
		o = append(o, nats.RootCAs(cfg.TLSCA))
	}
	switch {
	case cfg.TLSCert != "" && cfg.TLSKey != "":
		o = append(o, nats.ClientCert(cfg.TLSCert, cfg.TLSKey))
	case cfg.TLSCert != "" || cfg.TLSKey != "":
		return nil, errors.New("bus: TLS client certificate and key must be given together")
	}
	return o, nil
}

// startEmbedded starts a loopback-only JetStream server with its store
// under DataDir/nats, guarded by an exclusive lock on that directory.
func (b *Bus) startEmbedded(cfg Config) error {
	if cfg.DataDir == "" {
		return errors.New("bus: embedded server: no data directory")
	}
	dir := filepath.Join(cfg.DataDir, "nats")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("bus: embedded server: %w", err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, "LOCK"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return fmt.Errorf("bus: embedded server: %w", err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return fmt.Errorf("bus: embedded server on %s: %w; give the processes a shared server with --nats URL", dir, ErrDataDirInUse)
	}
	b.lock = lock
	opts := &server.Options{
		ServerName: "codapipe-embedded",
		Host:       "127.0.0.1",
		Port:       server.RANDOM_PORT,
		JetStream:  true,
		StoreDir:   dir,
		NoSigs:     true,
		NoLog:      true,
		MaxPayload: cfg.EmbeddedMaxPayload,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		b.stopEmbedded()
		return fmt.Errorf("bus: embedded server: %w", err)
	}
	srv.SetLoggerV2(slogLogger{b.log.With("component", "nats-server")}, false, false, false)
	go srv.Start() // owned by b: stopped in stopEmbedded
	b.srv = srv
	if !srv.ReadyForConnections(30 * time.Second) {
		b.stopEmbedded()
		return errors.New("bus: embedded server did not become ready within 30s")
	}
	b.log.Debug("embedded nats server started", "url", srv.ClientURL(), "store", dir)
	return nil
}

func (b *Bus) stopEmbedded() {
	if b.srv != nil {
		if last := b.lastSettle.Load(); last != 0 {
			time.Sleep(time.Until(time.Unix(0, last).Add(consumerFlushWait))) // see consumerFlushWait
		}
		b.srv.Shutdown()
		b.srv.WaitForShutdown()
		b.srv = nil
	}
	if b.lock != nil {
		syscall.Flock(int(b.lock.Fd()), syscall.LOCK_UN)
		b.lock.Close()
		b.lock = nil
	}
}

// Close drains the connection (pending publishes are flushed) and stops the
// embedded server.
func (b *Bus) Close() error {
	var err error
	if b.nc != nil {
		done := make(chan struct{})
		b.nc.SetClosedHandler(func(*nats.Conn) { close(done) })
		if err = b.nc.Drain(); err == nil {
			select {
			case <-done:
			case <-time.After(b.timeout):
				b.nc.Close()
			}
		} else {
			b.nc.Close()
		}
		b.nc = nil
	}
	b.stopEmbedded()
	return err
}

// JetStream returns the underlying JetStream handle, for inspection.
func (b *Bus) JetStream() jetstream.JetStream { return b.js }

// URL returns the client URL of the embedded server, or "" when connected
// to an external server.
func (b *Bus) URL() string {
	if b.srv == nil {
		return ""
	}
	return b.srv.ClientURL()
}

// MaxPayload is the server's payload limit for this connection.
func (b *Bus) MaxPayload() int64 { return b.nc.MaxPayload() }

// CheckPayload returns an error wrapping ErrTooLarge when a message (a
// key-value entry) of n bytes cannot be stored whole: what a writer with
// no claim check knows before it writes, so that too large is a permanent
// error, not a failed write retried as transient.
func (b *Bus) CheckPayload(n int) error {
	if limit := b.nc.MaxPayload() - headerAllowance; int64(n) > limit {
		return fmt.Errorf("%w: %d bytes, the server takes %d (its max_payload, less room for headers)", ErrTooLarge, n, limit)
	}
	return nil
}

// Headers codapipe sets on messages.
const (
	HeaderClaim     = "Coda-Claim"      // "sha256:<hex>" of a body kept in the claim store
	HeaderClaimSize = "Coda-Claim-Size" // its size in bytes
	// Dead letters carry the original headers plus these.
	HeaderDeadReason     = "Coda-Dead-Reason"
	HeaderDeadSubject    = "Coda-Dead-Subject"
	HeaderDeadStream     = "Coda-Dead-Stream"
	HeaderDeadSeq        = "Coda-Dead-Seq"
	HeaderDeadConsumer   = "Coda-Dead-Consumer"
	HeaderDeadDeliveries = "Coda-Dead-Deliveries"
	HeaderDeadMsgID      = "Coda-Dead-Msg-Id" // the original message id
)

// headerAllowance is what Publish keeps free below the payload limit for
// headers and the subject.
const headerAllowance = 8 << 10

// PubAck says where a message was stored.
type PubAck struct {
	Stream    string
	Seq       uint64
	Duplicate bool // the id was already stored within the window: a no-op
	Claimed   bool // the body went to the claim store
}

// Publish stores body on subject with id as the JetStream message id, so a
// re-publish of the same id within the de-duplication window is a no-op
// (PubAck.Duplicate). A body too large for the payload limit is put in the
// claim store and the message carries its reference; Consume resolves it.
//
// A transient failure (a timeout, no responders while a stream leader is
// elected, a reconnecting connection, a cluster in transition: IsTransient)
// is retried with backoff for up to Config.RetryBudget; the message id makes
// a repeat of a publish that was stored but whose answer was lost a no-op.
// Each attempt has the bus's request deadline.
func (b *Bus) Publish(ctx context.Context, subject, id string, body []byte, hdr nats.Header) (PubAck, error) {
	if id == "" {
		return PubAck{}, fmt.Errorf("bus: publish to %s: empty message id", subject)
	}
	m := &nats.Msg{Subject: subject, Header: nats.Header{}, Data: body}
	for k, v := range hdr {
		m.Header[k] = append([]string(nil), v...)
	}
	claimed := false
	if int64(len(body)) > b.nc.MaxPayload()-headerAllowance {
		if b.claims == nil {
			return PubAck{}, fmt.Errorf("bus: publish %s to %s: %d bytes, and no claim store configured: %w", id, subject, len(body), ErrTooLarge)
		}
		ref, err := b.claims.PutBytes(ctx, body)
		if err != nil {
			return PubAck{}, fmt.Errorf("bus: publish %s to %s: claim check: %w", id, subject, err)
		}
		m.Header.Set(HeaderClaim, "sha256:"+ref.SHA256)
		m.Header.Set(HeaderClaimSize, strconv.Itoa(len(body)))
		m.Data = nil
		claimed = true
	}
	ack, err := retryFor(ctx, b, "publish", func(ctx context.Context) (*jetstream.PubAck, error) {
		cctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		return b.js.PublishMsg(cctx, m, jetstream.WithMsgID(id))
	}, "subject", subject, "id", id)
	if err != nil {
		b.metrics.publishErrors.Inc()
		return PubAck{}, fmt.Errorf("bus: publish %s to %s: %w", id, subject, err)
	}
	b.metrics.observePublish(ack.Stream, len(body), ack.Duplicate, claimed)
	return PubAck{Stream: ack.Stream, Seq: ack.Sequence, Duplicate: ack.Duplicate, Claimed: claimed}, nil
}

// retry runs op with RetryTransient within the bus's retry budget, counting
// and logging each retry of op (one of the codapipe_bus_retries_total op
// labels: publish, dead_letter, ack).
func (b *Bus) retry(ctx context.Context, what string, op func(context.Context) error, logArgs ...any) error {
	return RetryTransient(ctx, b.budget, op, func(attempt int, err error) {
		b.metrics.retries.WithLabelValues(what).Inc()
		b.log.Warn("bus: transient error; retrying", append([]any{"op", what, "attempt", attempt, "err", err}, logArgs...)...)
	})
}

// retryFor is retry of an op with a result: the result of its last
// attempt.
func retryFor[T any](ctx context.Context, b *Bus, what string, op func(context.Context) (T, error), logArgs ...any) (T, error) {
	var v T
	err := b.retry(ctx, what, func(ctx context.Context) error {
		var err error
		v, err = op(ctx)
		return err
	}, logArgs...)
	return v, err
}

// resolve returns the message body, fetching it from the claim store when
// the message carries a claim reference.
func (b *Bus) resolve(ctx context.Context, hdr nats.Header, data []byte) ([]byte, bool, error) {
	ref := hdr.Get(HeaderClaim)
	if ref == "" {
		return data, false, nil
	}
	sha, ok := strings.CutPrefix(ref, "sha256:")
	if !ok {
		return nil, true, fmt.Errorf("%w: reference %q: want sha256:<hex>", errBadClaim, ref)
	}
	if b.claims == nil {
		return nil, true, fmt.Errorf("%w: reference %s but no claim store configured", errBadClaim, ref)
	}
	want, err := strconv.ParseInt(hdr.Get(HeaderClaimSize), 10, 64)
	if err != nil {
		return nil, true, fmt.Errorf("%w: %s: bad %s header: %w", errBadClaim, ref, HeaderClaimSize, err)
	}
	rc, err := b.claims.Get(ctx, sha)
	if err != nil {
		return nil, true, claimErr(ref, err)
	}
	defer rc.Close()
	data, err = io.ReadAll(io.LimitReader(rc, want+1))
	if err != nil {
		return nil, true, claimErr(ref, err)
	}
	if int64(len(data)) != want {
		return nil, true, fmt.Errorf("%w: %s: %d bytes, header says %d", errBadClaim, ref, len(data), want)
	}
	return data, true, nil
}

// errBadClaim marks a claim that cannot be resolved however often it is
// tried (malformed reference, missing or damaged blob); other claim errors
// (timeouts, an unavailable store) are worth a retry.
var errBadClaim = errors.New("bad claim")

// claimErr wraps a claim store error, marking the permanent ones.
func claimErr(ref string, err error) error {
	if errors.Is(err, blob.ErrNotFound) || blob.Damaged(err) || errors.Is(err, blob.ErrInvalidKey) {
		return fmt.Errorf("%w: %s: %w", errBadClaim, ref, err)
	}
	return fmt.Errorf("claim %s: %w", ref, err)
}
