// Package filefuzz is the body of the fuzz tests of the loaders of JSON files (rollout's
// --sampling file, the SFT set's manifest): what a loader rejects it rejects with an error naming
// the file, and what it accepts, written back as JSON, loads the same.
package filefuzz

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// RoundTrip writes data to path and loads it with load. A rejected file must give an error that
// begins with errPrefix (what names the file, or the flag that gave it). An accepted value is given
// to check (nil: none), then marshaled to JSON, written to path and loaded again: it must load
// equal (reflect.DeepEqual).
func RoundTrip[T any](t *testing.T, path string, data []byte, load func() (T, error), errPrefix string, check func(T)) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	v, err := load()
	if err != nil {
		if !strings.HasPrefix(err.Error(), errPrefix) {
			t.Fatalf("error does not begin with %q: %v", errPrefix, err)
		}
		return
	}
	if check != nil {
		check(v)
	}
	enc, err := json.Marshal(v)
	if err != nil {
		t.Fatalf("encode the accepted value: %v", err)
	}
	if err := os.WriteFile(path, enc, 0o644); err != nil {
		t.Fatal(err)
	}
	again, err := load()
	if err != nil || !reflect.DeepEqual(again, v) {
		t.Fatalf("written back as %s, it loads as %+v, %v; want %+v", enc, again, err, v)
	}
}
