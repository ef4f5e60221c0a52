package service

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadJSONNamesFileLineColumn(t *testing.T) {
	dir := t.TempDir()
	cases := []struct{ name, body, want string }{
		{"syntax", "{\n  \"vms\": 2,,\n}", "bad.json:2:12: invalid character ','"},
		{"type", "{\n  \"vms\": \"two\"\n}", "bad.json:2:14: json: cannot unmarshal string"},
		{"unknown field", "{\"vmz\": 2}", `bad.json: json: unknown field "vmz"`},
		{"two documents", "{\"vms\": 2}\n{\"vms\": 3}", "bad.json: more than one JSON document"},
		{"trailing brace", "{\"vms\": 2}}", "bad.json: more than one JSON document"},
		{"truncated", "{\"vms\": 2", "bad.json: truncated: unexpected EOF"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(dir, "bad.json")
			if err := os.WriteFile(p, []byte(tc.body), 0o644); err != nil {
				t.Fatal(err)
			}
			var v struct {
				VMs int `json:"vms"`
			}
			err := ReadJSON(p, &v)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want it to contain %q", err, tc.want)
			}
		})
	}
}
