package desktop

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"hash/fnv"
	"image"
	"image/color"
	"math"
	"strings"
	"sync"
	"unicode/utf8"

	"golang.org/x/image/font"
	"golang.org/x/image/font/basicfont"
	"golang.org/x/image/math/fixed"
)

// canvas is the frame being rendered.
//
// The pixel loops (here, in pngenc.go and in the apps' texture code) carry
// //go:norace: they touch only the frame being rendered, which a single
// goroutine owns while drawing (the encoder's band goroutines only read
// it). Race instrumentation of these loops made -race test runs about 20×
// slower without checking anything shared.
type canvas struct {
	img  *image.RGBA
	seed uint64 // machine seed mixed into every texture
}

func rgb(r, g, b uint8) color.RGBA { return color.RGBA{r, g, b, 255} }

// Palette shared by the apps' chrome.
var (
	colPanel     = rgb(0x23, 0x26, 0x2e)
	colTitle     = rgb(0x3b, 0x41, 0x4d)
	colTitleText = rgb(0xf0, 0xf0, 0xf0)
	colWindow    = rgb(0xe8, 0xe8, 0xe6)
	colButton    = rgb(0xf6, 0xf6, 0xf4)
	colButtonHi  = rgb(0xcf, 0xe0, 0xf7)
	colBorder    = rgb(0x9a, 0x9a, 0x98)
	colText      = rgb(0x1d, 0x1d, 0x1d)
	colDim       = rgb(0x6a, 0x6a, 0x6a)
	colField     = rgb(0xff, 0xff, 0xff)
	colFocus     = rgb(0x35, 0x84, 0xe4)
	colSelect    = rgb(0x99, 0xc1, 0xf1)
	colSimLabel  = rgb(0xff, 0xc8, 0x3d)
	colWhite     = rgb(0xff, 0xff, 0xff)
	colBlack     = rgb(0, 0, 0)
)

// Grain amplitudes of the screen textures: the main canvases of the apps
// and the desktop get grainMain, text panels grainPanel. They make
// screenshots compress like real ones (100 KB and up).
var (
	grainMain  = 2
	grainPanel = 0
	grainSky   = 0 // Celestia's sky: its stars are texture enough
)

// Text metrics of basicfont.Face7x13.
const (
	glyphW = 7
	lineH  = 14
)

var fontFace = basicfont.Face7x13

// fill paints r with c.
//
//go:norace
func (c *canvas) fill(r image.Rectangle, col color.RGBA) {
	r = r.Intersect(c.img.Rect)
	if r.Empty() {
		return
	}
	pix := c.img.Pix
	stride := c.img.Stride
	row := make([]byte, 4*r.Dx())
	for i := 0; i < len(row); i += 4 {
		row[i], row[i+1], row[i+2], row[i+3] = col.R, col.G, col.B, 255
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		off := y*stride + 4*r.Min.X
		copy(pix[off:off+len(row)], row)
	}
}

// frame draws a 1-pixel border inside r.
func (c *canvas) frame(r image.Rectangle, col color.RGBA) {
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), col)
	c.fill(image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), col)
	c.fill(image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), col)
	c.fill(image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), col)
}

// set paints one pixel (clipped).
//
//go:norace
func (c *canvas) set(x, y int, col color.RGBA) {
	if x < 0 || y < 0 || x >= c.img.Rect.Max.X || y >= c.img.Rect.Max.Y {
		return
	}
	i := y*c.img.Stride + 4*x
	c.img.Pix[i], c.img.Pix[i+1], c.img.Pix[i+2] = col.R, col.G, col.B
}

// blend mixes col into one pixel with weight a in [0,1].
//
//go:norace
func (c *canvas) blend(x, y int, col color.RGBA, a float64) {
	if x < 0 || y < 0 || x >= c.img.Rect.Max.X || y >= c.img.Rect.Max.Y {
		return
	}
	i := y*c.img.Stride + 4*x
	p := c.img.Pix[i : i+3 : i+3]
	p[0] = uint8(float64(p[0])*(1-a) + float64(col.R)*a)
	p[1] = uint8(float64(p[1])*(1-a) + float64(col.G)*a)
	p[2] = uint8(float64(p[2])*(1-a) + float64(col.B)*a)
}

// text draws s with its baseline box starting at (x, y) (y is the top of a
// 14-pixel line) and returns the x after it. Text is clipped to clip when
// clip is not empty.
func (c *canvas) text(x, y int, s string, col color.RGBA) int {
	return c.textClip(x, y, s, col, image.Rectangle{})
}

