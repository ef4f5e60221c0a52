package vmpool

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// countingLocker hands out locks that may be lost, each counting its
// Unlock calls; the first busy TryLocks of each key find it held
// elsewhere.
type countingLocker struct {
	mu    sync.Mutex
	busy  int
	tries map[string]int
	locks []*countingLock
}

type countingLock struct {
	key      string
	lost     chan struct{}
	loseOnce sync.Once
	mu       sync.Mutex
	unlocks  int
	lostSeen int // lockEvents.lost calls for this lock
}

func (c *countingLocker) TryLock(key, note string) (Lock, string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tries[key]++
	if c.tries[key] <= c.busy {
		return nil, "another host", nil
	}
	l := &countingLock{key: key, lost: make(chan struct{})}
	c.locks = append(c.locks, l)
	return l, "", nil
}

func (l *countingLock) Unlock() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.unlocks++
	return nil
}

func (l *countingLock) Lost() <-chan struct{} { return l.lost }

func (l *countingLock) lose() { l.loseOnce.Do(func() { close(l.lost) }) }

// The invariants of machineLocks under churn: locks taken at once and by
// the retries, lost at random while they are taken and watched, wanted
// again by the "pool" as relockLocked does, then closed. Every lock the
// Locker gave is unlocked exactly once, and a loss is reported at most
// once per lock.
func TestMachineLocksUnlockEachLockOnce(t *testing.T) {
	for seed := range 20 {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(uint64(seed), 1))
			locker := &countingLocker{busy: rng.IntN(3), tries: map[string]int{}}
			ctx, cancel := context.WithCancel(context.Background())
			var wg sync.WaitGroup
			spawn := func(f func()) { wg.Go(f) }
			var pmu sync.Mutex // the "pool's" mutex: taken before m.mu, as the pool does
			var m *machineLocks
			var taken sync.Map
			m = newMachineLocks(ctx, locker, time.Millisecond, slog.New(slog.NewTextHandler(io.Discard, nil)), spawn, lockEvents{
				taken: func(key string, l Lock) { taken.Store(key, l) },
				busy:  func(key, holder string) {},
				fail:  func(key string, err error) { t.Errorf("TryLock %s: %v", key, err) },
				lost: func(key string, l Lock) {
					cl := l.(*countingLock)
					cl.mu.Lock()
					cl.lostSeen++
					cl.mu.Unlock()
					pmu.Lock()
					defer pmu.Unlock()
					if m.holds(key, l) {
						m.release(key)
						m.want(key, "again")
					}
				},
			})
			keys := []string{"a", "b", "c", "d"}
			pmu.Lock()
			for _, k := range keys {
				if _, _, err := m.try(k, "first"); err != nil {
					t.Fatal(err)
				}
			}
			pmu.Unlock()
			for range 200 {
				locker.mu.Lock()
				var l *countingLock
				if n := len(locker.locks); n > 0 {
					l = locker.locks[rng.IntN(n)]
				}
				locker.mu.Unlock()
				if l != nil && rng.IntN(3) == 0 {
					l.lose()
				}
				time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
			}
			cancel()
			wg.Wait()
			m.mu.Lock()
			for _, k := range keys {
				_, wanted := m.wanted[k]
				if (m.held[k] != nil) == wanted {
					t.Errorf("key %s: held %v, wanted %v: want exactly one", k, m.held[k] != nil, wanted)
				}
			}
			m.mu.Unlock()
			m.close()
			locker.mu.Lock()
			defer locker.mu.Unlock()
			if len(locker.locks) < len(keys) {
				t.Fatalf("%d locks taken for %d keys", len(locker.locks), len(keys))
			}
			for i, l := range locker.locks {
				l.mu.Lock()
				if l.unlocks != 1 {
					t.Errorf("lock %d (%s): unlocked %d times, want once", i, l.key, l.unlocks)
				}
				if l.lostSeen > 1 {
					t.Errorf("lock %d (%s): loss reported %d times, want at most once", i, l.key, l.lostSeen)
				}
				l.mu.Unlock()
			}
		})
	}
}
