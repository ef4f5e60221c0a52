package bus_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/bus"
)

// BenchmarkPublish measures synchronous publishes (each waits for the
// JetStream ack, file store) on the embedded server; MB/s counts body bytes.
func BenchmarkPublish(b *testing.B) {
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		b.Run(fmt.Sprintf("body=%dKiB", size>>10), func(b *testing.B) {
			bs := open(b, b.TempDir())
			body := make([]byte, size)
			ctx := context.Background()
			b.SetBytes(int64(size))
			b.ResetTimer()
			i := 0
			for b.Loop() {
				if _, err := bs.Publish(ctx, "coda.traj.bench", fmt.Sprint("m", i), body, nil); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkScan measures the resume scan: headers of 10,000 stored
// trajectories-sized messages (30 KiB bodies stay on the server) read
// through one headers-only ordered consumer.
func BenchmarkScan(b *testing.B) {
	const n = 10000
	bs := open(b, b.TempDir())
	ctx := context.Background()
	body := make([]byte, 30<<10)
	for i := range n {
		if _, err := bs.Publish(ctx, "coda.traj.bench", fmt.Sprint("m", i), body, nil); err != nil {
			b.Fatal(err)
		}
	}
	b.ResetTimer()
	for b.Loop() {
		seen := 0
		if err := bs.Scan(ctx, bus.Raw, "coda.traj.bench", time.Time{}, func(bus.Stored) error { seen++; return nil }); err != nil {
			b.Fatal(err)
		}
		if seen != n {
			b.Fatalf("scan saw %d of %d", seen, n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}
