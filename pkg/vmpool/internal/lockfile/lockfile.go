// Package lockfile keeps two processes (or two pools of one process) from
// driving one VM: an exclusive lock (flock on unix) on a file per machine,
// held for as long as the VM is driven and dropped by the kernel when the
// process dies, however it dies.
package lockfile

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fileName is the lock file of a machine key: a readable tail of the
// key and a hash of all of it, so every key has its own file and the name
// stays short and portable.
func fileName(key string) string {
	sum := sha256.Sum256([]byte(key))
	var b strings.Builder
	for _, r := range key {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '-', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	readable := strings.Trim(b.String(), "_.")
	if len(readable) > 48 {
		readable = readable[len(readable)-48:]
	}
	return readable + "-" + hex.EncodeToString(sum[:6]) + ".lock"
}

// Lock is an exclusive lock held on a lock file (flock on unix). It is
// released by Unlock or when the process ends, however it ends.
type Lock struct {
	f    *os.File
	path string
}

// TryLock takes the lock of key in dir without waiting. It returns
// (nil, holder, nil) when another process — or another open of the same
// file in this process — holds it; holder is what that holder wrote into
// the file ("pid=123 vm=a ..."), for messages. The directory is created if
// needed.
func TryLock(dir, key, note string) (*Lock, string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("vmpool: lock dir: %w (set lock_dir to a writable directory)", err)
	}
	path := filepath.Join(dir, fileName(key))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, "", fmt.Errorf("vmpool: lock file: %w (set lock_dir to a writable directory)", err)
	}
	ok, err := flockTry(f)
	if err != nil {
		f.Close()
		return nil, "", fmt.Errorf("vmpool: lock %s: %w", path, err)
	}
	if !ok {
		b := make([]byte, 512)
		n, _ := f.ReadAt(b, 0)
		f.Close()
		holder := strings.TrimSpace(string(b[:n]))
		if holder == "" {
			holder = "unknown holder"
		}
		return nil, holder, nil
	}
	info := fmt.Sprintf("pid=%d key=%s %s since=%s\n", os.Getpid(), key, note, time.Now().Format(time.RFC3339))
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(info), 0)
	}
	return &Lock{f: f, path: path}, "", nil
}

// Wait takes the lock of key in dir, polling every poll until ctx ends.
func Wait(ctx context.Context, dir, key, note string, poll time.Duration) (*Lock, error) {
	for {
		l, holder, err := TryLock(dir, key, note)
		if err != nil || l != nil {
			return l, err
		}
		t := time.NewTimer(poll)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("vmpool: waiting for lock %s (held by %s): %w", key, holder, ctx.Err())
		case <-t.C:
		}
	}
}

// Unlock releases the lock. The file stays: removing it would let a
// process that opened it before the removal lock a file nobody else sees.
func (l *Lock) Unlock() error {
	if l == nil || l.f == nil {
		return nil
	}
	_ = l.f.Truncate(0)
	flockRelease(l.f)
	err := l.f.Close() // closing the last descriptor releases the flock
	l.f = nil
	return err
}
