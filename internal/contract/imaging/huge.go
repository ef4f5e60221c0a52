package imaging

import (
	"bufio"
	"bytes"
	"compress/flate"
	"encoding/binary"
	"hash/crc32"
	"io"
)

// HugePNG writes a valid w×h 8-bit grey PNG of one colour without holding
// its pixels (a 20000×20000 screenshot is about 560 KB). For the tests and
// benchmarks of the pixel limits: an image that would explode when
// decoded.
//
// Every pixel is 0, so the image data (each row a filter byte 0 and width
// zeros) is compressed once for a block of rows of about 1 MiB, with a
// sync flush, and that block's deflate data written again for every block:
// whatever a back-reference reaches in the data before it is zeros too. A
// 20000×20000 image is made in milliseconds, not the seconds (tens of them
// under the race detector) of compressing 400 MB.
func HugePNG(w io.Writer, width, height int) error {
	bw := bufio.NewWriter(w)
	bw.WriteString("\x89PNG\r\n\x1a\n")
	chunk := func(typ string, data []byte) {
		var n [4]byte
		binary.BigEndian.PutUint32(n[:], uint32(len(data)))
		bw.Write(n[:])
		crc := crc32.NewIEEE()
		io.WriteString(crc, typ)
		crc.Write(data)
		bw.WriteString(typ)
		bw.Write(data)
		binary.BigEndian.PutUint32(n[:], crc.Sum32())
		bw.Write(n[:])
	}
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(width))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(height))
	ihdr[8], ihdr[9] = 8, 0 // 8-bit greyscale
	chunk("IHDR", ihdr[:])

	rowBytes := 1 + width // filter 0, then zeros
	perBlock := max(1, min(height, (1<<20)/rowBytes))
	deflate := func(rows int, final bool) []byte {
		var b bytes.Buffer
		fw, _ := flate.NewWriter(&b, flate.BestSpeed)
		row := make([]byte, rowBytes)
		for range rows {
			fw.Write(row)
		}
		if final {
			fw.Close()
		} else {
			fw.Flush() // byte-aligned, not the last block
		}
		return b.Bytes()
	}
	var idat bytes.Buffer
	idat.WriteString("\x78\x01") // zlib: deflate, 32 KiB window, no dictionary
	flush := func() {
		if idat.Len() > 1<<20 {
			chunk("IDAT", idat.Bytes())
			idat.Reset()
		}
	}
	block := deflate(perBlock, false)
	for range height / perBlock {
		idat.Write(block)
		flush()
	}
	idat.Write(deflate(height%perBlock, true)) // the rest of the rows, and the final block
	// Adler-32 of the uncompressed data, all zeros: A stays 1, B is the
	// byte count (modulo 65521).
	total := uint64(height) * uint64(rowBytes)
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], uint32(total%65521)<<16|1)
	idat.Write(sum[:])
	chunk("IDAT", idat.Bytes())
	chunk("IEND", nil)
	return bw.Flush()
}
