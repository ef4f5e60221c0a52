package traj

// ActionType names one GUI action of the UI-TARS action space.
type ActionType string

// The action types of the UI-TARS action space used by CODA's executor.
const (
	Click       ActionType = "click"
	LeftDouble  ActionType = "left_double"
	RightSingle ActionType = "right_single"
	Hover       ActionType = "hover"
	Drag        ActionType = "drag"
	Hotkey      ActionType = "hotkey"
	KeyDown     ActionType = "keydown" // press(key=...): the key is pressed and held
	KeyUp       ActionType = "keyup"   // release(key=...): a held key is released
	TypeText    ActionType = "type"
	Scroll      ActionType = "scroll"
	Wait        ActionType = "wait"
	Finished    ActionType = "finished"
	CallUser    ActionType = "call_user"
	Answer      ActionType = "answer"
)

// ActionTypes lists every known action type in a stable order.
var ActionTypes = []ActionType{
	Click, LeftDouble, RightSingle, Hover, Drag, Hotkey, KeyDown, KeyUp,
	TypeText, Scroll, Wait, Finished, CallUser, Answer,
}

// Known reports whether t is one of ActionTypes.
func (t ActionType) Known() bool {
	for _, k := range ActionTypes {
		if k == t {
			return true
		}
	}
	return false
}

// Keyed reports whether actions of type t carry Keys (hotkey, keydown,
// keyup).
func (t ActionType) Keyed() bool {
	switch t {
	case Hotkey, KeyDown, KeyUp:
		return true
	}
	return false
}

// Pointed reports whether actions of type t carry a single Point:
// required for click, left_double, right_single and hover, optional for
// scroll and type.
func (t ActionType) Pointed() bool {
	switch t {
	case Click, LeftDouble, RightSingle, Hover, Scroll, TypeText:
		return true
	}
	return false
}

// Point is a screen position normalised to [0,1] on both axes:
// (0,0) is the top-left corner and (1,1) the bottom-right one.
type Point struct {
	X float64 `json:"x"`
	Y float64 `json:"y"`
}

// Scroll directions.
const (
	DirUp    = "up"
	DirDown  = "down"
	DirLeft  = "left"
	DirRight = "right"
)

// Action is one parsed GUI action with normalised geometry.
//
// Which fields are set depends on Type:
//   - click, left_double, right_single, hover: Point;
//   - drag: Start and End;
//   - scroll: Point (optional, nil when the model gave no position) and Direction;
//   - hotkey: Keys, lower-case, in the order given ("ctrl", "c");
//   - keydown, keyup: Keys, the keys pressed and held, or released;
//   - type: Text (may contain newlines) and Point (optional: where to click
//     before typing, nil to type into whatever has the focus);
//   - finished: Text (optional summary content);
//   - answer: Text (the answer after "ANS");
//   - wait, call_user: nothing.
type Action struct {
	Type      ActionType `json:"type"`
	Point     *Point     `json:"point,omitempty"`
	Start     *Point     `json:"start,omitempty"`
	End       *Point     `json:"end,omitempty"`
	Text      string     `json:"text,omitempty"`
	Keys      []string   `json:"keys,omitempty"`
	Direction string     `json:"direction,omitempty"`
}
