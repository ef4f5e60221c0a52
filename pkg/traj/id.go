package traj

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"strings"
	"sync"
	"time"
)

// crockford is the Crockford base32 alphabet: sortable, no I, L, O, U.
const crockford = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

// IDLen is the length of an id made by NewID.
const IDLen = 26

// idGen makes ULID-style ids: 48 bits of Unix milliseconds then 80 bits of
// randomness, 26 Crockford base32 characters. Within one millisecond the
// random part is incremented, so ids from one process sort in creation order.
type idGen struct {
	mu     sync.Mutex
	lastMS uint64
	hi     uint16 // top 16 bits of the 80-bit random part
	lo     uint64 // low 64 bits
}

var defaultGen idGen

// NewID returns a new unique id that sorts lexically by creation time
// (millisecond resolution; ids made in one process are strictly increasing).
func NewID() string { return defaultGen.next(time.Now()) }

func (g *idGen) next(now time.Time) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	ms := uint64(now.UnixMilli())
	if ms > g.lastMS {
		var b [10]byte
		if _, err := rand.Read(b[:]); err != nil {
			panic(fmt.Sprintf("traj: crypto/rand: %v", err)) // never happens on supported platforms
		}
		g.lastMS = ms
		g.hi = binary.BigEndian.Uint16(b[:2])
		g.lo = binary.BigEndian.Uint64(b[2:])
	} else {
		// Same (or earlier: clock went back) millisecond: keep the last
		// timestamp and increment the random part, so order is preserved.
		g.lo++
		if g.lo == 0 {
			g.hi++
		}
	}
	return encodeID(g.lastMS, g.hi, g.lo)
}

func encodeID(ms uint64, hi uint16, lo uint64) string {
	// 128 bits: ms (48) | hi (16) | lo (64), written as 26 base32 digits
	// (130 bits, the top 2 are zero).
	var n [2]uint64
	n[0] = ms<<16 | uint64(hi) // high 64 bits
	n[1] = lo                  // low 64 bits
	var out [IDLen]byte
	for i := IDLen - 1; i >= 0; i-- {
		out[i] = crockford[n[1]&31]
		n[1] = n[1]>>5 | n[0]<<59
		n[0] >>= 5
	}
	return string(out[:])
}

// IDTime returns the creation time encoded in an id made by NewID.
func IDTime(id string) (time.Time, error) {
	if err := checkID(id); err != nil {
		return time.Time{}, err
	}
	var ms uint64
	for i := 0; i < 10; i++ { // first 10 digits = 50 bits: 2 zero bits, then 48 bits of ms
		ms = ms<<5 | uint64(strings.IndexByte(crockford, id[i]))
	}
	return time.UnixMilli(int64(ms)).UTC(), nil
}

func checkID(id string) error {
	if len(id) != IDLen {
		return fmt.Errorf("id %s: want %d characters, got %d", QuoteName(id), IDLen, len(id))
	}
	if id[0] > '7' {
		return fmt.Errorf("id %s: first character must be 0-7", QuoteName(id))
	}
	for i := 0; i < len(id); i++ {
		if strings.IndexByte(crockford, id[i]) < 0 {
			return fmt.Errorf("id %s: character %q at %d is not Crockford base32", QuoteName(id), id[i], i)
		}
	}
	return nil
}

// GroupID is the deterministic id of the GRPO group formed at one step of a
// trajectory in step mode: "<trajectory id>/<step index>".
func GroupID(trajectoryID string, step int) string {
	return fmt.Sprintf("%s/%d", trajectoryID, step)
}

// ParseGroupID splits a GroupID into its trajectory id and step index.
func ParseGroupID(g string) (trajectoryID string, step int, err error) {
	i := strings.LastIndexByte(g, '/')
	if i <= 0 || i == len(g)-1 {
		return "", 0, fmt.Errorf("group id %q: want <trajectory>/<step>", g)
	}
	if _, err := fmt.Sscanf(g[i+1:], "%d", &step); err != nil || step < 0 || fmt.Sprint(step) != g[i+1:] {
		return "", 0, fmt.Errorf("group id %q: step %q is not a non-negative integer", g, g[i+1:])
	}
	return g[:i], step, nil
}

// EpisodeID is the deterministic trajectory id of one episode of a run: the
// time part is the run's start (so a run's trajectories sort together and
// after earlier runs), the random part a hash of (run, task, sample). A
// re-run of the same episode after a crash gets the same id, so the bus's
// de-duplication keeps one trajectory per episode.
func EpisodeID(runStart time.Time, run, taskID string, sample int) string {
	h := sha256.Sum256([]byte(fmt.Sprintf("codapipe-episode\x00%s\x00%s\x00%d", run, taskID, sample)))
	ms := uint64(runStart.UnixMilli()) & (1<<48 - 1)
	return encodeID(ms, binary.BigEndian.Uint16(h[:2]), binary.BigEndian.Uint64(h[2:10]))
}
