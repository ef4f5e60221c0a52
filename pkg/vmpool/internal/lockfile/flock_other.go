//go:build !unix

package lockfile

import (
	"os"
	"sync"
)

// Without flock, locks only exclude pools of this process: a registry of
// open lock paths. Cross-process exclusion needs a unix host.
var (
	localLocksMu sync.Mutex
	localLocks   = map[string]bool{}
)

func flockTry(f *os.File) (bool, error) {
	localLocksMu.Lock()
	defer localLocksMu.Unlock()
	if localLocks[f.Name()] {
		return false, nil
	}
	localLocks[f.Name()] = true
	return true, nil
}

func flockRelease(f *os.File) {
	localLocksMu.Lock()
	delete(localLocks, f.Name())
	localLocksMu.Unlock()
}
