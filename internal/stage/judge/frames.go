package judge

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"image/png"
	"strconv"
	"strings"

	"github.com/codapipe/codapipe/internal/contract/imaging"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Frame is one screenshot the judge is shown.
type Frame struct {
	// Step is the 1-based step whose observation the frame is; for the
	// final screenshot, the last step (the frame shows the screen after
	// it, and Final is true).
	Step  int
	Final bool
	// Thought is the executed plan's thought and Code what was sent to
	// the machine at Step (pyautogui code, or DONE, FAIL, WAIT); both
	// empty for the final frame.
	Thought, Code string
	Image         traj.ImageRef
}

// DefaultMaxFrames is the default bound on the frames of one judge call.
const DefaultMaxFrames = 16

// DefaultMaxRequestPixels bounds the pixels of the frames of one judge
// call together by default: 128 million, 16 frames of a 4K screen (3840×
// 2160, 8.3 million each). A Qwen2.5-VL server resizes each image to at
// most 12.8 million pixels (its max_pixels), but it reads the whole
// request first.
const DefaultMaxRequestPixels = 128_000_000

// Keyframes returns the frames the judge sees of t, in order: every step's
// observation, then the final screenshot. When there are more than max
// (max >= 2), it returns an even subsample of max of them that keeps the
// first and the last. Steps without a screenshot are left out.
func Keyframes(t *traj.Trajectory, max int) []Frame {
	var all []Frame
	for i := range t.Steps {
		s := &t.Steps[i]
		if s.Screenshot.SHA256 == "" {
			continue
		}
		f := Frame{Step: i + 1, Code: strings.TrimSpace(s.Code), Image: s.Screenshot}
		if s.Executed >= 0 && s.Executed < len(s.Candidates) {
			f.Thought = strings.TrimSpace(s.Candidates[s.Executed].Thought)
		}
		all = append(all, f)
	}
	if t.FinalScreenshot != nil && t.FinalScreenshot.SHA256 != "" {
		all = append(all, Frame{Step: len(t.Steps), Final: true, Image: *t.FinalScreenshot})
	}
	return subsample(all, max)
}

// subsample picks max frames at evenly spaced positions, rounding to the
// nearest, always including the first and the last.
func subsample(all []Frame, max int) []Frame {
	n := len(all)
	if max < 2 {
		max = 2
	}
	if n <= max {
		return all
	}
	out := make([]Frame, 0, max)
	for i := 0; i < max; i++ {
		// round(i·(n−1)/(max−1)) in integers; positions are strictly
		// increasing because n > max.
		j := (2*i*(n-1) + (max - 1)) / (2 * (max - 1))
		out = append(out, all[j])
	}
	return out
}

// Size is an image size in pixels.
type Size struct{ W, H int }

// String is "WxH".
func (s Size) String() string { return strconv.Itoa(s.W) + "x" + strconv.Itoa(s.H) }

// IsZero reports whether s is unset.
func (s Size) IsZero() bool { return s.W == 0 && s.H == 0 }

// ParseSize reads "WxH" (both at least 16 pixels).
func ParseSize(v string) (Size, error) {
	w, h, ok := strings.Cut(strings.ToLower(strings.TrimSpace(v)), "x")
	if !ok {
		return Size{}, fmt.Errorf("size %q: want WxH, e.g. 640x400", v)
	}
	W, err1 := strconv.Atoi(w)
	H, err2 := strconv.Atoi(h)
	if err1 != nil || err2 != nil || W < 16 || H < 16 || W > 1<<14 || H > 1<<14 {
		return Size{}, fmt.Errorf("size %q: want WxH with whole numbers of pixels from 16 to 16384, e.g. 640x400", v)
	}
	return Size{W, H}, nil
}

// Fit is the size of a w×h image scaled down to fit in box with its
// aspect ratio kept (never scaled up); the zero box keeps w×h.
func (box Size) Fit(w, h int) Size {
	if box.IsZero() {
		return Size{w, h}
	}
	fw, fh := imaging.Fit(w, h, box.W, box.H)
	return Size{fw, fh}
}

