//go:build linux

package blob

import (
	"encoding/hex"
	"os"

	"golang.org/x/sys/unix"
)

// xattrSHA256 is the extended attribute in which the local backend records an object's SHA-256.
const xattrSHA256 = "user.codapipe.sha256"

// setSHA256Attr records sum on the open file f. It is best effort: on file systems without user
// extended attributes nothing is recorded and Stat returns no SHA-256.
func setSHA256Attr(f *os.File, sum string) {
	rc, err := f.SyscallConn()
	if err != nil {
		return
	}
	_ = rc.Control(func(fd uintptr) {
		_ = unix.Fsetxattr(int(fd), xattrSHA256, []byte(sum), 0)
	})
}

// getSHA256Attr returns the SHA-256 recorded on the open file f, or "".
func getSHA256Attr(f *os.File) string {
	rc, err := f.SyscallConn()
	if err != nil {
		return ""
	}
	var buf [64]byte
	n := -1
	_ = rc.Control(func(fd uintptr) {
		n, err = unix.Fgetxattr(int(fd), xattrSHA256, buf[:])
	})
	if err != nil || n != len(buf) {
		return ""
	}
	if _, err := hex.DecodeString(string(buf[:])); err != nil {
		return ""
	}
	return string(buf[:])
}
