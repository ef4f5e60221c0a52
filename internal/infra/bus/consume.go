package bus

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/codapipe/codapipe/internal/infra/clock"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Result is what a handler decides for one message.
type Result struct {
	action action
	delay  time.Duration
	reason string
}

type action int

const (
	actAck action = iota
	actRetry
	actReject
)

// Ack acknowledges the message: it was handled and is done.
func Ack() Result { return Result{action: actAck} }

// Retry asks for the message again after delay (nak with delay). When the
// consumer's MaxDeliver is reached the message is dead-lettered with the
// reason instead of being dropped.
func Retry(delay time.Duration, reason string) Result {
	return Result{action: actRetry, delay: delay, reason: reason}
}

// Reject gives up on the message: it is copied to the dead-letter subject
// with the reason and its original headers, then terminated.
func Reject(reason string) Result { return Result{action: actReject, reason: reason} }

func (r Result) String() string {
	switch r.action {
	case actAck:
		return "ack"
	case actRetry:
		return "retry"
	default:
		return "reject"
	}
}

// Msg is one message handed to a handler, its body already resolved from
// the claim store when it travelled by claim check.
type Msg struct {
	Subject    string
	ID         string // the JetStream message id (Nats-Msg-Id)
	Header     nats.Header
	Data       []byte
	Stream     string
	Seq        uint64 // stream sequence
	Deliveries uint64 // 1 on the first delivery
	Claimed    bool   // the body came from the claim store
}

// Handler handles one message. ctx is cancelled when the runner's shutdown
// grace period ends.
type Handler func(ctx context.Context, m *Msg) Result

// ConsumerSpec describes a durable pull consumer and how to run it.
type ConsumerSpec struct {
	Stream  string   // stream name, e.g. StreamName(Raw)
	Durable string   // durable consumer name, shared by all workers of a service
	Filter  []string // subjects; empty takes the whole stream
	// StartTime, when set, makes a consumer that is created now deliver
	// only messages stored at or after it (DeliverByStartTime) instead of
	// the whole stream's history. A consumer that exists keeps the start
	// it was created with (JetStream cannot change it).
	StartTime time.Time
	// InactiveThreshold, when set, has the server delete the consumer
	// once no process has used it for that long (a consumer made for one
	// selection, not to be kept forever).
	InactiveThreshold time.Duration
	// AckWait is how long the server waits for an ack before redelivering
	// (default 30 s). Handlers that run longer are kept alive by
	// in-progress heartbeats every AckWait/3.
	AckWait time.Duration
	// MaxDeliver bounds deliveries (default 10). The runner enforces it,
	// not the server (whose limit is off, so that the server never drops a
	// message silently): a Retry on the last delivery is dead-lettered, and
	// a message delivered more often than MaxDeliver — every delivery ended
	// in a crash or an ack timeout, or its dead-letter copy failed — is
	// dead-lettered without running the handler again.
	MaxDeliver int
	// MaxAckPending bounds messages in flight across all workers (default 1000).
	MaxAckPending int
	Workers       int           // concurrent handlers in this process (default 1)
	FetchWait     time.Duration // how long one fetch waits for messages (default 1 s)
	// Drain makes Consume return once the consumer has nothing pending
	// and nothing in flight.
	Drain bool
	// ShutdownGrace is how long in-flight handlers may finish after ctx is
	// cancelled before their own context is cancelled (default 30 s).
	ShutdownGrace time.Duration
}

func (s *ConsumerSpec) defaults() {
	if s.AckWait <= 0 {
		s.AckWait = 30 * time.Second
	}
	if s.MaxDeliver <= 0 {
		s.MaxDeliver = 10
	}
	if s.MaxAckPending <= 0 {
		s.MaxAckPending = 1000
	}
	if s.Workers <= 0 {
		s.Workers = 1
	}
	if s.FetchWait <= 0 {
		s.FetchWait = time.Second
	}
	if s.ShutdownGrace <= 0 {
		s.ShutdownGrace = 30 * time.Second
	}
}

// Stats counts what Consume did.
type Stats struct {
	Acked, Retried, Rejected, Dead int64
	// Missing are the stream's sequences it no longer holds (Bus.Missing)
	// after the consumer's acknowledged floor when Consume started, as
	// found then and, in Drain mode, when it ended: messages the consumer
	// never handled. Each gap is reported by one run of a durable
	// consumer, the first that finds it (it is recorded in the
	// consumer's metadata), not again by later runs.
	Missing Gaps
}

