package guest_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/sbtest"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/fault"
	"github.com/codapipe/codapipe/internal/sim/guest"
	vmguest "github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// TestTwoServers: Start serves the guest server and the app server on two
// ports; the app server passes method, path, query and body to the
// running app, and refuses connections when no app runs.
func TestTwoServers(t *testing.T) {
	vm := startVM(t, guest.Config{})
	if vm.srv.URL == vm.srv.AppURL || !strings.HasPrefix(vm.srv.AppURL, "http://127.0.0.1:") {
		t.Fatalf("URL %s, AppURL %s", vm.srv.URL, vm.srv.AppURL)
	}
	g, err := vmguest.New(vm.srv.URL, vmguest.Options{StateURL: vm.srv.AppURL, Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	plain := &http.Client{Timeout: 10 * time.Second}

	// No app: nothing answers on the app port.
	for _, method := range []string{"GET", "POST", "HEAD"} {
		req, _ := http.NewRequest(method, vm.srv.AppURL+"/echo", strings.NewReader("x"))
		if resp, err := plain.Do(req); err == nil {
			resp.Body.Close()
			t.Errorf("%s with no app running: HTTP %d, want no answer", method, resp.StatusCode)
		}
	}
	_, err = g.Call(ctx, vmguest.Request{Server: vmguest.ServerApp, Method: "GET", Path: "/echo"})
	if err == nil || scienceboard.StatusOf(err) != 0 {
		t.Errorf("Call to the app server with no app: %v (status %d), want an error without a status", err, scienceboard.StatusOf(err))
	}
	if recs := vm.rec.take(); len(recs) != 0 {
		t.Errorf("a refused connection was recorded as a request: %+v", recs)
	}

	// The guest server does not serve app routes.
	if _, err := g.Call(ctx, vmguest.Request{Server: vmguest.ServerGuest, Method: "GET", Path: "/echo"}); scienceboard.StatusOf(err) != 404 {
		t.Errorf("guest GET /echo: %v, want 404", err)
	}

	if err := g.Launch(ctx, vmguest.ShellCommand("fakeapp")); err != nil {
		t.Fatal(err)
	}
	vm.rec.take()
	b, err := g.Call(ctx, vmguest.Request{Server: vmguest.ServerApp, Method: "POST", Path: "/echo",
		Query: url.Values{"a": {"1 2"}}, Body: []byte("raw body"), ContentType: "text/x-raw"})
	if err != nil || !sbtest.JSONEqual(b, []byte(`{"method":"POST","path":"/echo","query":{"a":["1 2"]},"body":"raw body"}`)) {
		t.Errorf("app POST /echo: %s, %v", b, err)
	}
	recs := vm.rec.take()
	if len(recs) != 1 || recs[0].Server != "app" || recs[0].Method != "POST" || recs[0].Path != "/echo" ||
		recs[0].Query.Get("a") != "1 2" || string(recs[0].Body) != "raw body" || recs[0].ContentType != "text/x-raw" {
		t.Errorf("recorded %+v", recs)
	}
	// HEAD reaches the app as HEAD; net/http sends no body.
	resp, err := plain.Head(vm.srv.AppURL + "/echo")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if recs := vm.rec.take(); resp.StatusCode != 200 || len(recs) != 1 || recs[0].Method != "HEAD" {
		t.Errorf("HEAD: %d, recorded %+v", resp.StatusCode, recs)
	}
	// The app's own status; a path it does not serve is 404.
	if _, err := g.Call(ctx, vmguest.Request{Server: vmguest.ServerApp, Method: "GET", Path: "/teapot"}); scienceboard.StatusOf(err) != 418 {
		t.Errorf("app GET /teapot: %v", err)
	}
	if _, err := g.Call(ctx, vmguest.Request{Server: vmguest.ServerApp, Method: "GET", Path: "/nope"}); scienceboard.StatusOf(err) != 404 {
		t.Errorf("app GET /nope: %v", err)
	}

	// The app stops: refused again.
	if _, err := g.Execute(ctx, vmguest.ShellCommand("pkill fake")); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Call(ctx, vmguest.Request{Server: vmguest.ServerApp, Method: "GET", Path: "/echo"}); err == nil || scienceboard.StatusOf(err) != 0 {
		t.Errorf("after pkill: %v", err)
	}
}

// TestAppServerRefusesWhileBooting: a booting VM's app port is closed.
func TestAppServerRefusesWhileBooting(t *testing.T) {
	vm := startVM(t, guest.Config{BootTime: fault.Fixed(time.Hour), Clock: fault.Clock{Scale: 1}})
	if err := vm.m.Launch("fakeapp"); err != nil {
		t.Fatal(err)
	}
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(vm.srv.AppURL + "/echo")
	if err == nil {
		resp.Body.Close()
		t.Fatalf("a booting VM's app server answered %d", resp.StatusCode)
	}
}

// TestLocal: the in-process caller serves scienceboard requests through
// the same handlers, with the same errors a network caller sees.
func TestLocal(t *testing.T) {
	cat, err := desktop.NewCatalog(fakeSpec())
	if err != nil {
		t.Fatal(err)
	}
	m := desktop.NewMachine(desktop.MachineConfig{Apps: cat})
	rec := &recorder{}
	c := guest.Local(m, guest.Config{Record: rec.record})
	ctx := context.Background()
	post := func(server, p, body string) scienceboard.Request {
		return scienceboard.Request{Server: server, Method: "POST", Path: p, Body: []byte(body), ContentType: "application/json"}
	}

	if b, err := c.Call(ctx, post("guest", "/write", `{"path": "/home/user/a.txt", "content": "hi"}`)); string(b) != "OK" || err != nil {
		t.Fatalf("/write: %q, %v", b, err)
	}
	if b, err := c.Call(ctx, scienceboard.Request{Server: "guest", Method: "GET", Path: "/read", Query: url.Values{"path": {"/home/user/a.txt"}}}); string(b) != "hi" || err != nil {
		t.Errorf("/read: %q, %v", b, err)
	}
	_, err = c.Call(ctx, scienceboard.Request{Server: "guest", Method: "GET", Path: "/read", Query: url.Values{"path": {"/nope"}}})
	var he *guest.HTTPError
	if !errors.As(err, &he) || scienceboard.StatusOf(err) != 500 || !strings.Contains(err.Error(), "FileNotFoundError: [Errno 2] No such file or directory: '/nope'") {
		t.Errorf("/read of a missing file: %v", err)
	}
	// No app: a refused connection, no status.
	_, err = c.Call(ctx, scienceboard.Request{Server: "app", Method: "GET", Path: "/echo"})
	if err == nil || scienceboard.StatusOf(err) != 0 || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("app with no app running: %v", err)
	}
	if _, err := c.Call(ctx, post("guest", "/setup/launch", `{"command": ["fakeapp"]}`)); err != nil {
		t.Fatal(err)
	}
	if b, err := c.Call(ctx, post("app", "/echo", "[1]")); err != nil || !sbtest.JSONEqual(b, []byte(`{"method":"POST","path":"/echo","query":{},"body":"[1]"}`)) {
		t.Errorf("app /echo: %s, %v", b, err)
	}
	if b, err := c.Call(ctx, post("guest", "/chimerax/run", `{"command": "bad"}`)); err != nil || !strings.Contains(string(b), "Unknown command: bad") {
		t.Errorf("/chimerax/run: %s, %v", b, err)
	}
	// The upload request of a download item.
	if _, err := c.Call(ctx, guest.UploadRequest("/home/user/Downloads/p.cif", []byte("data_1\n"))); err != nil {
		t.Errorf("upload: %v", err)
	}
	if b, _ := m.ReadFile("/home/user/Downloads/p.cif"); string(b) != "data_1\n" {
		t.Errorf("uploaded %q", b)
	}
	if _, err := c.Call(ctx, guest.UploadRequest("/home/user/none/p.cif", nil)); scienceboard.StatusOf(err) != 500 {
		t.Errorf("upload into a missing folder: %v", err)
	}
	if _, err := c.Call(ctx, scienceboard.Request{Server: "vm", Method: "GET", Path: "/x"}); err == nil {
		t.Error("an unknown server was called")
	}
	// What the handlers received, the in-process relay of /chimerax/run
	// included.
	var got []string
	for _, r := range rec.take() {
		got = append(got, r.Server+" "+r.Method+" "+r.Path)
	}
	want := "guest POST /write|guest GET /read|guest GET /read|guest POST /setup/launch|app POST /echo|guest POST /chimerax/run|app GET /run|guest POST /setup/upload|guest POST /setup/upload"
	if strings.Join(got, "|") != want {
		t.Errorf("recorded\n%s\nwant\n%s", strings.Join(got, "|"), want)
	}
}

// TestLocalFaults: faults apply in process too; an injected error is
// Flask's page (a VM fault for the agent), a hang ends with the request's
// timeout without a status, a dead VM with DeathReset answers nothing.
func TestLocalFaults(t *testing.T) {
	m := desktop.NewMachine(desktop.MachineConfig{})
	ctx := context.Background()
	r := scienceboard.Request{Server: "guest", Method: "GET", Path: "/platform"}

	_, err := guest.Local(m, guest.Config{Faults: fault.Faults{ErrorProb: 1}}).Call(ctx, r)
	var he *guest.HTTPError
	if !errors.As(err, &he) || he.Status != 500 || !strings.HasPrefix(string(he.Body), "<!doctype html>") || !strings.Contains(err.Error(), "injected fault") {
		t.Errorf("injected error: %v", err)
	}

	r.Timeout = 50 * time.Millisecond
	start := time.Now()
	_, err = guest.Local(m, guest.Config{Faults: fault.Faults{HangProb: 1}}).Call(ctx, r)
	if err == nil || scienceboard.StatusOf(err) != 0 || !errors.Is(err, context.DeadlineExceeded) || time.Since(start) > 5*time.Second {
		t.Errorf("hang: %v after %v", err, time.Since(start))
	}

	_, err = guest.Local(m, guest.Config{DieProb: 1, DeathMode: guest.DeathReset}).Call(ctx, r)
	if err == nil || scienceboard.StatusOf(err) != 0 || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("dead: %v", err)
	}
}

// TestServerCaller: Server.Caller shares the servers' state: a file
// written through it is read over the network.
func TestServerCaller(t *testing.T) {
	vm := startVM(t, guest.Config{})
	ctx := context.Background()
	if _, err := vm.srv.Caller().Call(ctx, scienceboard.Request{Server: "guest", Method: "POST", Path: "/write",
		Body: []byte(`{"path": "/tmp/x", "content": "shared"}`), ContentType: "application/json"}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(vm.srv.URL + "/read?path=/tmp/x")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if b, _ := io.ReadAll(resp.Body); string(b) != "shared" {
		t.Errorf("read %q", b)
	}
}
