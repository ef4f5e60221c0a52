package blob_test

import (
	"bytes"
	"encoding/binary"
	"io"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/testkit/miniotest"
)

// benchSize is the object size of the benchmarks (a large screenshot batch or a small shard).
const benchSize = 8 * MiB

// benchStores opens a local store and stores on plain-HTTP and TLS MinIO servers.
func benchStores(b *testing.B) []struct {
	name string
	s    *blob.Store
} {
	open := func(url string, cfg blob.Config) *blob.Store {
		s, err := blob.Open(b.Context(), url, cfg)
		if err != nil {
			b.Fatal(err)
		}
		return s
	}
	plain, tls := miniotest.Start(b), miniotest.StartTLS(b)
	return []struct {
		name string
		s    *blob.Store
	}{
		{"local", open(b.TempDir(), blob.Config{})},
		{"minio", open(plain.URL("bench"), plain.Config())},
		{"minio-tls", open(tls.URL("bench"), tls.Config())},
	}
}

// distinct makes every benchmark object new content, so that no Put is a de-duplicated no-op.
var distinct atomic.Uint64

func benchData() []byte {
	data := make([]byte, benchSize)
	rand.NewChaCha8([32]byte{42}).Read(data)
	return data
}

func BenchmarkStorePut(b *testing.B) {
	data := benchData()
	for _, st := range benchStores(b) {
		// Put streams from an io.Reader (spooled and hashed on the way).
		b.Run(st.name+"/Put", func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				binary.LittleEndian.PutUint64(data, distinct.Add(1))
				if _, err := st.s.Put(b.Context(), io.MultiReader(bytes.NewReader(data))); err != nil {
					b.Fatal(err)
				}
			}
		})
		// PutBytes stores content already in memory (screenshots).
		b.Run(st.name+"/PutBytes", func(b *testing.B) {
			b.SetBytes(benchSize)
			for b.Loop() {
				binary.LittleEndian.PutUint64(data, distinct.Add(1))
				if _, err := st.s.PutBytes(b.Context(), data); err != nil {
					b.Fatal(err)
				}
			}
		})
		// PutBytesExisting is the de-duplicated path: hash and Stat, no upload.
		b.Run(st.name+"/PutBytesExisting", func(b *testing.B) {
			if _, err := st.s.PutBytes(b.Context(), data); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(benchSize)
			for b.Loop() {
				if _, err := st.s.PutBytes(b.Context(), data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkStoreGet(b *testing.B) {
	data := benchData()
	for _, st := range benchStores(b) {
		b.Run(st.name, func(b *testing.B) {
			ref, err := st.s.PutBytes(b.Context(), data)
			if err != nil {
				b.Fatal(err)
			}
			buf := make([]byte, 256<<10)
			b.SetBytes(benchSize)
			for b.Loop() {
				rc, err := st.s.Get(b.Context(), ref.SHA256)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := io.CopyBuffer(io.Discard, rc, buf); err != nil { // verifies the SHA-256
					b.Fatal(err)
				}
				rc.Close()
			}
		})
	}
}
