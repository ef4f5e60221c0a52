package vmpool

import "github.com/codapipe/codapipe/pkg/vmpool/internal/lockfile"

// Locker takes the per-machine locks that keep two pools — in this
// process, in another process, or on another host that shares the Locker —
// from driving one VM. A pool holds a VM's lock from the VM's start to the
// pool's Close. The default is a lock file per machine in Config.LockDir
// (flock: one host); WithLocker gives another, e.g. a key-value store with
// a TTL for VMs shared by several hosts.
type Locker interface {
	// TryLock takes the lock of key (VMSpec.Key) without waiting. note
	// says who asks (pool and VM), for the holder's description. It
	// returns the held lock, or a nil lock and a description of the
	// current holder when another holds it. It must not block for long:
	// NewPool asks for every VM's lock in turn, and the retries of locks
	// held elsewhere (every Config.LockRetry) ask one after another.
	TryLock(key, note string) (Lock, string, error)
}

// Lock is a held machine lock.
type Lock interface {
	// Unlock releases the lock.
	Unlock() error
}

// LossNotifier is implemented by a Lock that can be lost while it is held:
// a lease with a TTL that expired because its renewals failed, so that
// another pool may have taken the VM. Lost's channel is closed then. The
// pool watches it: it stops driving the VM at once (no reset, no
// Backend.Stop at Close), closes Lease.Lost of a lease out on the VM, and
// tries to take the lock again like that of a VM another process holds.
type LossNotifier interface {
	Lost() <-chan struct{}
}

// WithLocker sets the Locker of the pool's machine locks (default: lock
// files in Config.LockDir).
func WithLocker(l Locker) Option { return func(o *options) { o.locker = l } }

// fileLocker is the default Locker: lock files (flock) in a directory.
type fileLocker struct{ dir string }

func (f fileLocker) TryLock(key, note string) (Lock, string, error) {
	l, holder, err := lockfile.TryLock(f.dir, key, note)
	if l == nil {
		return nil, holder, err // not a typed nil in the interface
	}
	return l, holder, err
}
