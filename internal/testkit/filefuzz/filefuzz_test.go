package filefuzz

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

type conf struct {
	N int `json:"n"`
}

func loadConf(path string) (conf, error) {
	var c conf
	body, err := os.ReadFile(path)
	if err == nil {
		err = json.Unmarshal(body, &c)
	}
	if err == nil && c.N < 0 {
		err = errors.New("n is negative")
	}
	if err != nil {
		return c, fmt.Errorf("conf %s: %w", path, err)
	}
	return c, nil
}

// RoundTrip accepts what the loader accepts and loads the same written back, and lets rejected
// files through when the error begins with the prefix.
func TestRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "conf.json")
	for _, data := range []string{`{"n": 3}`, `{"n": -1}`, `{"n": "x"}`, `not json`} {
		t.Run(data, func(t *testing.T) {
			checked := false
			RoundTrip(t, path, []byte(data), func() (conf, error) { return loadConf(path) }, "conf "+path+": ", func(c conf) {
				checked = true
				if c.N < 0 {
					t.Fatalf("accepted %d", c.N)
				}
			})
			if want := data == `{"n": 3}`; checked != want {
				t.Errorf("check called: %v, want %v", checked, want)
			}
		})
	}
}
