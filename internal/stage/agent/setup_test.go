package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/contract/imaging"
	"github.com/codapipe/codapipe/internal/contract/scienceboard"
	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/pkg/vmpool/guest"
)

// TestSetupErrorClasses: which failed setup requests are the VM's fault
// and which are the task's (issue 21: no reset storm for a task's own
// refused request).
func TestSetupErrorClasses(t *testing.T) {
	app := scienceboard.Request{Server: scienceboard.AppServer, Method: "POST", Path: "/tab"}
	exec := scienceboard.Request{Server: scienceboard.GuestServer, Method: "POST", Path: "/setup/execute"}
	cx := scienceboard.Request{Server: scienceboard.GuestServer, Method: "POST", Path: "/chimerax/run"}
	cases := []struct {
		name string
		req  scienceboard.Request
		err  error
		vm   bool // a VM fault; else a task error
	}{
		{"no answer", app, &guest.TimeoutError{Op: "POST /tab", Host: "vm:8000"}, true},
		{"connection refused", exec, errors.New("dial tcp: connection refused"), true},
		{"app says 400", app, &guest.HTTPError{Status: 400, Message: "bad index"}, false},
		{"app says 500", app, &guest.HTTPError{Status: 500, Message: "boom"}, false},
		{"guest says 404", exec, &guest.HTTPError{Status: 404}, false},
		{"guest could not run the command", exec, &guest.HTTPError{Status: 500, Message: "No such file", JSONStatus: "error"}, false},
		{"guest server crashed", exec, &guest.HTTPError{Status: 500, Message: "Internal Server Error"}, true},
		{"chimerax proxy failed", cx, &guest.HTTPError{Status: 500, Message: "Internal Server Error"}, true},
		{"guest busy", cx, &guest.HTTPError{Status: 503}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := setupError("setup: initialize[1] tab", c.req, c.err)
			var ee *EnvError
			if !errors.As(err, &ee) {
				t.Fatalf("%v is not an *EnvError", err)
			}
			var te *scienceboard.TaskError
			isTask := errors.As(err, &te)
			if ee.VM != c.vm || isTask == c.vm || ee.Permanent == c.vm {
				t.Errorf("VM=%v permanent=%v task error=%v, want VM fault=%v", ee.VM, ee.Permanent, isTask, c.vm)
			}
		})
	}
}

// fakeGuest records uploads and calls.
type fakeGuest struct {
	Guest
	uploads map[string][]byte
	calls   []guest.Request
	reply   []byte
	err     error
}

func (f *fakeGuest) Upload(ctx context.Context, path string, data []byte) error {
	if f.err != nil {
		return f.err
	}
	if f.uploads == nil {
		f.uploads = map[string][]byte{}
	}
	f.uploads[path] = data
	return nil
}

func (f *fakeGuest) Call(ctx context.Context, r guest.Request) ([]byte, error) {
	f.calls = append(f.calls, r)
	return f.reply, f.err
}

