package advantage

import (
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/stage/rewardserver"
)

// BenchmarkRewardServer is Acceptance 5 of issue 35 (the reward half):
// plans scored per second by the reward service against the simulated
// executor (no injected latency: the executor's and the service's own
// work share the machine's cores), each a POST /v1/reward of a stored
// plan of the set, 8 clients per core. The step contexts are loaded once
// (a trainer sends the G plans of a group together), so this measures the
// grounding request, the executor and the scoring. Besides plans/s it
// reports plans per CPU second of the process (service, executor and
// clients together), which other work on a shared machine does not
// change: on two idle cores plans/s reaches about twice that.
func BenchmarkRewardServer(b *testing.B) {
	rs := newRewardSet(b, corpusSpec)
	hs := rs.serve(b, simExecutor(b, corpusSpec, 0))
	bodies := make([]string, len(rs.rows))
	for i, r := range rs.rows {
		bodies[i] = mustJSON(b, rewardserver.RewardRequest{Label: labelOf(rs.m, r), Plan: r.Completion})
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	var next atomic.Int64
	b.SetParallelism(8)
	cpu0 := cpuTime(b)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := bodies[int(next.Add(1))%len(bodies)]
			resp, err := client.Post(hs.URL+rewardserver.RouteReward, "application/json", strings.NewReader(body))
			if err != nil {
				b.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "plans/s")
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "plans/cpu-s")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
