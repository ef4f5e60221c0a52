package bus

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Kind is the kind of message a stream carries; it is the second token of
// the subject.
type Kind string

// The message kinds.
const (
	Raw      Kind = "traj"     // raw trajectories from rollout
	Judged   Kind = "judged"   // judged trajectories from judge
	Manifest Kind = "manifest" // shard manifests from advantage
	Dead     Kind = "dlq"      // dead letters from any consumer
)

// Kinds lists every kind, in pipeline order.
var Kinds = []Kind{Raw, Judged, Manifest, Dead}

// SubjectPrefix is the first token of every codapipe subject.
const SubjectPrefix = "coda"

// Subject returns the subject for messages of a kind about an app:
// "coda.<kind>.<app token>" (see AppToken).
func Subject(k Kind, app string) string {
	return SubjectPrefix + "." + string(k) + "." + AppToken(app)
}

// AllSubjects returns the wildcard subject of a kind: "coda.<kind>.>".
func AllSubjects(k Kind) string { return SubjectPrefix + "." + string(k) + ".>" }

// AppToken turns an application name into one subject token: letters,
// digits, '-' and '_' are kept, anything else (spaces, dots, wildcards)
// becomes '_'. "GRASS GIS" → "GRASS_GIS". An empty name becomes "_". A
// token longer than MaxAppToken (a name no command accepts, from a
// message someone else wrote) is cut and ends in a hash of the whole name,
// so that no subject outgrows what NATS accepts.
func AppToken(app string) string {
	if app == "" {
		return "_"
	}
	var b strings.Builder
	for _, r := range app {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	if b.Len() > MaxAppToken {
		sum := sha256.Sum256([]byte(app))
		return b.String()[:MaxAppToken-17] + "-" + hex.EncodeToString(sum[:8])
	}
	return b.String()
}

// MaxAppToken is the longest token AppToken returns, in bytes.
const MaxAppToken = 128

// StreamName returns the JetStream stream that holds a kind: "CODA_TRAJ",
// "CODA_JUDGED", "CODA_MANIFEST", "CODA_DLQ".
func StreamName(k Kind) string { return "CODA_" + strings.ToUpper(string(k)) }

// DeadSubject returns the dead-letter subject for a message that arrived on
// subject: "coda.<kind>.<app>" → "coda.dlq.<kind>.<app>"; subjects outside
// the codapipe prefix go to "coda.dlq.other.<subject>".
func DeadSubject(subject string) string {
	if rest, ok := strings.CutPrefix(subject, SubjectPrefix+"."); ok {
		return SubjectPrefix + "." + string(Dead) + "." + rest
	}
	return SubjectPrefix + "." + string(Dead) + ".other." + subject
}

// Topology configures the streams and key-value buckets.
type Topology struct {
	// Replicas per stream and bucket, used when one is created: 1 for the
	// embedded server, 3 on a cluster.
	Replicas int
	// Update applies this configuration to streams and buckets that exist
	// already. Off by default: an existing one is left as the operator
	// configured it (replicas, limits, max age), and only missing ones are
	// created.
	Update bool
	// MaxAge per kind; zero keeps messages until the stream's other limits.
	MaxAge map[Kind]time.Duration
	// Duplicates is the de-duplication window: a message id seen within it
	// is not stored again.
	Duplicates time.Duration
	// MaxMsgSize caps one stored message (default: the server's payload limit).
	MaxMsgSize int32
}

// DefaultTopology keeps raw trajectories 30 days, judged ones and manifests
// 90 days, dead letters 30 days, de-duplicates over 48 hours, one replica.
func DefaultTopology() Topology {
	return Topology{
		Replicas: 1,
		MaxAge: map[Kind]time.Duration{
			Raw:      30 * 24 * time.Hour,
			Judged:   90 * 24 * time.Hour,
			Manifest: 90 * 24 * time.Hour,
			Dead:     30 * 24 * time.Hour,
		},
		Duplicates: 48 * time.Hour,
	}
}

// StreamConfig returns the JetStream configuration of a kind's stream.
// Streams use limits retention (messages stay for every consumer and for
// archive reads until MaxAge), file storage, and the de-duplication window.
func (t Topology) StreamConfig(k Kind) jetstream.StreamConfig {
	r := t.Replicas
	if r < 1 {
		r = 1
	}
	return jetstream.StreamConfig{
		Name:        StreamName(k),
		Description: fmt.Sprintf("codapipe %s messages (%s)", k, AllSubjects(k)),
		Subjects:    []string{AllSubjects(k)},
		Retention:   jetstream.LimitsPolicy,
		Storage:     jetstream.FileStorage,
		Replicas:    r,
		MaxAge:      t.MaxAge[k],
		Duplicates:  t.Duplicates,
		MaxMsgSize:  t.MaxMsgSize,
		Discard:     jetstream.DiscardOld,
	}
}

// EnsureTopology creates the four streams where they are missing,
// retrying transient errors (a fresh cluster electing its leaders). A stream
// that exists is left as it is — an operator may have given it more
// replicas or another max age — unless t.Update is set, which updates it to
// this configuration. It logs what it did with each stream (at debug), and
// the streams it created in one line at info.
func (b *Bus) EnsureTopology(ctx context.Context, t Topology) error {
	var created []string
	for _, k := range Kinds {
		cfg := t.StreamConfig(k)
		made, err := retryFor(ctx, b, "ensure", func(ctx context.Context) (bool, error) {
			return b.ensureStream(ctx, t, cfg)
		}, "stream", cfg.Name)
		if err != nil {
			return fmt.Errorf("bus: ensure stream %s: %w", StreamName(k), err)
		}
		if made {
			created = append(created, cfg.Name)
		}
	}
	if len(created) > 0 {
		b.log.Info("bus: streams created", "streams", strings.Join(created, ","), "replicas", max(t.Replicas, 1))
	}
	return nil
}

// ensureStream creates or updates the stream of cfg as EnsureTopology
// says and reports whether it created it.
func (b *Bus) ensureStream(ctx context.Context, t Topology, cfg jetstream.StreamConfig) (created bool, err error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.js.Stream(cctx, cfg.Name)
	defer func() {
		if err == nil {
			b.needStream(cfg.Name)
		}
	}()
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		if _, err = b.js.CreateStream(cctx, cfg); errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			return false, nil // another process created it just now
		}
		if err == nil {
			b.log.Debug("bus: stream created", "stream", cfg.Name, "replicas", cfg.Replicas, "max_age", cfg.MaxAge)
		}
		return err == nil, err
	case err != nil:
		return false, err
	case t.Update:
		if _, err = b.js.UpdateStream(cctx, cfg); err == nil {
			b.log.Info("bus: stream updated to the configured topology", "stream", cfg.Name, "replicas", cfg.Replicas, "max_age", cfg.MaxAge)
		}
		return false, err
	}
	have := s.CachedInfo().Config
	b.log.Debug("bus: stream exists; left as configured", "stream", cfg.Name, "replicas", have.Replicas, "max_age", have.MaxAge)
	return false, nil
}

