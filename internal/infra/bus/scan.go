package bus

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Stored is a message as its stream holds it, without its body.
type Stored struct {
	Seq    uint64 // stream sequence
	Time   time.Time
	Header nats.Header
}

// scanBatch is how many headers one Scan fetch asks for.
const scanBatch = 512

// Scan calls fn, in stream order, with every message on subject in stream
// k that was stored at or after since (the zero time: every message). Only
// headers travel (the consumer is headers-only); Get fetches a body. Scan
// returns when it has seen every message stored when it began, fn's first
// error, or an error of the server. Each request has the bus's deadline;
// a transient error (a stream leader being elected, a reconnect) is retried
// within the bus's retry budget, resuming after the last message fn saw, so
// fn sees each message once.
func (b *Bus) Scan(ctx context.Context, k Kind, subject string, since time.Time, fn func(Stored) error) error {
	var next uint64 // the stream sequence to resume from; 0: from the start (or since)
	var fnErr error
	err := b.retry(ctx, "scan", func(ctx context.Context) error {
		n, err := b.scanFrom(ctx, k, subject, since, next, func(m Stored) error {
			if err := fn(m); err != nil {
				fnErr = err
				return err
			}
			return nil
		})
		next = max(next, n)
		if fnErr != nil {
			return nil // fn's error is returned as it is, never retried
		}
		return err
	}, "subject", subject)
	if fnErr != nil {
		return fnErr
	}
	return err
}

// scanFrom is one attempt of Scan, from stream sequence from (0: from the
// start or since). It returns the sequence after the last message given to
// fn, for the next attempt.
func (b *Bus) scanFrom(ctx context.Context, k Kind, subject string, since time.Time, from uint64, fn func(Stored) error) (uint64, error) {
	name := StreamName(k)
	next := from
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	s, err := b.js.Stream(cctx, name)
	cancel()
	if err != nil {
		return next, fmt.Errorf("bus: scan %s: stream %s: %w", subject, name, err)
	}
	cfg := jetstream.OrderedConsumerConfig{FilterSubjects: []string{subject}, DeliverPolicy: jetstream.DeliverAllPolicy, HeadersOnly: true}
	switch {
	case from > 0:
		cfg.DeliverPolicy, cfg.OptStartSeq = jetstream.DeliverByStartSequencePolicy, from
	case !since.IsZero():
		cfg.DeliverPolicy, cfg.OptStartTime = jetstream.DeliverByStartTimePolicy, &since
	}
	cctx, cancel = context.WithTimeout(ctx, b.timeout)
	c, err := s.OrderedConsumer(cctx, cfg)
	cancel()
	if err != nil {
		return next, fmt.Errorf("bus: scan %s: consumer: %w", subject, err)
	}
	for {
		if err := ctx.Err(); err != nil {
			return next, fmt.Errorf("bus: scan %s: %w", subject, err)
		}
		batch, err := c.FetchNoWait(scanBatch)
		if err != nil {
			return next, fmt.Errorf("bus: scan %s: %w", subject, err)
		}
		got, last := 0, false
		for m := range batch.Messages() {
			got++
			md, err := m.Metadata()
			if err != nil {
				return next, fmt.Errorf("bus: scan %s: %w", subject, err)
			}
			if !since.IsZero() && md.Timestamp.Before(since) {
				continue // resumed by sequence: still honour since
			}
			if err := fn(Stored{Seq: md.Sequence.Stream, Time: md.Timestamp, Header: m.Headers()}); err != nil {
				return next, err
			}
			next = md.Sequence.Stream + 1
			last = md.NumPending == 0
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return next, fmt.Errorf("bus: scan %s: %w", subject, err)
		}
		if last {
			return next, nil
		}
		if got == 0 {
			// FetchNoWait also ends with nothing and no error when the
			// server is slow to answer (the client gives up after a
			// second): only the consumer's count says whether that was the
			// end. Ending early would hide messages from the caller (and
			// rollout --verify would take them for lost).
			var pending uint64
			if ci := c.CachedInfo(); ci != nil {
				pending = ci.NumPending
			}
			return next, scanEnd(subject, pending)
		}
	}
}

// Get returns message seq of stream k with its body, fetched from the
// claim store when the message travelled by claim check.
func (b *Bus) Get(ctx context.Context, k Kind, seq uint64) ([]byte, nats.Header, error) {
	name := StreamName(k)
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.js.Stream(cctx, name)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: get %s/%d: %w", name, seq, err)
	}
	m, err := s.GetMsg(cctx, seq)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: get %s/%d: %w", name, seq, err)
	}
	body, _, err := b.resolve(cctx, m.Header, m.Data)
	if err != nil {
		return nil, nil, fmt.Errorf("bus: get %s/%d: %w", name, seq, err)
	}
	return body, m.Header, nil
}

// SubjectCount is the number of messages on subject in the stream of
// kind k.
func (b *Bus) SubjectCount(ctx context.Context, k Kind, subject string) (uint64, error) {
	name := StreamName(k)
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.js.Stream(cctx, name)
	if err != nil {
		return 0, fmt.Errorf("bus: count %s in %s: %w", subject, name, err)
	}
	info, err := s.Info(cctx, jetstream.WithSubjectFilter(subject))
	if err != nil {
		return 0, fmt.Errorf("bus: count %s in %s: %w", subject, name, err)
	}
	return info.State.Subjects[subject], nil
}

// scanEnd is the end of a scan whose last fetch brought nothing: complete
// when the consumer had nothing pending, else a transient error (Scan
// retries, resuming after the last message seen).
func scanEnd(subject string, pending uint64) error {
	if pending == 0 {
		return nil
	}
	return fmt.Errorf("bus: scan %s: a fetch brought nothing while %d messages were pending: %w", subject, pending, nats.ErrTimeout)
}

// DeadLetterIDs returns the original message ids (HeaderDeadMsgID) of the
// dead letters of subject (a stream subject such as Subject(Raw, app)):
// the messages some consumer gave up on there. It reads headers only.
func (b *Bus) DeadLetterIDs(ctx context.Context, subject string) ([]string, error) {
	var ids []string
	err := b.Scan(ctx, Dead, DeadSubject(subject), time.Time{}, func(m Stored) error {
		if id := m.Header.Get(HeaderDeadMsgID); id != "" {
			ids = append(ids, id)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("bus: read the dead letters of %s: %w", subject, err)
	}
	return ids, nil
}
