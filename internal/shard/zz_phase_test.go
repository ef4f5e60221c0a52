package shard_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/blob"
	"github.com/codapipe/codapipe/internal/shard"
)

func TestPhases(t *testing.T) {
	bucket, _ := localBucket(t)
	tmp := t.TempDir()
	pool := benchRowPool()
	for it := 0; it < 3; it++ {
		w, _ := shard.NewWriter(shard.Config{Bucket: bucket, Prefix: "bench", TempDir: tmp, Meta: testMeta()})
		t0 := time.Now()
		for i := 0; w.Bytes() < benchBytes; i += 4 {
			j := i % len(pool)
			w.Add(pool[j : j+4])
		}
		t1 := time.Now()
		f, err := w.Commit(context.Background())
		if err != nil { t.Fatal(err) }
		t2 := time.Now()
		w.Close()
		// raw copy
		src, _ := os.Open(tmp)
		src.Close()
		t.Logf("add %v commit %v bytes %d", t1.Sub(t0), t2.Sub(t1), f.Bytes)
		_ = blob.PutOptions{}
	}
}