// Consume creates (or updates) the durable consumer and runs handler on
// its messages with Workers goroutines until ctx is cancelled — then it
// stops fetching, lets in-flight handlers finish within ShutdownGrace and
// returns nil — or, in Drain mode, until nothing is pending.
func (b *Bus) Consume(ctx context.Context, spec ConsumerSpec, handler Handler) (Stats, error) {
	spec.defaults()
	b.metrics.consumer(spec.Durable)
	defer b.needConsumer(spec.Stream, spec.Durable)()
	cfg := jetstream.ConsumerConfig{
		Durable:       spec.Durable,
		AckPolicy:     jetstream.AckExplicitPolicy,
		AckWait:       spec.AckWait,
		MaxDeliver:    -1, // enforced by the runner: see ConsumerSpec.MaxDeliver
		MaxAckPending: spec.MaxAckPending,
		DeliverPolicy: jetstream.DeliverAllPolicy,

		InactiveThreshold: spec.InactiveThreshold,
	}
	switch len(spec.Filter) {
	case 0:
	case 1:
		cfg.FilterSubject = spec.Filter[0]
	default:
		cfg.FilterSubjects = spec.Filter
	}
	if !spec.StartTime.IsZero() {
		t := spec.StartTime.UTC()
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &t
	}
	// Retried through transient errors, as creating the streams is: a
	// consumer created while the stream's leader is being elected (a node
	// killed, a cluster just formed) times out, and a service would end
	// at its start.
	cons, err := retryFor(ctx, b, "ensure", func(ctx context.Context) (jetstream.Consumer, error) {
		cctx, cancel := context.WithTimeout(ctx, b.timeout)
		defer cancel()
		c := cfg // each attempt from the configuration asked for
		if old, err := b.js.Consumer(cctx, spec.Stream, spec.Durable); err == nil {
			// Where an existing consumer starts is fixed at its creation.
			have := old.CachedInfo().Config
			c.DeliverPolicy, c.OptStartTime, c.OptStartSeq = have.DeliverPolicy, have.OptStartTime, have.OptStartSeq
			c.Metadata = have.Metadata // the server's own keys, and what the runner recorded (checkMissing)
		}
		return b.js.CreateOrUpdateConsumer(cctx, spec.Stream, c)
	}, "consumer", spec.Durable)
	if err != nil {
		return Stats{}, fmt.Errorf("bus: consumer %s on %s: %w", spec.Durable, spec.Stream, err)
	}

	// Handlers run under hctx, which outlives ctx by the shutdown grace.
	hctx, hcancel := context.WithCancel(context.WithoutCancel(ctx))
	defer hcancel()
	stopGrace := context.AfterFunc(ctx, func() {
		t := time.NewTimer(spec.ShutdownGrace)
		defer t.Stop()
		select {
		case <-t.C:
			hcancel()
		case <-hctx.Done():
		}
	})
	defer stopGrace()

	ci := cons.CachedInfo()
	r := &runner{b: b, spec: spec, cons: cons, handler: handler, cfg: ci.Config, floor: ci.AckFloor.Stream,
		reported: parseGaps(ci.Config.Metadata[metaMissingReported])}
	r.st.Missing = r.checkMissing(ctx)
	var wg sync.WaitGroup
	errs := make([]error, spec.Workers)
	for w := 0; w < spec.Workers; w++ {
		wg.Add(1)
		go func() { // owned by Consume: it waits for every worker
			defer wg.Done()
			errs[w] = r.work(ctx, hctx)
		}()
	}
	wg.Wait()
	err = errors.Join(errs...)
	if spec.Drain && err == nil && ctx.Err() == nil {
		gaps := r.checkMissing(ctx)
		r.count(func(st *Stats) { st.Missing = append(st.Missing, gaps...) })
	}
	return r.stats(), err
}

type runner struct {
	b       *Bus
	spec    ConsumerSpec
	cons    jetstream.Consumer
	handler Handler
	cfg     jetstream.ConsumerConfig // as created or updated
	floor   uint64                   // the consumer's acknowledged stream sequence when Consume started
	// reported are the gaps of the stream the consumer has warned about
	// (its metadata; checkMissing).
	reported Gaps

	mu sync.Mutex
	st Stats
}