var glyphCache sync.Map // rune -> *glyph

type glyph struct {
	mask  []uint8 // glyphW × 13 alpha
	w, h  int
	empty bool
}

func glyphOf(r rune) *glyph {
	if g, ok := glyphCache.Load(r); ok {
		return g.(*glyph)
	}
	w, h := glyphW, 13
	img := image.NewAlpha(image.Rect(0, 0, w, h))
	d := font.Drawer{Dst: img, Src: image.Opaque, Face: fontFace, Dot: fixed.P(0, fontFace.Ascent)}
	d.DrawString(string(r))
	g := &glyph{mask: img.Pix, w: w, h: h, empty: true}
	for _, a := range img.Pix {
		if a != 0 {
			g.empty = false
			break
		}
	}
	glyphCache.Store(r, g)
	return g
}

//go:norace
func (c *canvas) textClip(x, y int, s string, col color.RGBA, clip image.Rectangle) int {
	if clip.Empty() {
		clip = c.img.Rect
	} else {
		clip = clip.Intersect(c.img.Rect)
	}
	for _, r := range s {
		if r == '\t' {
			r = ' '
		}
		if x >= clip.Max.X {
			break
		}
		g := glyphOf(r)
		if !g.empty {
			for gy := 0; gy < g.h; gy++ {
				py := y + gy
				if py < clip.Min.Y || py >= clip.Max.Y {
					continue
				}
				for gx := 0; gx < g.w; gx++ {
					px := x + gx
					if px < clip.Min.X || px >= clip.Max.X {
						continue
					}
					if a := g.mask[gy*g.w+gx]; a != 0 {
						if a == 255 {
							c.set(px, py, col)
						} else {
							c.blend(px, py, col, float64(a)/255)
						}
					}
				}
			}
		}
		x += glyphW
	}
	return x
}

// textW returns the pixel width of s.
func textW(s string) int { return utf8.RuneCountInString(s) * glyphW }

// textCentered draws s centred in r.
func (c *canvas) textCentered(r image.Rectangle, s string, col color.RGBA) {
	maxChars := (r.Dx() - 4) / glyphW
	if maxChars < 1 {
		return
	}
	if utf8.RuneCountInString(s) > maxChars {
		s = string([]rune(s)[:maxChars])
	}
	x := r.Min.X + (r.Dx()-textW(s))/2
	y := r.Min.Y + (r.Dy()-13)/2
	c.textClip(x, y, s, col, r)
}

// line draws a line from (x0,y0) to (x1,y1) with thickness w, clipped
// to clip.
//
//go:norace
func (c *canvas) line(x0, y0, x1, y1 float64, col color.RGBA, w int, clip image.Rectangle) {
	clip = clip.Intersect(c.img.Rect)
	if math.IsNaN(x0+y0+x1+y1) || math.IsInf(x0+y0+x1+y1, 0) {
		return
	}
	// Skip lines entirely outside the clip box.
	fw := float64(w)
	if math.Max(x0, x1)+fw < float64(clip.Min.X) || math.Min(x0, x1)-fw > float64(clip.Max.X) ||
		math.Max(y0, y1)+fw < float64(clip.Min.Y) || math.Min(y0, y1)-fw > float64(clip.Max.Y) {
		return
	}
	dx, dy := x1-x0, y1-y0
	n := int(math.Max(math.Abs(dx), math.Abs(dy)))
	if n > 4000 {
		n = 4000
	}
	if n == 0 {
		n = 1
	}
	half := w / 2
	for i := 0; i <= n; i++ {
		t := float64(i) / float64(n)
		x := int(math.Round(x0 + dx*t))
		y := int(math.Round(y0 + dy*t))
		for oy := -half; oy < max(1, w-half); oy++ {
			for ox := -half; ox < max(1, w-half); ox++ {
				if p := image.Pt(x+ox, y+oy); p.In(clip) {
					c.set(p.X, p.Y, col)
				}
			}
		}
	}
}

