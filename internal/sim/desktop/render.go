package desktop

import (
	"bytes"
	"encoding/json"
	"fmt"
	"image"

	"github.com/codapipe/codapipe/internal/sim/screen"
	"github.com/codapipe/codapipe/pkg/traj"
)

// screenshotLocked renders the screen and encodes it.
func (m *machine) screenshotLocked() ([]byte, error) {
	c := screen.NewCanvas(ScreenW, ScreenH, m.cfg.Seed)
	st := m.stateLocked()
	m.renderLocked(c)
	return encodePNG(c.Img, st)
}

// renderLocked draws the whole screen.
func (m *machine) renderLocked(c *screen.Canvas) {
	// Desktop.
	c.Gradient(image.Rect(0, panelH, ScreenW, ScreenH), screen.RGB(0x1f, 0x4e, 0x79), screen.RGB(0x2e, 0x7d, 0x6b))
	if m.app == nil {
		c.Noise(image.Rect(0, panelH, ScreenW, ScreenH), 0xdeadbeef, screen.GrainMain)
		c.TextCentered(image.Rect(0, 360, ScreenW, 390), "codapipe SIMULATOR desktop", screen.ColWhite)
		c.TextCentered(image.Rect(0, 392, ScreenW, 420), "no application is running", screen.RGB(0xcc, 0xdd, 0xee))
		for i, name := range append(m.cfg.Apps.Names(), "Terminal", "Files") {
			r := image.Rect(24, 60+i*86, 104, 130+i*86)
			c.Fill(r.Inset(14), screen.RGB(0xee, 0xee, 0xee))
			c.Frame(r.Inset(14), screen.ColBorder)
			c.TextCentered(image.Rect(r.Min.X-10, r.Max.Y-14, r.Max.X+10, r.Max.Y+2), name, screen.ColWhite)
		}
	} else {
		// Title bar.
		c.Fill(image.Rect(0, panelH, ScreenW, AppTop), screen.ColTitle)
		c.Text(10, panelH+5, m.app.spec.Name+" - SIMULATOR", screen.ColTitleText)
		for i, s := range []string{"_", "[]", "x"} {
			c.TextCentered(image.Rect(ScreenW-90+i*30, panelH, ScreenW-60+i*30, AppTop), s, screen.ColTitleText)
		}
		c.Fill(image.Rect(0, AppTop, ScreenW, ScreenH), screen.ColWindow)
		m.inst.Render(c, m.ui)
		m.renderTooltip(c)
	}
	// Top panel with the simulator label.
	c.Fill(image.Rect(0, 0, ScreenW, panelH), screen.ColPanel)
	c.Fill(image.Rect(0, 0, 96, panelH), screen.ColSimLabel)
	c.TextCentered(image.Rect(0, 0, 96, panelH), "SIMULATOR", screen.ColBlack)
	c.Text(108, 5, "Activities", screen.ColTitleText)
	right := "codapipe simulated VM"
	c.Text(ScreenW-screen.TextW(right)-12, 5, right, screen.ColTitleText)
}

// renderTooltip shows the label of the element under the cursor.
func (m *machine) renderTooltip(c *screen.Canvas) {
	el := m.hit(m.cur)
	if el == nil || el.Kind == "canvas" || el.Kind == "list" {
		return
	}
	w := screen.TextW(el.Label) + 10
	x := m.cur.X + 12
	y := m.cur.Y + 18
	if x+w > ScreenW {
		x = ScreenW - w
	}
	if y+18 > ScreenH {
		y = m.cur.Y - 22
	}
	r := image.Rect(x, y, x+w, y+18)
	c.Fill(r, screen.RGB(0xff, 0xff, 0xe1))
	c.Frame(r, screen.ColBorder)
	c.Text(x+5, y+3, el.Label, screen.ColText)
}

// encodePNG encodes img as an RGB PNG carrying the state chunk before
// IEND.
func encodePNG(img *image.RGBA, st State) ([]byte, error) {
	js, err := stateJSON(st)
	if err != nil {
		return nil, fmt.Errorf("sim: encoding screenshot state: %w", err)
	}
	return screen.EncodePNG(img, screen.TextChunk{Keyword: StateChunkKeyword, Text: js})
}

// stateJSON encodes the state with sorted map keys and pure ASCII (non-ASCII
// characters as \u escapes), as a PNG tEXt chunk needs Latin-1.
func stateJSON(st State) ([]byte, error) {
	b, err := traj.MarshalCompact(st)
	if err != nil {
		return nil, err
	}
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

// ReadStateChunk extracts the simulated state from a screenshot's
// StateChunkKeyword tEXt chunk. It checks the PNG signature and the
// chunk's CRC; a PNG without the chunk is an error.
func ReadStateChunk(data []byte) (State, error) {
	text, err := screen.ReadText(data, StateChunkKeyword)
	if err != nil {
		return State{}, fmt.Errorf("sim: read state chunk: %w", err)
	}
	var st State
	if err := json.Unmarshal(text, &st); err != nil {
		return State{}, fmt.Errorf("sim: read state chunk: %w", err)
	}
	return st, nil
}
