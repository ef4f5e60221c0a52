package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"

	"github.com/codapipe/codapipe/internal/jsonpos"
)

// readJSON decodes a JSON file strictly into v, naming the file, line and
// column of a problem.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		if off, ok := jsonpos.Offset(data, err); ok {
			l, c := jsonpos.Position(data, off)
			return fmt.Errorf("%s:%d:%d: %w", path, l, c, err)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
