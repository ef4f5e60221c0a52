package sched

import (
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
)

// TestBenchReplay checks the benchmark's ideal list scheduler on small
// cases worked out by hand: it is the yardstick of the scheduler figures
// in docs/performance.md.
func TestBenchReplay(t *testing.T) {
	s := time.Second
	five := &scienceboard.Task{ID: "five", Steps: 5}
	ten := &scienceboard.Task{ID: "ten", Steps: 10}
	ok := func(d time.Duration) []benchAttempt { return []benchAttempt{{d: d}} }
	tests := []struct {
		name     string
		jobs     []Job
		attempts [][]benchAttempt
		vms      int
		order    int
		revert   time.Duration
		want     time.Duration
	}{
		{"one VM runs everything in turn", []Job{{five, 0}, {five, 1}}, [][]benchAttempt{ok(2 * s), ok(3 * s)}, 1, benchOrderFIFO, 0, 5 * s},
		{"a revert between episodes, none after the last", []Job{{five, 0}, {five, 1}}, [][]benchAttempt{ok(2 * s), ok(3 * s)}, 1, benchOrderFIFO, s, 6 * s},
		// FIFO: VM a gets 1 then 1 then 4 (ends 6); VM b gets 3 (ends 3).
		{"job order", []Job{{five, 0}, {five, 1}, {five, 2}, {five, 3}}, [][]benchAttempt{ok(s), ok(3 * s), ok(s), ok(4 * s)}, 2, benchOrderFIFO, 0, 6 * s},
		// Oracle: 4 | 3, then 1 on b (4), then 1 on a or b (5).
		{"true lengths, longest first", []Job{{five, 0}, {five, 1}, {five, 2}, {five, 3}}, [][]benchAttempt{ok(s), ok(3 * s), ok(s), ok(4 * s)}, 2, benchOrderOracle, 0, 5 * s},
		// Step limit: ten (2 s) first on a; then five/0 (4 s) on b; five/1 (1 s) on a at 2 → 3.
		{"step limit first", []Job{{five, 0}, {five, 1}, {ten, 0}}, [][]benchAttempt{ok(4 * s), ok(s), ok(2 * s)}, 2, benchOrderLimit, 0, 4 * s},
		// The failed attempt (1 s) of job 0 goes back to the front: VM a
		// runs it again (2 s) at 1 s while VM b runs job 1 (5 s).
		{"a failed attempt goes back to the front", []Job{{five, 0}, {five, 1}, {five, 2}}, [][]benchAttempt{{{d: s, failed: true}, {d: 2 * s}}, ok(5 * s), ok(s)}, 2, benchOrderFIFO, 0, 5 * s},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := benchReplay(tt.jobs, tt.attempts, tt.vms, tt.order, tt.revert); got != tt.want {
				t.Errorf("makespan %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBenchModelBounds checks that the bounds of the scheduler figures are
// lower bounds — no schedule the model builds, clairvoyant included, is
// shorter — and that knowing more never makes the model's ideal schedule
// much worse, over workloads of every shape BenchmarkSchedulerModel uses.
func TestBenchModelBounds(t *testing.T) {
	for _, shape := range []benchShape{{0.5, 0.6}, {1, 0.6}, {1, 1}} {
		for seed := uint64(1); seed <= 10; seed++ {
			m := benchModelWorkload(seed, shape)
			for name, d := range map[string]time.Duration{"static": m.static, "fifo": m.fifo, "lpt": m.lpt, "steps": m.steps, "oracle": m.oracle} {
				if d < m.vmBound {
					t.Errorf("shape %+v seed %d: %s makespan %v is below the VM-time bound %v", shape, seed, name, d, m.vmBound)
				}
			}
			if m.vmBound < m.bound {
				t.Errorf("shape %+v seed %d: VM-time bound %v below the work bound %v", shape, seed, m.vmBound, m.bound)
			}
			if m.oracle > m.lpt || m.lpt > m.static {
				t.Errorf("shape %+v seed %d: oracle %v, step-limit order %v, static %v: want them in that order", shape, seed, m.oracle, m.lpt, m.static)
			}
		}
	}
}
