package shard_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	procmetrics "github.com/codapipe/codapipe/internal/infra/metrics"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strconv"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

// memChildEnv makes the test binary run memoryChild instead of the test.
const memChildEnv = "CODAPIPE_SHARD_MEMORY_CHILD"

// TestMemoryBounded writes 2 GB of Arrow shards and 1 GB of Parquet shards
// of rows embedding 200 KB images, each in a fresh process, and checks that
// memory stays bounded: the Go heap's peak (garbage included) under 200 MB
// and the peak RSS under 300 MB. With -short or the race detector (whose
// shadow memory inflates the RSS, which is then not checked) it writes
// 256 MB of each: the writer reaches its steady state after a few batches.
// Measured without the race detector: Arrow 84 MB heap (43 MB live), 118 MB
// RSS; Parquet 109 MB heap (65 MB live), 131 MB RSS (issue 26, 2026-11-26).
func TestMemoryBounded(t *testing.T) {
	if os.Getenv(memChildEnv) != "" {
		memoryChild(t)
		return
	}
	sizes := map[shard.Format]int64{shard.FormatArrow: 2 << 30, shard.FormatParquet: 1 << 30}
	for _, format := range formats {
		t.Run(string(format), func(t *testing.T) {
			size := sizes[format]
			if testing.Short() || raceEnabled {
				size = 256 << 20
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryBounded$", "-test.v")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s:%d:%s", memChildEnv, format, size, t.TempDir()))
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("child: %v\n%s", err, out)
			}
			var heap, hwm, written, live int64 = -1, -1, -1, -1
			sc := bufio.NewScanner(bytes.NewReader(out))
			for sc.Scan() {
				if _, after, ok := strings.Cut(sc.Text(), "MEMORY "); ok {
					fmt.Sscanf(after, "written=%d peak_heap=%d peak_rss=%d peak_live=%d", &written, &heap, &hwm, &live)
				}
			}
			if heap < 0 {
				t.Fatalf("child printed no figures:\n%s", out)
			}
			t.Logf("%s: %d MB written, peak Go heap %d MB (live after GC %d MB), peak RSS %d MB (race detector: %v)",
				format, written>>20, heap>>20, live>>20, hwm>>20, raceEnabled)
			if written < size {
				t.Errorf("wrote %d bytes, want %d", written, size)
			}
			if heap > 200<<20 {
				t.Errorf("peak Go heap %d MB, want < 200 MB", heap>>20)
			}
			if !raceEnabled && hwm > 300<<20 {
				t.Errorf("peak RSS %d MB, want < 300 MB", hwm>>20)
			}
		})
	}
}

// memoryChild writes the shards the parent asked for and prints the
// figures: "MEMORY written=N peak_heap=N peak_rss=N".
func memoryChild(t *testing.T) {
	parts := strings.SplitN(os.Getenv(memChildEnv), ":", 3)
	size, _ := strconv.ParseInt(parts[1], 10, 64)
	dir := parts[2]
	bucketDir, tmp := filepath.Join(dir, "bucket"), filepath.Join(dir, "tmp")
	os.MkdirAll(tmp, 0o755)
	b := openLocal(t, bucketDir)
	w := newWriter(t, shard.Config{Bucket: b, Prefix: "mem", Format: shard.Format(parts[0]), TempDir: tmp,
		BytesPerShard: 512 << 20, Meta: testMeta()})
	pool := benchRowPool()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var peak, live uint64
	var written int64
	ctx := context.Background()
	for i := 0; written < size; i++ {
		j := i % len(pool)
		if err := w.Add(pool[j : j+1]); err != nil {
			t.Fatal(err)
		}
		metrics.Read(sample)
		peak = max(peak, sample[0].Value.Uint64())
		live = max(live, sample[1].Value.Uint64())
		if w.Full() || written+w.Bytes() >= size {
			f, err := w.Commit(ctx)
			if err != nil {
				t.Fatal(err)
			}
			written += f.Bytes
			os.Remove(filepath.Join(bucketDir, filepath.FromSlash(f.Key))) // keep the disk use down
		}
	}
	fmt.Printf("MEMORY written=%d peak_heap=%d peak_rss=%d peak_live=%d\n", written, peak, procmetrics.PeakRSS(), live)
}
