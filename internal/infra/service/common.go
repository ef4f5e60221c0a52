package service

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// Common are the flags every service has.
type Common struct {
	DataDir     string
	NATS        bus.Config
	Store       string // blob store URL; "" → <data>/blobs
	LogLevel    string
	LogFormat   string // auto, text or json
	MetricsAddr string
	Drain       bool
	// Progress is how often a consumer logs its counts so far (0: every
	// DrainProgress with --drain, every WorkerProgress otherwise;
	// negative: never).
	Progress time.Duration
	// Replicas of the streams and buckets this process creates;
	// UpdateTopology applies the topology to existing ones too.
	Replicas       int
	UpdateTopology bool
}

// OutageBudgetFlag defines --outage-budget (CODAPIPE_OUTAGE_BUDGET) of a
// command whose model endpoints have an outage breaker (model.Outages);
// def is the default budget, left what becomes of the work not done.
func OutageBudgetFlag(f *Flags, p *time.Duration, def time.Duration, left string) {
	f.Duration(p, "outage-budget", "CODAPIPE_OUTAGE_BUDGET", def, "how long to wait for a model endpoint that is down for everyone (its calls and its /models probe fail) before stopping with exit code 1 ("+left+"); during the wait no new work starts, and the work the outage interrupted is done again, not counted as failed")
}

// RegisterCommon defines the common flags on f; consumer adds --drain
// (only commands that consume a stream honour it).
func RegisterCommon(f *Flags, consumer bool) *Common {
	c := &Common{}
	f.Group(GroupBus)
	f.String(&c.DataDir, "data", "CODAPIPE_DATA", "./.codapipe", "data directory: embedded NATS store, default blob store")
	f.String(&c.NATS.URL, "nats", "NATS_URL", "", "NATS server or cluster URL(s); empty starts an embedded server in the data directory")
	f.String(&c.NATS.User, "nats-user", "NATS_USER", "", "NATS user")
	f.Secret(&c.NATS.Password, "nats-password", "NATS_PASSWORD", "NATS password")
	f.Secret(&c.NATS.Token, "nats-token", "NATS_TOKEN", "NATS token")
	f.String(&c.NATS.CredsFile, "nats-creds", "NATS_CREDS", "", "NATS credentials file (JWT + nkey)")
	f.String(&c.NATS.TLSCA, "nats-ca", "NATS_CA", "", "CA bundle for the NATS server's TLS certificate")
	f.String(&c.NATS.TLSCert, "nats-cert", "NATS_CERT", "", "TLS client certificate")
	f.String(&c.NATS.TLSKey, "nats-key", "NATS_KEY", "", "TLS client key")
	f.Duration(&c.NATS.Timeout, "nats-timeout", "CODAPIPE_NATS_TIMEOUT", 10*time.Second, "deadline of each request to NATS")
	f.String(&c.Store, "store", "CODAPIPE_STORE", "", "blob store: a directory, file:///dir or s3://bucket/prefix (S3 endpoint and credentials from AWS_* / MINIO_* variables); empty: <data>/blobs")
	f.Group(GroupOutput)
	f.String(&c.LogLevel, "log-level", "CODAPIPE_LOG_LEVEL", "info", "log level: debug, info, warn, error")
	f.String(&c.LogFormat, "log-format", "CODAPIPE_LOG_FORMAT", LogAuto, "log format: auto (text on a terminal, JSON otherwise), text (one human line per event) or json (for log collectors)")
	f.String(&c.MetricsAddr, "metrics-addr", "CODAPIPE_METRICS_ADDR", "", "serve Prometheus metrics (/metrics) and health (/healthz, /readyz) on this address (e.g. 127.0.0.1:9464); empty: off")
	if consumer {
		f.Group(GroupRun)
		f.Bool(&c.Drain, "drain", "CODAPIPE_DRAIN", false, "batch mode: process what is there, then exit")
		f.Group(GroupOutput)
		f.Duration(&c.Progress, "progress-every", "CODAPIPE_PROGRESS_EVERY", 0, "log the counts so far this often (0: every 10s with --drain, every minute for a long-running worker; negative: never)")
	}
	f.Group(GroupBus)
	f.Int(&c.Replicas, "replicas", "CODAPIPE_REPLICAS", 1, "replicas of the JetStream streams and buckets this process creates (3 on a cluster); existing ones are left as they are")
	f.Bool(&c.UpdateTopology, "update-topology", "CODAPIPE_UPDATE_TOPOLOGY", false, "apply codapipe's stream and bucket configuration (with --replicas) to existing ones too")
	return c
}

// Check checks the common flags that can be checked before anything
// starts: --nats is a NATS URL (bus.CheckURL).
func (c *Common) Check() error {
	if err := bus.CheckURL(c.NATS.URL); err != nil {
		return fmt.Errorf("--nats: %w", err)
	}
	return nil
}

// Default intervals of a consumer's progress line (Common.Progress).
const (
	DrainProgress  = 10 * time.Second
	WorkerProgress = time.Minute
)

// ProgressEvery is how often a consumer logs its counts: --progress-every,
// or its default for a drain or a worker; 0 for never.
func (c *Common) ProgressEvery() time.Duration {
	switch {
	case c.Progress < 0:
		return 0
	case c.Progress > 0:
		return c.Progress
	case c.Drain:
		return DrainProgress
	}
	return WorkerProgress
}

// Topology is the bus topology for these flags: the default streams, with
// the replicas to create them with and whether to update existing ones.
func (c *Common) Topology() bus.Topology {
	t := bus.DefaultTopology()
	t.Replicas, t.Update = max(c.Replicas, 1), c.UpdateTopology
	return t
}

// StoreURL is the blob store URL, defaulting to <data>/blobs.
func (c *Common) StoreURL() string {
	if c.Store != "" {
		return c.Store
	}
	return filepath.Join(c.DataDir, "blobs")
}

// BusConfig is the bus configuration for these flags.
func (c *Common) BusConfig() bus.Config {
	cfg := c.NATS
	cfg.DataDir = c.DataDir
	return cfg
}

// WorkerStopped is the error a long-running worker (a consumer without
// --drain) ends with: nil when it was stopped (ctx ended: SIGTERM, SIGINT)
// and err is only that cancellation showing through, so that a stop at any
// moment, also during start-up or the last commit, exits 0 (what is not
// acknowledged is delivered again); err otherwise.
func WorkerStopped(ctx context.Context, drain bool, err error) error {
	if !drain && err != nil && ctx.Err() != nil && errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
