//go:build !linux

package blob

import "os"

// setSHA256Attr is a no-op where user extended attributes are not wired up.
func setSHA256Attr(f *os.File, sum string) {}

// getSHA256Attr returns "" where user extended attributes are not wired up.
func getSHA256Attr(f *os.File) string { return "" }