// Resize scales a PNG down to fit in box (aspect ratio kept) with
// imaging.Scale, and encodes it
// as PNG again. The text chunks of the
// original (tEXt, zTXt, iTXt: metadata such as the simulator's state) are
// copied into the result. An image that already fits is returned as it is.
func Resize(data []byte, box Size) ([]byte, Size, error) { return resize(data, box, 0) }

// resize is Resize decoding at most maxPixels (imaging.DefaultMaxPixels
// when 0): the judge's --max-image-pixels.
func resize(data []byte, box Size, maxPixels int64) ([]byte, Size, error) {
	cfg, err := png.DecodeConfig(bytes.NewReader(data))
	if err != nil {
		return nil, Size{}, fmt.Errorf("resize: %w", err)
	}
	to := box.Fit(cfg.Width, cfg.Height)
	if to.W == cfg.Width && to.H == cfg.Height {
		return data, to, nil
	}
	src, err := imaging.DecodePNG("screenshot", data, maxPixels, "--max-image-pixels") // checked again: never decoded past the limit
	if err != nil {
		return nil, Size{}, fmt.Errorf("resize: %w", err)
	}
	dst := imaging.Scale(src, to.W, to.H)
	var buf bytes.Buffer
	enc := png.Encoder{CompressionLevel: png.BestSpeed}
	if err := enc.Encode(&buf, dst); err != nil {
		return nil, Size{}, fmt.Errorf("resize: %w", err)
	}
	out, err := copyTextChunks(data, buf.Bytes())
	if err != nil {
		return nil, Size{}, fmt.Errorf("resize: %w", err)
	}
	return out, to, nil
}

var pngSig = []byte("\x89PNG\r\n\x1a\n")

// copyTextChunks inserts the text chunks of src after the IHDR chunk of
// dst.
func copyTextChunks(src, dst []byte) ([]byte, error) {
	var text []byte
	err := chunks(src, func(typ string, chunk []byte) {
		switch typ {
		case "tEXt", "zTXt", "iTXt":
			text = append(text, chunk...)
		}
	})
	if err != nil || len(text) == 0 {
		return dst, err
	}
	// IHDR is the first chunk: 8 (signature) + 4 + 4 + 13 + 4 bytes.
	const ihdrEnd = 8 + 25
	if len(dst) < ihdrEnd || !bytes.HasPrefix(dst, pngSig) || string(dst[12:16]) != "IHDR" {
		return nil, errors.New("encoded PNG does not start with IHDR")
	}
	out := make([]byte, 0, len(dst)+len(text))
	out = append(out, dst[:ihdrEnd]...)
	out = append(out, text...)
	return append(out, dst[ihdrEnd:]...), nil
}

// chunks calls fn with the type and the whole bytes (length, type, data,
// CRC) of each chunk of a PNG, checking each CRC.
func chunks(data []byte, fn func(typ string, chunk []byte)) error {
	if !bytes.HasPrefix(data, pngSig) {
		return errors.New("not a PNG")
	}
	for off := len(pngSig); off < len(data); {
		if off+12 > len(data) {
			return fmt.Errorf("PNG chunk at offset %d is cut off", off)
		}
		n := binary.BigEndian.Uint32(data[off:])
		if uint64(n) > uint64(len(data)-off-12) {
			return fmt.Errorf("PNG chunk at offset %d overruns the file", off)
		}
		end := off + 12 + int(n)
		if crc32.ChecksumIEEE(data[off+4:end-4]) != binary.BigEndian.Uint32(data[end-4:]) {
			return fmt.Errorf("PNG chunk %q at offset %d: CRC mismatch", data[off+4:off+8], off)
		}
		typ := string(data[off+4 : off+8])
		fn(typ, data[off:end])
		if typ == "IEND" {
			return nil
		}
		off = end
	}
	return errors.New("PNG without IEND")
}