// disc draws a shaded sphere-like disc of radius r at (cx, cy).
//
//go:norace
func (c *canvas) disc(cx, cy, r float64, col color.RGBA, shade bool, clip image.Rectangle) {
	x0 := int(math.Floor(cx - r))
	x1 := int(math.Ceil(cx + r))
	y0 := int(math.Floor(cy - r))
	y1 := int(math.Ceil(cy + r))
	r2 := r * r
	for y := y0; y <= y1; y++ {
		if y < clip.Min.Y || y >= clip.Max.Y {
			continue
		}
		for x := x0; x <= x1; x++ {
			if x < clip.Min.X || x >= clip.Max.X {
				continue
			}
			ddx, ddy := float64(x)-cx, float64(y)-cy
			d2 := ddx*ddx + ddy*ddy
			if d2 > r2 {
				continue
			}
			if !shade {
				c.set(x, y, col)
				continue
			}
			// Light from the upper left.
			z := math.Sqrt(math.Max(0, r2-d2)) / r
			l := 0.35 + 0.65*math.Max(0, (-ddx/r*0.4-ddy/r*0.5+z*0.77))
			c.set(x, y, rgb(scale8(col.R, l), scale8(col.G, l), scale8(col.B, l)))
		}
	}
}

func scale8(v uint8, f float64) uint8 {
	x := float64(v) * f
	if x > 255 {
		return 255
	}
	if x < 0 {
		return 0
	}
	return uint8(x)
}

// splitmix64 is the mixing function used for every texture.
func splitmix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// hashString returns a 64-bit FNV-1a hash of the parts.
func hashString(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// noise adds seeded per-pixel grain to r: the same offset in
// [-amp/2, amp/2) on all three channels (reflected at 0 and 255).
//
//go:norace
func (c *canvas) noise(r image.Rectangle, seed uint64, amp int) {
	r = r.Intersect(c.img.Rect)
	if r.Empty() || amp <= 1 {
		return
	}
	s := splitmix64(seed ^ c.seed)
	pix := c.img.Pix
	half := amp / 2
	for y := r.Min.Y; y < r.Max.Y; y++ {
		off := y*c.img.Stride + 4*r.Min.X
		state := splitmix64(s+uint64(y)*0x632be59bd9b4e019) | 1
		for x := r.Min.X; x < r.Max.X; x++ {
			state ^= state << 13
			state ^= state >> 7
			state ^= state << 17
			n := int((state>>32)%uint64(amp)) - half
			pix[off] = grain(pix[off], n)
			pix[off+1] = grain(pix[off+1], n)
			pix[off+2] = grain(pix[off+2], n)
			off += 4
		}
	}
}

// grain offsets v by n, reflecting at the ends of the range so that black
// and white areas get texture too.
func grain(v uint8, n int) uint8 {
	x := int(v) + n
	if x < 0 || x > 255 {
		x = int(v) - n
	}
	return uint8(x)
}

func clampU8(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// gradient fills r with a vertical gradient from top to bottom colour.
//
//go:norace
func (c *canvas) gradient(r image.Rectangle, top, bottom color.RGBA) {
	r = r.Intersect(c.img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		t := float64(y-r.Min.Y) / float64(max(1, r.Dy()-1))
		col := rgb(lerp8(top.R, bottom.R, t), lerp8(top.G, bottom.G, t), lerp8(top.B, bottom.B, t))
		c.fill(image.Rect(r.Min.X, y, r.Max.X, y+1), col)
	}
}

func lerp8(a, b uint8, t float64) uint8 {
	return uint8(math.Round(float64(a)*(1-t) + float64(b)*t))
}

// Widgets.

func (c *canvas) button(r image.Rectangle, caption string, active bool) {
	bg := colButton
	if active {
		bg = colButtonHi
	}
	c.fill(r, bg)
	c.frame(r, colBorder)
	c.textCentered(r, caption, colText)
}

func (c *canvas) tab(r image.Rectangle, caption string, active bool) {
	bg := rgb(0xd6, 0xd6, 0xd4)
	if active {
		bg = colWindow
	}
	c.fill(r, bg)
	c.frame(r, colBorder)
	if active {
		c.fill(image.Rect(r.Min.X+1, r.Max.Y-1, r.Max.X-1, r.Max.Y), colWindow)
		c.fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+2), colFocus)
	}
	c.textCentered(r, caption, colText)
}

// field draws a text field with its text, caret and selection.
func (c *canvas) field(r image.Rectangle, text, placeholder string, focused, selAll bool) {
	c.fill(r, colField)
	border := colBorder
	if focused {
		border = colFocus
	}
	c.frame(r, border)
	if focused {
		c.frame(r.Inset(1), border)
	}
	inner := r.Inset(3)
	maxChars := inner.Dx() / glyphW
	shown := text
	if n := utf8.RuneCountInString(shown); n > maxChars-1 && maxChars > 1 {
		shown = string([]rune(shown)[n-(maxChars-1):]) // keep the end visible
	}
	y := r.Min.Y + (r.Dy()-13)/2
	if text == "" && !focused {
		c.textClip(inner.Min.X+2, y, placeholder, colDim, inner)
		return
	}
	if selAll && text != "" {
		c.fill(image.Rect(inner.Min.X+1, y-1, inner.Min.X+2+textW(shown), y+14).Intersect(inner), colSelect)
	}
	x := c.textClip(inner.Min.X+2, y, shown, colText, inner)
	if focused && !selAll {
		c.fill(image.Rect(x, y-1, x+1, y+14).Intersect(inner), colText)
	}
}