func (r *runner) stats() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

func (r *runner) count(f func(*Stats)) {
	r.mu.Lock()
	f(&r.st)
	r.mu.Unlock()
}

// work is one worker's fetch → handle loop.
func (r *runner) work(ctx, hctx context.Context) error {
	for ctx.Err() == nil {
		batch, err := r.cons.Fetch(1, jetstream.FetchMaxWait(r.spec.FetchWait))
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.b.log.Warn("fetch failed", "consumer", r.spec.Durable, "err", err)
			_ = clock.Sleep(ctx, r.spec.FetchWait) // an ended context ends the loop above
			continue
		}
		got := 0
		for m := range batch.Messages() {
			got++
			r.handle(hctx, m)
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && ctx.Err() == nil {
			r.b.log.Debug("fetch ended", "consumer", r.spec.Durable, "err", err)
		}
		if got == 0 && r.spec.Drain {
			done, err := r.drained(ctx)
			if err != nil {
				return err
			}
			if done {
				return nil
			}
		}
	}
	return nil
}

// drained reports whether the consumer has nothing pending and nothing
// awaiting an ack (naked messages waiting for their delay count as
// pending), and has delivered the stream's last message for its filter.
func (r *runner) drained(ctx context.Context) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, r.b.timeout)
	defer cancel()
	info, err := r.cons.Info(cctx)
	if err != nil {
		if ctx.Err() != nil {
			return true, nil
		}
		if IsTransient(err) { // a consumer leader election: ask again after the next fetch
			r.b.log.Warn("consumer info failed; draining goes on", "consumer", r.spec.Durable, "err", err)
			return false, nil
		}
		return false, fmt.Errorf("bus: consumer %s info: %w", r.spec.Durable, err)
	}
	// The consumer's counts are shared by every process on the durable
	// consumer: nothing pending and nothing awaiting an ack (in any
	// process) is the end for all of them. Pull requests waiting
	// (NumWaiting) are not work: other processes' idle workers.
	if info.Cluster != nil && info.Cluster.Leader == "" {
		// On a cluster, a consumer just created (or electing a leader)
		// answers from a replica with empty counts: not an answer to go by.
		return false, nil
	}
	if info.NumPending != 0 || info.NumAckPending != 0 {
		return false, nil
	}
	// A consumer leader just elected (a new consumer on a cluster) can
	// answer with empty counts before it has its state. The stream has the
	// last word: everything the consumer delivered is acked (nothing is
	// pending an ack), so it is drained when it has delivered the last
	// message that matches its filter.
	last, err := r.lastMatching(cctx)
	if err != nil {
		if ctx.Err() != nil {
			return true, nil
		}
		if IsTransient(err) {
			r.b.log.Warn("stream info failed; draining goes on", "consumer", r.spec.Durable, "err", err)
			return false, nil
		}
		return false, fmt.Errorf("bus: consumer %s: %w", r.spec.Durable, err)
	}
	return info.Delivered.Stream >= last, nil
}

// lastMatching returns the sequence of the stream's last message that
// matches the consumer's filter (0: none).
func (r *runner) lastMatching(ctx context.Context) (uint64, error) {
	s, err := r.b.js.Stream(ctx, r.spec.Stream)
	if err != nil {
		return 0, fmt.Errorf("stream %s: %w", r.spec.Stream, err)
	}
	if len(r.spec.Filter) == 0 {
		st := s.CachedInfo().State
		last := st.LastSeq
		if st.NumDeleted > 0 {
			// The last sequence can be one the store lost (a truncated
			// block): the last message is before the gap at the end.
			gaps, err := r.b.Missing(ctx, r.spec.Stream)
			if err != nil {
				return 0, err
			}
			if n := len(gaps); n > 0 && gaps[n-1].Last >= last {
				last = gaps[n-1].First - 1
			}
		}
		return last, nil
	}
	var last uint64
	for _, f := range r.spec.Filter {
		m, err := s.GetLastMsgForSubject(ctx, f)
		switch {
		case errors.Is(err, jetstream.ErrMsgNotFound):
		case err != nil:
			return 0, fmt.Errorf("stream %s: last message on %s: %w", r.spec.Stream, f, err)
		default:
			last = max(last, m.Sequence)
		}
	}
	return last, nil
}

