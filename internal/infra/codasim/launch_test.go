package codasim

import (
	"context"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/codapipe/codapipe/internal/infra/service"
)

// buildCodasim compiles codasim into a folder of the test (-trimpath, as
// make test's passes build, so the simulator's packages come from the
// build cache).
func buildCodasim(t *testing.T) string {
	t.Helper()
	gobin := "go"
	if g := os.Getenv("GO"); g != "" {
		gobin = g
	}
	bin := filepath.Join(t.TempDir(), Name)
	cmd := exec.Command(gobin, "build", "-trimpath", "-ldflags=-s -w", "-o", bin, "./cmd/codasim")
	cmd.Dir = "../../.."
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/codasim: %v\n%s", err, out)
	}
	return bin
}

// gone reports whether process pid has exited and been reaped.
func gone(pid int) bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }

// TestAcceptLaunch starts the real codasim process: its addresses answer,
// the seed rule holds, its task folder is there while it runs, it outlives
// its starter's context, and it is gone with its folder after Close; a bad
// configuration is a usage error naming the file, and no binary an error
// that says how to build one.
func TestAcceptLaunch(t *testing.T) {
	bin := buildCodasim(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	seed := int64(7)
	w, err := Launch(ctx, Request{Binary: bin, VMs: 2, Seed: &seed, Tasks: true, TimeScale: 0.001})
	if err != nil {
		t.Fatal(err)
	}
	if w.Seed != 7 || w.TimeScale != 0.001 || len(w.Guests) != 2 || len(w.Judges) == 0 || w.Process == 0 {
		t.Fatalf("world %+v", *w)
	}
	client := &http.Client{Timeout: 10 * time.Second}
	for _, u := range []string{w.Planner.URL + "/models", w.Executor.URL + "/models", w.Judges[0].URL + "/models", w.Guests[0] + "/sim/health", w.Guests[1] + "/sim/health"} {
		resp, err := client.Get(u)
		if err != nil {
			t.Fatalf("GET %s: %v", u, err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("GET %s: %s", u, resp.Status)
		}
	}
	// The signal that stops its parent (a terminal's Ctrl-C, systemd's
	// SIGTERM to the group) does not stop it: the parent's in-flight work
	// still needs it.
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		if err := syscall.Kill(w.Process, sig); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(200 * time.Millisecond) // a stop would have begun by now
	if resp, err := client.Get(w.Planner.URL + "/models"); err != nil {
		t.Errorf("codasim after SIGINT and SIGTERM: %v", err)
	} else {
		resp.Body.Close()
	}
	files, err := filepath.Glob(filepath.Join(w.Tasks, "*", "*", "*.json"))
	if err != nil || len(files) < 50 {
		t.Errorf("task folder %s: %d task files (%v), want the simulator's 58", w.Tasks, len(files), err)
	}
	pid, tasks := w.Process, w.Tasks
	if err := w.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
	if !gone(pid) {
		t.Errorf("codasim %d still runs after Close", pid)
	}
	if _, err := os.Stat(tasks); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("task folder %s after Close: %v", tasks, err)
	}

	t.Run("context ends", func(t *testing.T) {
		// The simulator outlives its starter's context (a command's
		// in-flight work does), until Close.
		cctx, ccancel := context.WithCancel(ctx)
		w, err := Launch(cctx, Request{Binary: bin})
		if err != nil {
			t.Fatal(err)
		}
		if w.Seed != 1 || len(w.Guests) != 0 {
			t.Errorf("models only, default seed: got seed %d, %d guests", w.Seed, len(w.Guests))
		}
		ccancel()
		resp, err := client.Get(w.Judges[0].URL + "/models")
		if err != nil {
			t.Fatalf("the judge after the starter's context ended: %v", err)
		}
		resp.Body.Close()
		if err := w.Close(); err != nil {
			t.Error(err)
		}
		if !gone(w.Process) {
			t.Errorf("codasim %d still runs after Close", w.Process)
		}
	})
	t.Run("config seed", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "sim.json")
		if err := os.WriteFile(cfg, []byte(`{"seed": 5}`), 0o644); err != nil {
			t.Fatal(err)
		}
		w, err := Launch(ctx, Request{Binary: bin, Config: cfg})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		if w.Seed != 5 {
			t.Errorf("seed %d, want the config's 5 (no --seed)", w.Seed)
		}
	})
	t.Run("bad config", func(t *testing.T) {
		cfg := filepath.Join(t.TempDir(), "sim.json")
		if err := os.WriteFile(cfg, []byte("{\n  \"vmz\": 2\n}"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Start(ctx, Request{Binary: bin, Config: cfg})
		if !errors.Is(err, service.ErrUsage) || !strings.Contains(err.Error(), `sim.json: json: unknown field "vmz"`) {
			t.Errorf("got %v, want a usage error naming the file and the field", err)
		}
	})
	t.Run("no binary", func(t *testing.T) {
		t.Setenv("PATH", "")
		t.Setenv(EnvBinary, "")
		_, err := Start(ctx, Request{})
		if !errors.Is(err, ErrNoBinary) || !strings.Contains(err.Error(), "go build -o bin/ ./cmd/codasim") {
			t.Errorf("got %v, want ErrNoBinary saying how to build it", err)
		}
	})
}
