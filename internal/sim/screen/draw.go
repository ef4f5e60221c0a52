// Package screen is part of codapipe's SIMULATOR (see package sim): the
// drawing primitives of the simulated screens — a Canvas with fills,
// text in basicfont's 7×13 face, lines, shaded discs, seeded grain and
// the widgets every simulated app draws (buttons, tabs, text fields,
// check boxes, panels, text lines) — and the PNG encoding of a frame
// (EncodePNG, ReadText). It knows nothing of machines or apps.
//
// Everything is seeded: textures mix the canvas seed with a hash of what
// they show (Hash, Mix64), never wall time or a global random source.
package screen

import (
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

// Canvas is a frame being rendered, with the seed of the screen's looks.
//
// The pixel loops (here, in png.go and in the apps' texture code) carry
// //go:norace: they touch only the frame being rendered, which a single
// goroutine owns while drawing (the encoder's band goroutines only read
// it). Race instrumentation of these loops made -race test runs about 20×
// slower without checking anything shared.
type Canvas struct {
	Img  *image.RGBA
	Seed uint64 // mixed into every texture (Noise); apps' own textures mix it in too
}

// NewCanvas returns a w×h canvas whose textures are seeded by seed.
func NewCanvas(w, h int, seed int64) *Canvas {
	return &Canvas{Img: image.NewRGBA(image.Rect(0, 0, w, h)), Seed: Mix64(uint64(seed))}
}

// RGB returns the opaque colour r, g, b.
func RGB(r, g, b uint8) color.RGBA { return color.RGBA{r, g, b, 255} }

// Palette of the desktop and the apps' chrome.
var (
	ColPanel     = RGB(0x23, 0x26, 0x2e)
	ColTitle     = RGB(0x3b, 0x41, 0x4d)
	ColTitleText = RGB(0xf0, 0xf0, 0xf0)
	ColWindow    = RGB(0xe8, 0xe8, 0xe6)
	ColButton    = RGB(0xf6, 0xf6, 0xf4)
	ColButtonHi  = RGB(0xcf, 0xe0, 0xf7)
	ColBorder    = RGB(0x9a, 0x9a, 0x98)
	ColText      = RGB(0x1d, 0x1d, 0x1d)
	ColDim       = RGB(0x6a, 0x6a, 0x6a)
	ColField     = RGB(0xff, 0xff, 0xff)
	ColFocus     = RGB(0x35, 0x84, 0xe4)
	ColSelect    = RGB(0x99, 0xc1, 0xf1)
	ColSimLabel  = RGB(0xff, 0xc8, 0x3d)
	ColWhite     = RGB(0xff, 0xff, 0xff)
	ColBlack     = RGB(0, 0, 0)
)

// Grain amplitudes of the screen textures: the main canvases of the apps
// and the desktop get GrainMain, text panels GrainPanel. They make
// screenshots compress like real ones (100 KB and up).
const (
	GrainMain  = 2
	GrainPanel = 0
	GrainSky   = 0 // Celestia's sky: its stars are texture enough
)

// Text metrics of basicfont.Face7x13: the width of a glyph and the height
// of a line of text.
const (
	GlyphW = 7
	LineH  = 14
)

var fontFace = basicfont.Face7x13

// Fill paints r with col.
//
//go:norace
func (c *Canvas) Fill(r image.Rectangle, col color.RGBA) {
	r = r.Intersect(c.Img.Rect)
	if r.Empty() {
		return
	}
	pix := c.Img.Pix
	stride := c.Img.Stride
	row := make([]byte, 4*r.Dx())
	for i := 0; i < len(row); i += 4 {
		row[i], row[i+1], row[i+2], row[i+3] = col.R, col.G, col.B, 255
	}
	for y := r.Min.Y; y < r.Max.Y; y++ {
		off := y*stride + 4*r.Min.X
		copy(pix[off:off+len(row)], row)
	}
}

// Frame draws a 1-pixel border inside r.
func (c *Canvas) Frame(r image.Rectangle, col color.RGBA) {
	c.Fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+1), col)
	c.Fill(image.Rect(r.Min.X, r.Max.Y-1, r.Max.X, r.Max.Y), col)
	c.Fill(image.Rect(r.Min.X, r.Min.Y, r.Min.X+1, r.Max.Y), col)
	c.Fill(image.Rect(r.Max.X-1, r.Min.Y, r.Max.X, r.Max.Y), col)
}

// Set paints one pixel (clipped).
//
//go:norace
func (c *Canvas) Set(x, y int, col color.RGBA) {
	if x < 0 || y < 0 || x >= c.Img.Rect.Max.X || y >= c.Img.Rect.Max.Y {
		return
	}
	i := y*c.Img.Stride + 4*x
	c.Img.Pix[i], c.Img.Pix[i+1], c.Img.Pix[i+2] = col.R, col.G, col.B
}