// KeyValueConfig is the configuration of a codapipe key-value bucket, as
// EnsureKeyValue takes it: one revision a key, on file, entries expiring
// after ttl (0: never).
func KeyValueConfig(bucket, description string, ttl time.Duration) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{Bucket: bucket, Description: description, History: 1, TTL: ttl, Storage: jetstream.FileStorage}
}

// EnsureKeyValue returns the key-value bucket cfg names, creating it with
// t.Replicas when it is missing. An existing bucket is used as it is,
// unless t.Update is set, which updates it to cfg (with t.Replicas).
func (b *Bus) EnsureKeyValue(ctx context.Context, t Topology, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cfg.Replicas = max(t.Replicas, 1)
	kv, err := retryFor(ctx, b, "ensure", func(ctx context.Context) (jetstream.KeyValue, error) {
		return b.ensureKeyValue(ctx, t, cfg)
	}, "bucket", cfg.Bucket)
	if err != nil {
		return nil, fmt.Errorf("bus: ensure key-value bucket %s: %w", cfg.Bucket, err)
	}
	return kv, nil
}

// ensureKeyValue is one attempt of EnsureKeyValue.
func (b *Bus) ensureKeyValue(ctx context.Context, t Topology, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	kv, err := b.js.KeyValue(cctx, cfg.Bucket)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
		kv, err = b.js.CreateKeyValue(cctx, cfg)
		if errors.Is(err, jetstream.ErrBucketExists) { // another process was first
			kv, err = b.js.KeyValue(cctx, cfg.Bucket)
		} else if err == nil {
			b.log.Debug("bus: key-value bucket created", "bucket", cfg.Bucket, "replicas", cfg.Replicas)
		}
	case err == nil && t.Update:
		kv, err = b.js.UpdateKeyValue(cctx, cfg)
	}
	return kv, err
}

// KeyToken escapes a name into one token of a key-value key (and a safe
// object-key segment): letters, digits, '-' and '_'
// stay; every other byte becomes "=XX" (hex), so distinct names never
// collide and dots cannot split tokens.
func KeyToken(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "=%02X", c)
		}
	}
	if b.Len() == 0 {
		return "=00"
	}
	return b.String()
}

// ParseKeyToken reverses KeyToken: "=XX" is the byte with hex XX; ok is
// false for a string KeyToken does not make.
func ParseKeyToken(s string) (string, bool) {
	if s == "" {
		return "", false
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '=' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(s) {
			return "", false
		}
		hi, ok1 := unhex(s[i+1])
		lo, ok2 := unhex(s[i+2])
		if !ok1 || !ok2 {
			return "", false
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	return b.String(), true
}

func unhex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}