func (c *canvas) checkbox(r image.Rectangle, caption string, on bool, radio bool) {
	box := image.Rect(r.Min.X+2, r.Min.Y+(r.Dy()-12)/2, r.Min.X+14, r.Min.Y+(r.Dy()-12)/2+12)
	c.fill(box, colField)
	c.frame(box, colBorder)
	if on {
		if radio {
			c.disc(float64(box.Min.X)+5.5, float64(box.Min.Y)+5.5, 3.5, colFocus, false, box)
		} else {
			c.fill(box.Inset(3), colFocus)
		}
	}
	c.textClip(box.Max.X+6, r.Min.Y+(r.Dy()-13)/2, caption, colText, r)
}

// panel draws a sunken panel with a caption strip.
func (c *canvas) panel(r image.Rectangle, caption string, bg color.RGBA) image.Rectangle {
	c.fill(r, bg)
	c.frame(r, colBorder)
	if caption == "" {
		return r.Inset(1)
	}
	head := image.Rect(r.Min.X+1, r.Min.Y+1, r.Max.X-1, r.Min.Y+17)
	c.fill(head, rgb(0xdc, 0xdc, 0xda))
	c.textClip(head.Min.X+4, head.Min.Y+2, caption, colText, head)
	return image.Rect(r.Min.X+1, head.Max.Y, r.Max.X-1, r.Max.Y-1)
}

// lines draws text lines top-down in r, scrolled so that the last lines
// are visible, minus scroll lines from the end.
func (c *canvas) lines(r image.Rectangle, ls []string, scroll int, col color.RGBA) {
	n := (r.Dy() - 4) / lineH
	if n <= 0 {
		return
	}
	end := len(ls) - scroll
	if end > len(ls) {
		end = len(ls)
	}
	if end < 0 {
		end = 0
	}
	start := max(0, end-n)
	y := r.Min.Y + 2
	for _, l := range ls[start:end] {
		lc := col
		if strings.HasPrefix(l, "ERROR") || strings.HasPrefix(l, "Error") || strings.HasPrefix(l, "Unknown") {
			lc = rgb(0xc0, 0x1c, 0x28)
		}
		c.textClip(r.Min.X+4, y, l, lc, r)
		y += lineH
	}
}

// screenshotLocked renders the screen and encodes it.
func (m *machine) screenshotLocked() ([]byte, error) {
	img := image.NewRGBA(image.Rect(0, 0, ScreenW, ScreenH))
	c := &canvas{img: img, seed: splitmix64(uint64(m.cfg.Seed))}
	st := m.stateLocked()
	m.renderLocked(c)
	return encodePNG(img, st)
}

// renderLocked draws the whole screen.
func (m *machine) renderLocked(c *canvas) {
	// Desktop.
	c.gradient(image.Rect(0, panelH, ScreenW, ScreenH), rgb(0x1f, 0x4e, 0x79), rgb(0x2e, 0x7d, 0x6b))
	if m.app == nil {
		c.noise(image.Rect(0, panelH, ScreenW, ScreenH), 0xdeadbeef, grainMain)
		c.textCentered(image.Rect(0, 360, ScreenW, 390), "codapipe SIMULATOR desktop", colWhite)
		c.textCentered(image.Rect(0, 392, ScreenW, 420), "no application is running", rgb(0xcc, 0xdd, 0xee))
		for i, name := range []string{"ChimeraX", "Celestia", "KAlgebra", "GRASS GIS", "Terminal", "Files"} {
			r := image.Rect(24, 60+i*86, 104, 130+i*86)
			c.fill(r.Inset(14), rgb(0xee, 0xee, 0xee))
			c.frame(r.Inset(14), colBorder)
			c.textCentered(image.Rect(r.Min.X-10, r.Max.Y-14, r.Max.X+10, r.Max.Y+2), name, colWhite)
		}
	} else {
		// Title bar.
		c.fill(image.Rect(0, panelH, ScreenW, appTop), colTitle)
		c.text(10, panelH+5, m.app.name()+" - SIMULATOR", colTitleText)
		for i, s := range []string{"_", "[]", "x"} {
			c.textCentered(image.Rect(ScreenW-90+i*30, panelH, ScreenW-60+i*30, appTop), s, colTitleText)
		}
		c.fill(image.Rect(0, appTop, ScreenW, ScreenH), colWindow)
		m.app.render(c, m.ui)
		m.renderTooltip(c)
	}
	// Top panel with the simulator label.
	c.fill(image.Rect(0, 0, ScreenW, panelH), colPanel)
	c.fill(image.Rect(0, 0, 96, panelH), colSimLabel)
	c.textCentered(image.Rect(0, 0, 96, panelH), "SIMULATOR", colBlack)
	c.text(108, 5, "Activities", colTitleText)
	right := "codapipe simulated VM"
	c.text(ScreenW-textW(right)-12, 5, right, colTitleText)
}

