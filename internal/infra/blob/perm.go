package blob

import (
	"bufio"
	"io/fs"
	"os"
	"strconv"
	"strings"
)

// Modes of what the pipeline writes for others to read (shards, manifests,
// screenshots, the judged archive, SFT sets): files 0644 and folders 0755,
// less the process's umask. Folders are made with os.Mkdir(DirPerm), which
// applies the umask itself; files made by os.CreateTemp start as 0600 and
// are given FileMode() before they are renamed into place.
const (
	// FilePerm is the mode of a data file before the umask applies.
	FilePerm fs.FileMode = 0o644
	// DirPerm is the mode of a data folder before the umask applies.
	DirPerm fs.FileMode = 0o755
)

// defaultUmask is the umask assumed where the process's cannot be read.
const defaultUmask fs.FileMode = 0o022

// Umask returns the process's file mode creation mask without changing it:
// the "Umask:" line of /proc/self/status (Linux 4.7 and later), 022 where
// that cannot be read. (syscall.Umask would have to set the mask to read
// it, which races with files created by other goroutines.)
func Umask() fs.FileMode {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return defaultUmask
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		v, ok := strings.CutPrefix(sc.Text(), "Umask:")
		if !ok {
			continue
		}
		n, err := strconv.ParseUint(strings.TrimSpace(v), 8, 32)
		if err != nil {
			return defaultUmask
		}
		return fs.FileMode(n) & fs.ModePerm
	}
	return defaultUmask
}

// FileMode returns the mode a data file gets: FilePerm less the umask, as
// if it had been created with os.OpenFile(name, …, FilePerm).
func FileMode() fs.FileMode { return FilePerm &^ Umask() }

// Publish gives the open file f the data file mode (FileMode), for a
// temporary file (os.CreateTemp makes them 0600) about to be renamed into
// place as data for others.
func Publish(f *os.File) error {
	return f.Chmod(FileMode())
}
