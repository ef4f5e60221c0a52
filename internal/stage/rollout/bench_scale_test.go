package rollout

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/testkit/natstest"
)

// benchTimeScale is the simulator's clock in the scale benchmark: slow
// enough that an episode's time is the simulated VM's and models' waiting,
// not CPU (two busy cores run both hosts and their simulators).
const benchTimeScale = "0.5"

// benchSimConfig gives the simulated models the latencies of real ones
// (simulated time: 3 s per planner call, 1 s per executor call), so that
// an episode waits on its VM and models as a real one does.
const benchSimConfig = `{"models": {"planner": {"faults": {"latency": {"kind": "fixed", "fixed": 3000000000}}},
  "executor": {"faults": {"latency": {"kind": "fixed", "fixed": 1000000000}}}}}`

// BenchmarkScaleTwoHosts measures rollout.scale_2_vs_1: the episodes per
// second of two rollout processes on one run (the shared work queue), each
// with benchVMs simulated VMs, divided by that of one process with
// benchVMs VMs, on the same tasks. Throughput is the run's episodes over
// the time from the first host's plan to the last episode done (read from
// the hosts' logs), so process start-up is left out. Goal: ≥ 1.8.
func BenchmarkScaleTwoHosts(b *testing.B) {
	const benchVMs = 2
	ids := []string{"S01", "S02", "S03", "S05"}
	const samples = 4
	episodes := len(ids) * samples
	var one, two float64
	for i := 0; i < b.N; i++ {
		srv := natstest.Start(b)
		dir := b.TempDir()
		tasks := simTaskDir(b, acceptApp, ids...)
		simCfg := writeSimConfig(b, benchSimConfig)
		run := func(name string, hosts int) float64 {
			var hs []*sharedHost
			for h := range hosts {
				hs = append(hs, startHost(b, fmt.Sprintf("%s-%d", name, h), srv.URL(), dir, tasks, name, samples, benchVMs, benchTimeScale, "--sim-config", simCfg))
			}
			for _, h := range hs {
				if err := h.wait(b, 5*time.Minute); err != nil {
					b.Fatalf("%s: %v\n%s", h.name, err, tail(h.log, 30))
				}
			}
			first, last, n := time.Time{}, time.Time{}, 0
			for _, h := range hs {
				for _, r := range logTimes(b, h.log) {
					switch r.msg {
					case "rollout: planned":
						if first.IsZero() || r.at.Before(first) {
							first = r.at
						}
					case msgEpisodeDone:
						n++
						if r.at.After(last) {
							last = r.at
						}
					}
				}
			}
			for _, h := range hs {
				s := h.readSummary(b)
				ps := h.cmd.ProcessState
				b.Logf("%s: %d episodes, %d taken over, wall %.1fs, utilisation %.2f, CPU %v", h.name, s.Episodes, s.Retaken, s.WallSeconds, s.Utilisation, ps.UserTime()+ps.SystemTime())
			}
			b.Logf("%s: %d episodes in %v", name, n, last.Sub(first))
			if n != episodes {
				b.Fatalf("%s: %d episodes done, want %d", name, n, episodes)
			}
			return float64(n) / last.Sub(first).Seconds()
		}
		one += run(fmt.Sprintf("one-%d", i), 1)
		two += run(fmt.Sprintf("two-%d", i), 2)
	}
	one, two = one/float64(b.N), two/float64(b.N)
	b.ReportMetric(one, "rollout.episodes_per_s_1_host")
	b.ReportMetric(two, "rollout.episodes_per_s_2_hosts")
	b.ReportMetric(two/one, "rollout.scale_2_vs_1")
}

type logTime struct {
	msg string
	at  time.Time
}

// logTimes reads the message and time of every record of a JSON log.
func logTimes(t testing.TB, path string) []logTime {
	t.Helper()
	f, err := os.Open(filepath.Clean(path))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []logTime
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Msg  string    `json:"msg"`
			Time time.Time `json:"time"`
		}
		if json.Unmarshal(sc.Bytes(), &rec) == nil && rec.Msg != "" {
			out = append(out, logTime{rec.Msg, rec.Time})
		}
	}
	return out
}