// Blend mixes col into one pixel with weight a in [0,1].
//
//go:norace
func (c *Canvas) Blend(x, y int, col color.RGBA, a float64) {
	if x < 0 || y < 0 || x >= c.Img.Rect.Max.X || y >= c.Img.Rect.Max.Y {
		return
	}
	i := y*c.Img.Stride + 4*x
	p := c.Img.Pix[i : i+3 : i+3]
	p[0] = uint8(float64(p[0])*(1-a) + float64(col.R)*a)
	p[1] = uint8(float64(p[1])*(1-a) + float64(col.G)*a)
	p[2] = uint8(float64(p[2])*(1-a) + float64(col.B)*a)
}

// Text draws s with its baseline box starting at (x, y) (y is the top of a
// 14-pixel line) and returns the x after it.
func (c *Canvas) Text(x, y int, s string, col color.RGBA) int {
	return c.TextClip(x, y, s, col, image.Rectangle{})
}

var glyphCache sync.Map // rune -> *glyph

type glyph struct {
	mask  []uint8 // GlyphW × 13 alpha
	w, h  int
	empty bool
}

func glyphOf(r rune) *glyph {
	if g, ok := glyphCache.Load(r); ok {
		return g.(*glyph)
	}
	w, h := GlyphW, 13
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

// TextClip draws s as Text does, clipped to clip when clip is not empty,
// and returns the x after it.
//
//go:norace
func (c *Canvas) TextClip(x, y int, s string, col color.RGBA, clip image.Rectangle) int {
	if clip.Empty() {
		clip = c.Img.Rect
	} else {
		clip = clip.Intersect(c.Img.Rect)
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
							c.Set(px, py, col)
						} else {
							c.Blend(px, py, col, float64(a)/255)
						}
					}
				}
			}
		}
		x += GlyphW
	}
	return x
}

// TextW returns the pixel width of s.
func TextW(s string) int { return utf8.RuneCountInString(s) * GlyphW }

// TextCentered draws s centred in r (cut to fit).
func (c *Canvas) TextCentered(r image.Rectangle, s string, col color.RGBA) {
	maxChars := (r.Dx() - 4) / GlyphW
	if maxChars < 1 {
		return
	}
	if utf8.RuneCountInString(s) > maxChars {
		s = string([]rune(s)[:maxChars])
	}
	x := r.Min.X + (r.Dx()-TextW(s))/2
	y := r.Min.Y + (r.Dy()-13)/2
	c.TextClip(x, y, s, col, r)
}

// Line draws a line from (x0,y0) to (x1,y1) with thickness w, clipped
// to clip.
//
//go:norace
func (c *Canvas) Line(x0, y0, x1, y1 float64, col color.RGBA, w int, clip image.Rectangle) {
	clip = clip.Intersect(c.Img.Rect)
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
					c.Set(p.X, p.Y, col)
				}
			}
		}
	}
}

// Disc draws a disc of radius r at (cx, cy), clipped to clip; shaded, it
// looks like a sphere lit from the upper left.
//
//go:norace
func (c *Canvas) Disc(cx, cy, r float64, col color.RGBA, shade bool, clip image.Rectangle) {
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
				c.Set(x, y, col)
				continue
			}
			// Light from the upper left.
			z := math.Sqrt(math.Max(0, r2-d2)) / r
			l := 0.35 + 0.65*math.Max(0, (-ddx/r*0.4-ddy/r*0.5+z*0.77))
			c.Set(x, y, Shade(col, l))
		}
	}
}

// Scale8 multiplies a channel by f, clamped to [0, 255].
func Scale8(v uint8, f float64) uint8 {
	x := float64(v) * f
	if x > 255 {
		return 255
	}
	if x < 0 {
		return 0
	}
	return uint8(x)
}

// Mix64 is the mixing function (splitmix64) of every texture and seed.
func Mix64(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	return x ^ (x >> 31)
}

// Hash returns a 64-bit FNV-1a hash of the parts.
func Hash(parts ...string) uint64 {
	h := fnv.New64a()
	for _, p := range parts {
		h.Write([]byte(p))
		h.Write([]byte{0})
	}
	return h.Sum64()
}

