package guest_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"

	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// New takes the guest server's address; a bare host means http on port
// 5000, and the app-state server defaults to the same host on port 8000.
func ExampleNew() {
	g, err := guest.New("10.0.0.5", guest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(g.BaseURL(), g.StateURL())
	// Output:
	// http://10.0.0.5:5000 http://10.0.0.5:8000
}

// Screenshot is GET /screenshot: PNG bytes, under ScreenshotTimeout (10 s
// by default), retried after transport errors and 5xx answers.
func ExampleClient_Screenshot() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		w.Write([]byte("\x89PNG\r\n\x1a\n...")) // a guest sends a whole PNG
	}))
	defer srv.Close()

	g, err := guest.New(srv.URL, guest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	png, err := g.Screenshot(context.Background())
	if err != nil {
		log.Fatal(err) // a guest that does not answer in time: errors.Is(err, guest.ErrTimeout)
	}
	fmt.Println(len(png), bytes.HasPrefix(png, []byte("\x89PNG")))
	// Output:
	// 11 true
}

// Execute is POST /execute: it runs a command in the guest and waits for
// it. A command that exits non-zero returns its result and an *ExecError;
// Execute is not retried once the request may have reached the guest.
func ExampleClient_Execute() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Command string `json:"command"`
			Shell   bool   `json:"shell"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		res := guest.ExecResult{Status: "success", Output: "hi\n"}
		if req.Command != "echo hi" {
			res = guest.ExecResult{Status: "success", Error: "ls: cannot access '/nope'", ReturnCode: 2}
		}
		json.NewEncoder(w).Encode(res)
	}))
	defer srv.Close()
	g, err := guest.New(srv.URL, guest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()

	res, err := g.Execute(ctx, guest.ShellCommand("echo hi"))
	fmt.Printf("%q %d %v\n", res.Output, res.ReturnCode, err)

	res, err = g.Execute(ctx, guest.ArgvCommand("ls", "/nope"))
	var ee *guest.ExecError
	fmt.Println(res.ReturnCode, errors.As(err, &ee))
	// Output:
	// "hi\n" 0 <nil>
	// 2 true
}

// ExecPyAutoGUI runs pyautogui code the way OSWorld does: python3 -c with
// PyAutoGUIPrefix before the code.
func ExampleClient_ExecPyAutoGUI() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Command []string `json:"command"`
		}
		json.NewDecoder(r.Body).Decode(&req)
		fmt.Printf("%q\n", req.Command[:2])
		json.NewEncoder(w).Encode(guest.ExecResult{Status: "success"})
	}))
	defer srv.Close()
	g, err := guest.New(srv.URL, guest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	if _, err := g.ExecPyAutoGUI(context.Background(), "pyautogui.click(640, 400)"); err != nil {
		log.Fatal(err)
	}
	_, err = g.ExecPyAutoGUI(context.Background(), "DONE")
	fmt.Println(err != nil) // an agent's control token is not code
	// Output:
	// ["python3" "-c"]
	// true
}
