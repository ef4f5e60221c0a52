package service

import (
	"slices"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// StageConsumer completes spec into the consumer of a stage service that
// reads stream k: the stream, the subjects of apps (none: the whole
// stream), up to 1000 or 4 × Workers messages in flight, and fetches that
// wait 1 s, or 250 ms with Drain so that the consumer notices sooner that
// nothing is left. The other fields are kept.
func StageConsumer(k bus.Kind, apps []string, spec bus.ConsumerSpec) bus.ConsumerSpec {
	spec.Stream = bus.StreamName(k)
	spec.Filter = nil
	for _, a := range apps {
		spec.Filter = append(spec.Filter, bus.Subject(k, a))
	}
	spec.MaxAckPending = max(1000, 4*spec.Workers)
	spec.FetchWait = time.Second
	if spec.Drain {
		spec.FetchWait = 250 * time.Millisecond
	}
	return spec
}

// NameList splits comma-separated flag values (SplitList), drops
// repeated ones and sorts the rest: the one canonical form of a list of
// names such as --runs.
func NameList(vals []string) []string {
	out := SplitList(vals...)
	slices.Sort(out)
	return slices.Compact(out)
}
