//go:build unix

package lockfile

import (
	"errors"
	"os"
	"syscall"
)

// flockTry takes an exclusive flock on f without waiting; false means
// someone else holds it. flock locks belong to the open file description,
// so two opens of one file in one process exclude each other too. Go opens
// files close-on-exec, so vmrun and docker children never inherit a lock.
func flockTry(f *os.File) (bool, error) {
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		switch {
		case err == nil:
			return true, nil
		case errors.Is(err, syscall.EWOULDBLOCK):
			return false, nil
		case errors.Is(err, syscall.EINTR):
			continue
		}
		return false, err
	}
}

// flockRelease: closing the file releases the flock.
func flockRelease(*os.File) {}