func (r *runner) handle(ctx context.Context, jm jetstream.Msg) {
	meta, err := jm.Metadata()
	if err != nil {
		r.b.log.Error("message without metadata; terminating", "consumer", r.spec.Durable, "err", err)
		_ = jm.Term()
		return
	}
	m := &Msg{
		Subject: jm.Subject(), ID: jm.Headers().Get(jetstream.MsgIDHeader), Header: jm.Headers(),
		Stream: meta.Stream, Seq: meta.Sequence.Stream, Deliveries: meta.NumDelivered,
	}
	log := r.b.log.With("consumer", r.spec.Durable, "subject", m.Subject, "id", m.ID, "seq", m.Seq, "delivery", m.Deliveries)

	// Keep the message alive while it is being handled.
	stopHB := KeepInProgress(ctx, jm, r.spec.AckWait/3, log, "in-progress heartbeat failed")

	var res Result
	if m.Deliveries > uint64(r.spec.MaxDeliver) {
		// Deliveries beyond the limit come from handlers that never
		// answered (crash, hang past the ack wait) or from a dead-letter
		// copy that failed: dead-letter now, without another try.
		res = Reject(fmt.Sprintf("delivered %d times, more than the limit of %d, without an outcome (the handler crashed or outlived the ack wait, or an earlier dead-letter copy failed)", m.Deliveries, r.spec.MaxDeliver))
	} else {
		start := time.Now()
		res = r.run(ctx, jm, m, log)
		r.b.metrics.handleSeconds.WithLabelValues(r.spec.Durable).Observe(time.Since(start).Seconds())
	}
	stopHB()

	if res.action == actRetry && m.Deliveries >= uint64(r.spec.MaxDeliver) {
		res = Reject(fmt.Sprintf("retries exhausted after %d deliveries: %s", m.Deliveries, res.reason))
	}
	// Settle the message even when the shutdown grace has cancelled ctx:
	// the handler's work is done and must not be redone or lost.
	sctx := context.WithoutCancel(ctx)
	defer r.b.settled()
	r.b.metrics.handled.WithLabelValues(r.spec.Durable, res.String()).Inc()
	switch res.action {
	case actAck:
		if err := r.ackSync(sctx, jm); err != nil {
			log.Warn("ack failed; the message will be redelivered", "err", err)
		}
		r.count(func(s *Stats) { s.Acked++ })
	case actRetry:
		log.Info("retry later", "delay", res.delay, "reason", res.reason)
		if err := jm.NakWithDelay(res.delay); err != nil {
			log.Warn("nak failed; the message will be redelivered after ack wait", "err", err)
		}
		r.count(func(s *Stats) { s.Retried++ })
	case actReject:
		r.count(func(s *Stats) { s.Rejected++ })
		if err := r.deadLetter(sctx, jm, m, res.reason); err != nil {
			// Never drop: without a dead-letter copy the message stays, and
			// its next delivery (beyond MaxDeliver if need be) tries again.
			log.Error("dead-letter publish failed; retrying the message later", "err", err, "reason", res.reason)
			_ = jm.NakWithDelay(r.spec.AckWait)
			return
		}
		r.count(func(s *Stats) { s.Dead++ })
		r.b.metrics.dead.WithLabelValues(r.spec.Durable).Inc()
		log.Warn("message dead-lettered", "reason", res.reason)
		if err := jm.TermWithReason(res.reason); err != nil {
			log.Warn("term failed; a redelivery will be dead-lettered again (deduplicated)", "err", err)
		}
	}
}

// run resolves the body and calls the handler, turning a panic into a
// retry so one bad message cannot crash the service.
func (r *runner) run(ctx context.Context, jm jetstream.Msg, m *Msg, log interface{ Error(string, ...any) }) (res Result) {
	defer func() {
		if p := recover(); p != nil {
			log.Error("handler panicked", "panic", p, "stack", string(debug.Stack()))
			res = Retry(r.spec.AckWait, fmt.Sprintf("handler panicked: %v", p))
		}
	}()
	data, claimed, err := r.b.resolve(ctx, jm.Headers(), jm.Data())
	if err != nil {
		if errors.Is(err, errBadClaim) {
			return Reject(fmt.Sprintf("claim check: %v", err))
		}
		// The claim store may be back soon (timeout, 503, outage).
		return Retry(claimRetryDelay(m.Deliveries, r.spec.AckWait), fmt.Sprintf("claim check: %v", err))
	}
	m.Data, m.Claimed = data, claimed
	return r.handler(ctx, m)
}

