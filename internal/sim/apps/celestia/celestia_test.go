package celestia

import (
	"math"
	"testing"

	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/desktop/desktoptest"
)

func TestCelestia(t *testing.T) {
	m := desktoptest.Start(t, Spec(), "/app/bin/celestia-qt6 8000")
	if d := m.Value("/dump", "entity", "Earth", "distance").(float64); math.Abs(d-4*6371) > 1 {
		t.Errorf("initial Earth distance %v", d)
	}
	m.Click("Celestia Go to object field")
	m.Write("saturn\n")
	if m.Value("/dump", "selection", "name") != "Saturn" || m.Value("/dump", "entity", "Saturn", "distance").(float64) > 5*58232 {
		t.Errorf("goto Saturn: %v %v", m.Value("/dump", "selection", "name"), m.Value("/dump", "entity", "Saturn", "distance"))
	}
	if m.Value("/dump", "entity", "Titan", "visible") != true || m.Value("/dump", "entity", "Mars", "visible") != false {
		t.Error("visibility around Saturn")
	}
	m.Input(desktop.Event{Kind: desktop.EvScroll, Amount: 3, X: 400, Y: 400, HasXY: true})
	if d := m.Value("/dump", "entity", "Saturn", "distance").(float64); d >= 4*58232 {
		t.Errorf("zoom in did not approach: %v", d)
	}
	m.Key("ctrl", "a")
	m.Write("Nowhere\n")
	if m.Value("/dump", "selection", "name") != "Saturn" {
		t.Error("unknown object changed the selection")
	}
	for _, b := range []string{"Celestia 10x Faster button", "Celestia 10x Faster button", "Celestia Reverse Time button", "Celestia Pause button"} {
		m.Click(b)
	}
	if m.Value("/dump", "time", "scale") != float64(-100) || m.Value("/dump", "time", "pause") != true {
		t.Errorf("time %v", m.Value("/dump", "time"))
	}
	m.Key("space") // no field focused after the buttons: toggles pause
	m.Key("k")
	if m.Value("/dump", "time", "pause") != false || m.Value("/dump", "time", "scale") != float64(-10) {
		t.Errorf("shortcuts: time %v", m.Value("/dump", "time"))
	}
	m.Click("Celestia Julian date field")
	m.Key("ctrl", "a")
	m.Write("2451545\n")
	if m.Value("/dump", "time", "value") != float64(2451545) {
		t.Errorf("JD %v", m.Value("/dump", "time", "value"))
	}
	m.Click("Celestia Orbits checkbox")
	m.Click("Celestia Scaled Discs radio")
	m.Click("Celestia Low Texture radio")
	if m.Value("/dump", "config", "render", "orbits") != true || m.Value("/dump", "config", "starStyle") != float64(2) || m.Value("/dump", "config", "resolution") != float64(0) {
		t.Errorf("config %v", m.Value("/dump", "config"))
	}
	for jd, want := range map[float64]string{2451545: "2000 Jan 01 12:00:00 UTC", 2460000.5: "2023 Feb 25 00:00:00 UTC", 2299160.5: "1582 Oct 15 00:00:00 UTC"} {
		if got := calendarDate(jd); got != want {
			t.Errorf("calendarDate(%v) = %q, want %q", jd, got, want)
		}
	}
}
