package bus

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/nats-io/nats.go/jetstream"
)

// Gap is a range of stream sequences, First to Last inclusive, that a
// stream no longer holds.
type Gap struct {
	First uint64 `json:"first"`
	Last  uint64 `json:"last"`
}

// String is "12" or "12-14".
func (g Gap) String() string {
	if g.First == g.Last {
		return strconv.FormatUint(g.First, 10)
	}
	return strconv.FormatUint(g.First, 10) + "-" + strconv.FormatUint(g.Last, 10)
}

// Gaps are the missing ranges of one stream.
type Gaps []Gap

// Messages counts the sequences of the ranges.
func (gs Gaps) Messages() uint64 {
	var n uint64
	for _, g := range gs {
		n += g.Last - g.First + 1
	}
	return n
}

// String is "12-14,20".
func (gs Gaps) String() string {
	parts := make([]string, len(gs))
	for i, g := range gs {
		parts[i] = g.String()
	}
	return strings.Join(parts, ",")
}

// gapsOf collapses sorted-or-not sequences into ranges.
func gapsOf(seqs []uint64) Gaps {
	seqs = slices.Clone(seqs)
	slices.Sort(seqs)
	seqs = slices.Compact(seqs)
	var out Gaps
	for _, s := range seqs {
		if n := len(out); n > 0 && out[n-1].Last+1 == s {
			out[n-1].Last = s
			continue
		}
		out = append(out, Gap{s, s})
	}
	return out
}

// Missing returns the sequences between the stream's first and last
// message that it no longer holds, as ranges, with the messages the server
// reports lost (StreamInfo.State.Lost). codapipe never deletes a message
// from the middle of its streams (limits retention removes the oldest,
// which moves the first sequence), so a gap is a message lost to damage of
// the store (a truncated or corrupt block file: the server recovers the
// rest and counts the lost ones as deleted) or removed by hand.
func (b *Bus) Missing(ctx context.Context, stream string) (Gaps, error) {
	cctx, cancel := context.WithTimeout(ctx, b.timeout)
	defer cancel()
	s, err := b.js.Stream(cctx, stream)
	if err != nil {
		return nil, fmt.Errorf("bus: stream %s: %w", stream, err)
	}
	st := s.CachedInfo().State
	if st.NumDeleted == 0 && (st.Lost == nil || len(st.Lost.Msgs) == 0) {
		return nil, nil
	}
	info, err := s.Info(cctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return nil, fmt.Errorf("bus: stream %s: %w", stream, err)
	}
	seqs := slices.Clone(info.State.Deleted)
	if l := info.State.Lost; l != nil {
		seqs = append(seqs, l.Msgs...)
	}
	return gapsOf(seqs), nil
}

// above returns the parts of gs after sequence floor.
func (gs Gaps) above(floor uint64) Gaps {
	var out Gaps
	for _, g := range gs {
		if g.Last <= floor {
			continue
		}
		g.First = max(g.First, floor+1)
		out = append(out, g)
	}
	return out
}

// metaMissingReported is the consumer metadata key that keeps the gaps a
// consumer has reported, so that each is warned about once per consumer
// and not again on every later run (after the repair, too).
const metaMissingReported = "codapipe_missing_reported"

// parseGaps reads Gaps.String's form; what does not parse is left out.
func parseGaps(s string) Gaps {
	var out Gaps
	for _, part := range strings.Split(s, ",") {
		a, b, ok := strings.Cut(part, "-")
		if !ok {
			b = a
		}
		first, err1 := strconv.ParseUint(a, 10, 64)
		last, err2 := strconv.ParseUint(b, 10, 64)
		if err1 == nil && err2 == nil && first <= last {
			out = append(out, Gap{first, last})
		}
	}
	return out
}

// checkMissing counts and returns the gaps of the runner's stream
// (Missing) after the consumer's acknowledged floor when Consume started
// — the messages this consumer never handled and never will (a gap below
// it was handled before it went missing) — that it has not reported
// before. Those it warns about, with the range, and records in the
// consumer's metadata. A stream that cannot be asked is logged, not an
// error: the check is a witness, the consumer's work goes on.
func (r *runner) checkMissing(ctx context.Context) Gaps {
	all, err := r.b.Missing(ctx, r.spec.Stream)
	if err != nil {
		r.b.log.Warn("bus: could not check the stream for missing messages", "stream", r.spec.Stream, "consumer", r.spec.Durable, "err", err)
		return nil
	}
	gaps := all.above(r.floor)
	r.b.metrics.missing.WithLabelValues(r.spec.Stream, r.spec.Durable).Set(float64(gaps.Messages()))
	var fresh Gaps
	for _, g := range gaps {
		if !slices.Contains(r.reported, g) {
			fresh = append(fresh, g)
		}
	}
	if len(fresh) == 0 {
		return nil
	}
	r.b.log.Warn("bus: the stream holds fewer messages than its sequence numbers say: lost to store damage or removed; "+
		"rollout --verify runs lost trajectories again (docs/operations.md, Damage and repair)",
		"stream", r.spec.Stream, "consumer", r.spec.Durable, "missing", fresh.String(), "messages", fresh.Messages())
	r.reported = append(r.reported, fresh...)
	cfg := r.cfg
	cfg.Metadata = maps.Clone(cfg.Metadata)
	if cfg.Metadata == nil {
		cfg.Metadata = map[string]string{}
	}
	cfg.Metadata[metaMissingReported] = r.reported.String()
	cctx, cancel := context.WithTimeout(ctx, r.b.timeout)
	defer cancel()
	if _, err := r.b.js.CreateOrUpdateConsumer(cctx, r.spec.Stream, cfg); err != nil {
		r.b.log.Warn("bus: could not record the missing messages reported; a later run reports them again", "consumer", r.spec.Durable, "err", err)
	} else {
		r.cfg = cfg
	}
	return fresh
}
