// Package guestproto holds the details of the OSWorld/ScienceBoard guest
// server's protocol that both of its sides in this module must agree on:
// the client (pkg/vmpool/guest) and the simulator's in-process guest
// (internal/sim/guest). It is a package of its own, importing nothing of
// the module, so that the simulator shares them without linking the VM
// pool (cmd/judge links the simulator but not the pool).
package guestproto

import (
	"bytes"
	"encoding/json"
	"html"
	"mime/multipart"
	"regexp"
	"strings"
)

// MaxErrorMessage bounds the message ErrorMessage takes from an answer:
// a guest's error, whatever its size, is quoted in errors and logs.
const MaxErrorMessage = 300

// htmlTitle finds an HTML page's title.
var htmlTitle = regexp.MustCompile(`(?is)<title>(.*?)</title>`)

// ErrorMessage extracts a server's message from the body of an error
// answer: its JSON "message" or "error" field; for an HTML page (the
// guest server is a Flask app: its error pages, and in debug mode the
// Werkzeug debugger's page for an exception its view did not catch) the
// page's title, e.g. "FileNotFoundError: [Errno 2] No such file or
// directory: '/x'"; else the start of the text, in one line. It is at
// most MaxErrorMessage bytes (then "..."), whatever the answer.
func ErrorMessage(body []byte) string {
	var m struct {
		Message any `json:"message"`
		Error   any `json:"error"`
	}
	if json.Unmarshal(body, &m) == nil {
		for _, v := range []any{m.Message, m.Error} {
			if s, ok := v.(string); ok && s != "" {
				return truncate(s, MaxErrorMessage)
			}
		}
	}
	text := string(body)
	if t := htmlTitle.FindStringSubmatch(text); t != nil {
		text = strings.TrimSuffix(strings.TrimSpace(html.UnescapeString(t[1])), "// Werkzeug Debugger")
	}
	return truncate(strings.Join(strings.Fields(text), " "), MaxErrorMessage)
}

// truncate cuts s to n bytes, marking the cut with "...".
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// UploadForm is the body and Content-Type of the request that writes data
// to the file path in the guest (POST /setup/upload): a multipart form
// with the fields file_path (path) and file_data (data, under the file
// name of path's last element).
func UploadForm(path string, data []byte) (body []byte, contentType string) {
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	// Writes to a bytes.Buffer do not fail, nor do these of a multipart
	// writer over one.
	_ = mw.WriteField("file_path", path)
	fw, _ := mw.CreateFormFile("file_data", fileBase(path))
	_, _ = fw.Write(data)
	_ = mw.Close()
	return buf.Bytes(), mw.FormDataContentType()
}

// fileBase is the last element of a guest path, "/" or "\" separated
// (the guest may be Windows); "file" when there is none.
func fileBase(p string) string {
	if i := strings.LastIndexAny(p, `/\`); i >= 0 {
		p = p[i+1:]
	}
	if p == "" {
		p = "file"
	}
	return p
}

// ScienceBoard's harness runs its reset script in a VM after every
// snapshot revert (POST /setup/execute {"command": ResetCommand, "shell":
// true}; sci/vm/vtask.py VTask._init): vm_config/reset.sh, which bounces
// the guest's network connection with nmcli. The pool runs ResetCommand
// after a simulated VM's start and reset (vmpool.Config.AfterRevert), and
// the simulated guest answers it.
const (
	ResetScript  = "/home/user/server/reset.sh"
	ResetCommand = "/bin/bash " + ResetScript
)