// TestDownload: the host fetches and the file is copied in (ScienceBoard's
// vm_download); with DownloadInGuest the guest runs curl.
func TestDownload(t *testing.T) {
	d := &scienceboard.Download{URL: "https://files.example/3ppd.cif", Path: "/home/user/Downloads/prot.cif"}
	t.Run("host", func(t *testing.T) {
		g := &fakeGuest{}
		a := &Agent{cfg: Config{Download: func(ctx context.Context, url string) ([]byte, error) {
			if url != d.URL {
				t.Errorf("fetched %s", url)
			}
			return []byte("data_3PPD\n"), nil
		}}}
		if err := a.download(context.Background(), Episode{Guest: g}, "setup", d); err != nil {
			t.Fatal(err)
		}
		if string(g.uploads[d.Path]) != "data_3PPD\n" || len(g.calls) != 0 {
			t.Errorf("uploads %q, calls %v", g.uploads, g.calls)
		}
	})
	t.Run("host fetch fails", func(t *testing.T) {
		a := &Agent{cfg: Config{Download: func(ctx context.Context, url string) ([]byte, error) { return nil, errors.New("HTTP 404") }}}
		err := a.download(context.Background(), Episode{Guest: &fakeGuest{}}, "setup", d)
		var ee *EnvError
		if !errors.As(err, &ee) || ee.VM {
			t.Errorf("got %v, want an environment error that is not the VM's", err)
		}
	})
	t.Run("in guest", func(t *testing.T) {
		g := &fakeGuest{reply: []byte(`{"status":"success","output":"","error":"","returncode":0}`)}
		a := &Agent{cfg: Config{DownloadInGuest: true}}
		if err := a.download(context.Background(), Episode{Guest: g}, "setup", d); err != nil {
			t.Fatal(err)
		}
		if len(g.calls) != 1 || g.calls[0].Path != "/setup/execute" || string(g.calls[0].Body) != `{"command":["curl","-fsSL","-o","/home/user/Downloads/prot.cif","https://files.example/3ppd.cif"],"shell":false}` {
			t.Errorf("calls %+v", g.calls)
		}
	})
	t.Run("in guest, curl fails", func(t *testing.T) {
		g := &fakeGuest{reply: []byte(`{"status":"success","output":"","error":"curl: (6) Could not resolve host","returncode":6}`)}
		a := &Agent{cfg: Config{DownloadInGuest: true}}
		err := a.download(context.Background(), Episode{Guest: g}, "setup", d)
		var te *scienceboard.TaskError
		if !errors.As(err, &te) {
			t.Errorf("got %v, want a task error", err)
		}
	})
}

// TestEnvErrorReasonMasksURLCredentials (issue 40): a download step whose
// URL carries user:password@ fails; the environment error's reason, which
// the trajectory stores, shows the URL without them.
func TestEnvErrorReasonMasksURLCredentials(t *testing.T) {
	for _, raw := range []string{"https://u:S3CRETpw@files.example/3ppd.cif", "https://files.example/3ppd.cif?token=S3CRETpw"} {
		d := &scienceboard.Download{URL: raw, Path: "/home/user/Downloads/prot.cif"}
		a := &Agent{cfg: Config{Download: func(ctx context.Context, url string) ([]byte, error) {
			return nil, fmt.Errorf("GET %s: HTTP 404", url)
		}}}
		err := a.download(context.Background(), Episode{Guest: &fakeGuest{}}, "setup", d)
		var ee *EnvError
		if !errors.As(err, &ee) {
			t.Fatalf("download: %v, want an EnvError", err)
		}
		if !strings.Contains(ee.Error(), "S3CRETpw") {
			t.Fatalf("the test's error does not carry the URL: %v", ee)
		}
		if o := envErrorOutcome(ee); strings.Contains(o.Reason, "S3CRETpw") || !strings.Contains(o.Reason, "files.example") {
			t.Errorf("stored reason %q: want the URL without its credentials", o.Reason)
		}
	}
}

// TestObserveRefusesHugeScreenshots (issue 40, "images that explode"): a
// guest /screenshot that answers a valid 20000×20000 PNG (a few hundred
// KB on the wire) is the VM's fault, refused from its header with the
// limit and the flag that raises it, and not stored.
func TestObserveRefusesHugeScreenshots(t *testing.T) {
	ctx := context.Background()
	store, err := blob.Open(ctx, t.TempDir(), blob.Config{})
	if err != nil {
		t.Fatal(err)
	}
	var huge bytes.Buffer
	if err := imaging.HugePNG(&huge, 20000, 20000); err != nil {
		t.Fatal(err)
	}
	a := &Agent{cfg: Config{Store: store}}
	_, err = a.observe(ctx, huge.Bytes())
	var ee *EnvError
	if !errors.As(err, &ee) || !ee.VM || !strings.Contains(err.Error(), "--max-image-pixels raises it") {
		t.Fatalf("observe: %v; want the VM's environment error naming the limit and its flag", err)
	}
	if _, err := store.Stat(ctx, sha256Hex(huge.Bytes())); err == nil {
		t.Error("the refused screenshot was stored")
	}
	a.cfg.MaxImagePixels = 20000 * 20000
	if _, err := a.observe(ctx, huge.Bytes()); err != nil {
		t.Errorf("with --max-image-pixels 400000000: %v", err)
	}
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
