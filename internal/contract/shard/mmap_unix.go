//go:build unix

package shard

import (
	"fmt"
	"math"
	"os"
	"syscall"
)

// mapFile maps the open file f read-only and returns its bytes and a
// function that unmaps them. Shard files are never changed in place (a
// writer renames a new file over the old), so the mapping stays whole.
func mapFile(f *os.File) ([]byte, func(), error) {
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	if fi.Size() <= 0 || fi.Size() > math.MaxInt32*4 {
		return nil, nil, fmt.Errorf("size %d: not mapped", fi.Size())
	}
	data, err := syscall.Mmap(int(f.Fd()), 0, int(fi.Size()), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return data, func() { _ = syscall.Munmap(data) }, nil
}
