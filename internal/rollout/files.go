package rollout

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/codapipe/codapipe/internal/blob"
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

// writeJSON writes v as indented JSON, atomically (temp file + rename).
func writeJSON(path string, v any) error {
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), ".summary-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := blob.Publish(tmp); err != nil { // CreateTemp makes it 0600; the summary is for others
		tmp.Close()
		return err
	}
	if _, err := tmp.Write(append(data, '\n')); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
