package guest

import (
	"strings"
	"testing"
)

// FuzzErrorMessage feeds arbitrary error answers of a guest server (JSON,
// Flask and Werkzeug HTML pages, text) to ErrorMessage and jsonStatus:
// the message quoted in errors is at most maxErrorMessage bytes (plus
// "...") whatever the answer, and a JSON answer's "status" is read.
func FuzzErrorMessage(f *testing.F) {
	for _, b := range []string{
		`{"status":"error","message":"Command failed"}`,
		`{"error":"no such file"}`,
		`{"message":` + `"` + strings.Repeat("x", 4000) + `"}`,
		"<!doctype html><html><head><title>FileNotFoundError: [Errno 2] No such file or directory: &#x27;/x&#x27; // Werkzeug Debugger</title></head></html>",
		"<title>" + strings.Repeat("é", 500) + "</title>",
		"Internal Server Error\n\n  plain   text",
		`{"message":{"nested":1},"error":""}`,
		"",
	} {
		f.Add([]byte(b))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		msg := ErrorMessage(body)
		if len(strings.TrimSuffix(msg, "...")) > maxErrorMessage {
			t.Fatalf("message of %d bytes: %.80q...", len(msg), msg)
		}
		_ = jsonStatus(body)
	})
}