// Noise adds seeded per-pixel grain to r: the same offset in
// [-amp/2, amp/2) on all three channels (reflected at 0 and 255).
//
//go:norace
func (c *Canvas) Noise(r image.Rectangle, seed uint64, amp int) {
	r = r.Intersect(c.Img.Rect)
	if r.Empty() || amp <= 1 {
		return
	}
	s := Mix64(seed ^ c.Seed)
	pix := c.Img.Pix
	half := amp / 2
	for y := r.Min.Y; y < r.Max.Y; y++ {
		off := y*c.Img.Stride + 4*r.Min.X
		state := Mix64(s+uint64(y)*0x632be59bd9b4e019) | 1
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

// Shade scales the channels of col by f (clamped), keeping it opaque.
func Shade(col color.RGBA, f float64) color.RGBA {
	return RGB(Scale8(col.R, f), Scale8(col.G, f), Scale8(col.B, f))
}

// ClampU8 clamps v to [0, 255].
func ClampU8(v int) uint8 {
	if v < 0 {
		return 0
	}
	if v > 255 {
		return 255
	}
	return uint8(v)
}

// Gradient fills r with a vertical gradient from top to bottom colour.
//
//go:norace
func (c *Canvas) Gradient(r image.Rectangle, top, bottom color.RGBA) {
	r = r.Intersect(c.Img.Rect)
	for y := r.Min.Y; y < r.Max.Y; y++ {
		t := float64(y-r.Min.Y) / float64(max(1, r.Dy()-1))
		col := RGB(Lerp8(top.R, bottom.R, t), Lerp8(top.G, bottom.G, t), Lerp8(top.B, bottom.B, t))
		c.Fill(image.Rect(r.Min.X, y, r.Max.X, y+1), col)
	}
}

// Lerp8 interpolates between channels a and b (t in [0, 1]).
func Lerp8(a, b uint8, t float64) uint8 {
	return uint8(math.Round(float64(a)*(1-t) + float64(b)*t))
}

// Widgets.

// Button draws a push button with its caption, highlighted when active.
func (c *Canvas) Button(r image.Rectangle, caption string, active bool) {
	bg := ColButton
	if active {
		bg = ColButtonHi
	}
	c.Fill(r, bg)
	c.Frame(r, ColBorder)
	c.TextCentered(r, caption, ColText)
}

// Tab draws a tab of a tab bar, raised when active.
func (c *Canvas) Tab(r image.Rectangle, caption string, active bool) {
	bg := RGB(0xd6, 0xd6, 0xd4)
	if active {
		bg = ColWindow
	}
	c.Fill(r, bg)
	c.Frame(r, ColBorder)
	if active {
		c.Fill(image.Rect(r.Min.X+1, r.Max.Y-1, r.Max.X-1, r.Max.Y), ColWindow)
		c.Fill(image.Rect(r.Min.X, r.Min.Y, r.Max.X, r.Min.Y+2), ColFocus)
	}
	c.TextCentered(r, caption, ColText)
}

// Field draws a text field with its text (or the placeholder when empty
// and not focused), caret and selection.
func (c *Canvas) Field(r image.Rectangle, text, placeholder string, focused, selAll bool) {
	c.Fill(r, ColField)
	border := ColBorder
	if focused {
		border = ColFocus
	}
	c.Frame(r, border)
	if focused {
		c.Frame(r.Inset(1), border)
	}
	inner := r.Inset(3)
	maxChars := inner.Dx() / GlyphW
	shown := text
	if n := utf8.RuneCountInString(shown); n > maxChars-1 && maxChars > 1 {
		shown = string([]rune(shown)[n-(maxChars-1):]) // keep the end visible
	}
	y := r.Min.Y + (r.Dy()-13)/2
	if text == "" && !focused {
		c.TextClip(inner.Min.X+2, y, placeholder, ColDim, inner)
		return
	}
	if selAll && text != "" {
		c.Fill(image.Rect(inner.Min.X+1, y-1, inner.Min.X+2+TextW(shown), y+14).Intersect(inner), ColSelect)
	}
	x := c.TextClip(inner.Min.X+2, y, shown, ColText, inner)
	if focused && !selAll {
		c.Fill(image.Rect(x, y-1, x+1, y+14).Intersect(inner), ColText)
	}
}

// Checkbox draws a check box (a radio button when radio) with its caption.
func (c *Canvas) Checkbox(r image.Rectangle, caption string, on bool, radio bool) {
	box := image.Rect(r.Min.X+2, r.Min.Y+(r.Dy()-12)/2, r.Min.X+14, r.Min.Y+(r.Dy()-12)/2+12)
	c.Fill(box, ColField)
	c.Frame(box, ColBorder)
	if on {
		if radio {
			c.Disc(float64(box.Min.X)+5.5, float64(box.Min.Y)+5.5, 3.5, ColFocus, false, box)
		} else {
			c.Fill(box.Inset(3), ColFocus)
		}
	}
	c.TextClip(box.Max.X+6, r.Min.Y+(r.Dy()-13)/2, caption, ColText, r)
}

// Panel draws a sunken panel with a caption strip and returns its inside.
func (c *Canvas) Panel(r image.Rectangle, caption string, bg color.RGBA) image.Rectangle {
	c.Fill(r, bg)
	c.Frame(r, ColBorder)
	if caption == "" {
		return r.Inset(1)
	}
	head := image.Rect(r.Min.X+1, r.Min.Y+1, r.Max.X-1, r.Min.Y+17)
	c.Fill(head, RGB(0xdc, 0xdc, 0xda))
	c.TextClip(head.Min.X+4, head.Min.Y+2, caption, ColText, head)
	return image.Rect(r.Min.X+1, head.Max.Y, r.Max.X-1, r.Max.Y-1)
}

// Lines draws text lines top-down in r, scrolled so that the last lines
// are visible, minus scroll lines from the end.
func (c *Canvas) Lines(r image.Rectangle, ls []string, scroll int, col color.RGBA) {
	n := (r.Dy() - 4) / LineH
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
			lc = RGB(0xc0, 0x1c, 0x28)
		}
		c.TextClip(r.Min.X+4, y, l, lc, r)
		y += LineH
	}
}