// renderTooltip shows the label of the element under the cursor.
func (m *machine) renderTooltip(c *canvas) {
	el := m.hit(m.cur)
	if el == nil || el.Kind == "canvas" || el.Kind == "list" {
		return
	}
	w := textW(el.Label) + 10
	x := m.cur.X + 12
	y := m.cur.Y + 18
	if x+w > ScreenW {
		x = ScreenW - w
	}
	if y+18 > ScreenH {
		y = m.cur.Y - 22
	}
	r := image.Rect(x, y, x+w, y+18)
	c.fill(r, rgb(0xff, 0xff, 0xe1))
	c.frame(r, colBorder)
	c.text(x+5, y+3, el.Label, colText)
}

// encodePNG encodes img as an RGB PNG carrying the state chunk before
// IEND.
func encodePNG(img *image.RGBA, st State) ([]byte, error) {
	js, err := stateJSON(st)
	if err != nil {
		return nil, fmt.Errorf("sim: encoding screenshot state: %w", err)
	}
	return encodeRGBPNG(img, [2][]byte{[]byte(StateChunkKeyword), js})
}

// stateJSON encodes the state with sorted map keys and pure ASCII (non-ASCII
// characters as \u escapes), as a PNG tEXt chunk needs Latin-1.
func stateJSON(st State) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st); err != nil {
		return nil, err
	}
	b := bytes.TrimRight(buf.Bytes(), "\n")
	ascii := true
	for _, c := range b {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	if ascii {
		return b, nil
	}
	var out bytes.Buffer
	for _, r := range string(b) {
		switch {
		case r < 0x80:
			out.WriteByte(byte(r))
		case r <= 0xffff:
			fmt.Fprintf(&out, `\u%04x`, r)
		default:
			r -= 0x10000
			fmt.Fprintf(&out, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
		}
	}
	return out.Bytes(), nil
}

var pngSignature = []byte("\x89PNG\r\n\x1a\n")

// ReadStateChunk extracts the simulated state from a screenshot's
// StateChunkKeyword tEXt chunk. It checks the PNG signature and the
// chunk's CRC; a PNG without the chunk is an error.
func ReadStateChunk(data []byte) (State, error) {
	if !bytes.HasPrefix(data, pngSignature) {
		return State{}, errors.New("sim: read state chunk: not a PNG")
	}
	for off := len(pngSignature); off+12 <= len(data); {
		n := binary.BigEndian.Uint32(data[off:])
		if uint64(n) > uint64(len(data)-off-12) {
			return State{}, fmt.Errorf("sim: read state chunk: chunk at offset %d overruns the file", off)
		}
		typ := string(data[off+4 : off+8])
		body := data[off+8 : off+8+int(n)]
		if typ == "tEXt" {
			kw, text, found := bytes.Cut(body, []byte{0})
			if found && string(kw) == StateChunkKeyword {
				want := binary.BigEndian.Uint32(data[off+8+int(n):])
				if got := crc32.ChecksumIEEE(data[off+4 : off+8+int(n)]); got != want {
					return State{}, fmt.Errorf("sim: read state chunk: CRC mismatch (got %08x, want %08x)", got, want)
				}
				var st State
				if err := json.Unmarshal(text, &st); err != nil {
					return State{}, fmt.Errorf("sim: read state chunk: %w", err)
				}
				return st, nil
			}
		}
		if typ == "IEND" {
			break
		}
		off += 12 + int(n)
	}
	return State{}, fmt.Errorf("sim: read state chunk: no %q tEXt chunk", StateChunkKeyword)
}
