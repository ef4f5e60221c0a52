package guestproto

import (
	"bytes"
	"io"
	"mime"
	"mime/multipart"
	"strings"
	"testing"
)

func TestErrorMessage(t *testing.T) {
	long := strings.Repeat("x", MaxErrorMessage+50)
	for _, c := range []struct{ body, want string }{
		{`{"status": "error", "message": "no such app"}`, "no such app"},
		{`{"error": "File not found"}`, "File not found"},
		{`{"message": 3, "error": "bad"}`, "bad"},
		{"<!doctype html><title>FileNotFoundError: [Errno 2] No such file: &#x27;/x&#x27; // Werkzeug Debugger</title>", "FileNotFoundError: [Errno 2] No such file: '/x'"},
		{"<HTML><TITLE>404 Not Found</TITLE></HTML>", "404 Not Found"},
		{"  plain\n text  ", "plain text"},
		{`{"message": "` + long + `"}`, long[:MaxErrorMessage] + "..."},
		{long, long[:MaxErrorMessage] + "..."},
	} {
		if got := ErrorMessage([]byte(c.body)); got != c.want {
			t.Errorf("ErrorMessage(%.60q) = %q, want %q", c.body, got, c.want)
		}
	}
}

func TestUploadForm(t *testing.T) {
	for _, c := range []struct{ path, name string }{
		{"/home/user/a.txt", "a.txt"},
		{`C:\Users\u\b.bin`, "b.bin"},
		{"/tmp/", "file"},
	} {
		data := []byte("\x00\x01binary\r\n")
		body, ct := UploadForm(c.path, data)
		mt, params, err := mime.ParseMediaType(ct)
		if err != nil || mt != "multipart/form-data" {
			t.Fatalf("%s: content type %q: %v", c.path, ct, err)
		}
		form, err := multipart.NewReader(bytes.NewReader(body), params["boundary"]).ReadForm(1 << 20)
		if err != nil {
			t.Fatalf("%s: %v", c.path, err)
		}
		if got := form.Value["file_path"]; len(got) != 1 || got[0] != c.path {
			t.Errorf("%s: file_path %q", c.path, got)
		}
		fh := form.File["file_data"]
		if len(fh) != 1 || fh[0].Filename != c.name {
			t.Fatalf("%s: file_data %+v, want one file named %q", c.path, fh, c.name)
		}
		f, _ := fh[0].Open()
		got, _ := io.ReadAll(f)
		if !bytes.Equal(got, data) {
			t.Errorf("%s: file_data %q, want %q", c.path, got, data)
		}
	}
}
