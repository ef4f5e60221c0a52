package shard_test

import (
	"encoding/json"
	"path"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/shard"
)

// FuzzDecodeManifest feeds arbitrary bytes to DecodeManifest, the parser
// of a shard set's manifest.json (ReadManifest, sftpack, the exporters).
// An error names the manifest; an accepted manifest's files all resolve
// to keys inside the set's folder, and it survives a round trip through
// its own JSON encoding unchanged.
func FuzzDecodeManifest(f *testing.F) {
	files := []shard.File{
		{Path: "part-000001.arrow", Rows: 3, Bytes: 4096, SHA256: strings.Repeat("ab", 32), Format: shard.FormatArrow, TokenIDRows: 2,
			Sampling: []shard.SamplingRows{{Sampling: `{"temperature":0.7}`, Rows: 3}}},
		{Path: "part-000002.arrow", Rows: 1, Bytes: 512, SHA256: strings.Repeat("cd", 32), Format: shard.FormatArrow},
	}
	m := shard.NewManifest("sets/a", shard.FormatArrow, shard.Meta{Mode: "step", LabelMode: "clean"}, files)
	m.SetSources([]shard.Source{{Run: "r1", Checkpoint: "ck", Trajectories: 2, Rows: 4}})
	m.Counts.RowsPerApp = map[string]int{"ChimeraX": 4}
	good, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("sets/a", good)
	f.Add("", good)
	// Schema version 1: files carry "key" from the bucket's root.
	f.Add("out/set-a", []byte(`{"schema_version":1,"format":"arrow","set":"out/set-a","files":[{"key":"out/set-a/part-1.arrow","rows":1,"bytes":9,"sha256":"`+strings.Repeat("0", 64)+`","format":"arrow"}]}`))
	f.Add("s", []byte(`{"files":[{"path":"../x.arrow"}]}`))
	f.Add("s", []byte(`{"files":[{"key":"a/.."}]}`))
	f.Add("s", []byte(`{"created":"2026-13-01T00:00:00Z"}`))
	f.Add("s", []byte(`{"counts":{"rows_per_app":{"a":1e400}}}`))
	f.Fuzz(func(t *testing.T, prefix string, data []byte) {
		key := shard.ManifestKey(prefix)
		m, err := shard.DecodeManifest(prefix, data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "shard: "+key+": ") {
				t.Fatalf("error does not name the manifest %q: %v", key, err)
			}
			return
		}
		dir := strings.TrimSuffix(key, shard.ManifestName)
		for i, fl := range m.Files {
			if fl.Key != dir+fl.Path || path.Clean(fl.Path) != fl.Path || fl.Path == ".." || strings.HasPrefix(fl.Path, "../") || strings.HasPrefix(fl.Path, "/") {
				t.Fatalf("file %d: path %q resolves to %q, outside %q", i, fl.Path, fl.Key, dir)
			}
		}
		again, err := json.Marshal(m)
		if err != nil {
			return // a time out of JSON's range (year > 9999) decodes but does not encode
		}
		m2, err := shard.DecodeManifest(prefix, again)
		if err != nil {
			t.Fatalf("the manifest's own encoding does not decode: %v\n%s", err, again)
		}
		if enc, err := json.Marshal(m2); err != nil || string(enc) != string(again) {
			t.Fatalf("round trip changed the manifest:\n%s\n%s (%v)", again, enc, err)
		}
		for i := range m.Files {
			if m.Files[i].Key != m2.Files[i].Key {
				t.Fatalf("file %d: key %q, after a round trip %q", i, m.Files[i].Key, m2.Files[i].Key)
			}
		}
	})
}