// ackSync acks the message and waits for the server's confirmation,
// retrying transient errors within the ack wait (an ack is idempotent;
// after the ack wait the message is redelivered anyway, and handlers are
// idempotent by message id).
func (r *runner) ackSync(ctx context.Context, jm jetstream.Msg) error {
	ctx, cancel := context.WithTimeout(ctx, r.spec.AckWait)
	defer cancel()
	return r.b.retry(ctx, "ack", func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, r.b.timeout)
		defer cancel()
		err := jm.DoubleAck(cctx)
		if errors.Is(err, jetstream.ErrMsgAlreadyAckd) { // an earlier attempt reached the server
			return nil
		}
		return err
	}, "consumer", r.spec.Durable)
}

// deadLetter copies the message (raw: a claim reference stays a reference)
// with its headers and the reason to the dead-letter subject. Its message
// id is derived from the source position, so a repeated attempt (a retry
// after a transient error, or a later delivery) is de-duplicated.
func (r *runner) deadLetter(ctx context.Context, jm jetstream.Msg, m *Msg, reason string) error {
	h := nats.Header{}
	for k, v := range jm.Headers() {
		h[k] = append([]string(nil), v...)
	}
	h.Del(jetstream.MsgIDHeader)
	h.Set(HeaderDeadReason, headerValue(redact.Text(reason), maxDeadReason)) // stored: never a URL's credentials
	h.Set(HeaderDeadSubject, m.Subject)
	h.Set(HeaderDeadStream, m.Stream)
	h.Set(HeaderDeadSeq, strconv.FormatUint(m.Seq, 10))
	h.Set(HeaderDeadConsumer, r.spec.Durable)
	h.Set(HeaderDeadDeliveries, strconv.FormatUint(m.Deliveries, 10))
	if m.ID != "" {
		h.Set(HeaderDeadMsgID, m.ID)
	}
	dm := &nats.Msg{Subject: DeadSubject(m.Subject), Header: h, Data: jm.Data()}
	id := fmt.Sprintf("dead:%s:%s:%d", m.Stream, r.spec.Durable, m.Seq)
	// Transient failures are retried within the ack wait (no heartbeat
	// keeps the message now); after it, the message comes back and its
	// next delivery tries again.
	ctx, cancel := context.WithTimeout(ctx, r.spec.AckWait)
	defer cancel()
	return r.b.retry(ctx, "dead_letter", func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, r.b.timeout)
		defer cancel()
		_, err := r.b.js.PublishMsg(cctx, dm, jetstream.WithMsgID(id))
		return err
	}, "consumer", r.spec.Durable, "id", id)
}

// claimRetryDelay is the wait before a message whose claim could not be
// read is tried again: 1 s, doubling per delivery, at most ackWait.
func claimRetryDelay(deliveries uint64, ackWait time.Duration) time.Duration {
	d := time.Second
	for i := uint64(1); i < deliveries && d < ackWait; i++ {
		d *= 2
	}
	return min(d, ackWait)
}

// maxDeadReason bounds the dead-letter reason header, so that the copy of
// a message near the payload limit still fits (Publish keeps
// headerAllowance free for headers).
const maxDeadReason = 2 << 10

// headerValue makes s safe as a NATS header value: line breaks (which
// would end the header block) become spaces, and it is cut to at most max
// bytes on a UTF-8 boundary, marked with "…".
func headerValue(s string, max int) string {
	s = strings.NewReplacer("\r\n", " ", "\r", " ", "\n", " ").Replace(s)
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// ConsumerExists reports whether the durable consumer exists on stream.
func (b *Bus) ConsumerExists(ctx context.Context, stream, durable string) (bool, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	_, err := b.js.Consumer(cctx, stream, durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("bus: consumer %s on %s: %w", durable, stream, err)
	}
	return true, nil
}
