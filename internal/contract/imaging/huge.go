package imaging

import (
	"bufio"
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"hash/crc32"
	"io"
)

// HugePNG writes a valid w×h 8-bit grey PNG of one colour without holding
// its pixels: the rows are compressed as they are made (a 20000×20000
// screenshot is about 560 KB). For the tests and benchmarks of the pixel
// limits: an image that would explode when decoded.
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
	var idat bytes.Buffer
	zw, _ := zlib.NewWriterLevel(&idat, zlib.BestSpeed)
	row := make([]byte, 1+width) // filter 0, then zeros
	for range height {
		zw.Write(row)
		if idat.Len() > 1<<20 {
			chunk("IDAT", idat.Bytes())
			idat.Reset()
		}
	}
	zw.Close()
	chunk("IDAT", idat.Bytes())
	chunk("IEND", nil)
	return bw.Flush()
}
