package poolfile_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/poolfile"
)

// Parse reads a pool file's text; zero values are the defaults, filled in
// by the pool and the backend.
func ExampleParse() {
	cfg, err := poolfile.Parse("pool.yaml", []byte(`
backend: vmware
id: chimerax
quarantine_after: 2
timeouts: {start: 10m, reset: 5m}
vmware:
  snapshot: init_state
  vms:
    - vmx: vms/ChimeraX-0/Ubuntu.vmx
      id: chimerax-0
    - vmx: vms/ChimeraX-1/Ubuntu.vmx
      id: chimerax-1
      snapshot: init_state_v2
`))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(cfg.Backend, cfg.Pool.ID, cfg.Pool.QuarantineAfter, cfg.Pool.Timeouts.Reset)
	for _, vm := range cfg.VMware.VMs {
		fmt.Printf("%s %s snapshot=%q\n", vm.ID, vm.VMX, vm.Snapshot) // "": vmware.snapshot
	}
	// Output:
	// vmware chimerax 2 5m0s
	// chimerax-0 vms/ChimeraX-0/Ubuntu.vmx snapshot=""
	// chimerax-1 vms/ChimeraX-1/Ubuntu.vmx snapshot="init_state_v2"
}

// Errors name the file, line and column, the field and what is expected.
func ExampleParse_error() {
	_, err := poolfile.Parse("pool.yaml", []byte("backend: sim\ntimeouts:\n  reset: ten minutes\n"))
	fmt.Println(err)
	var ce *vmpool.ConfigError
	if errors.As(err, &ce) {
		fmt.Println(ce.Line, ce.Field)
	}
	// Output:
	// pool.yaml:3:10: timeouts.reset: "ten minutes": want a duration such as 30s, 5m or 1h30m (a plain number is seconds)
	// 3 timeouts.reset
}

// Load reads a pool file from disk: relative paths are the file's
// directory's, and the pool id defaults to the file's name.
func ExampleLoad() {
	dir, err := os.MkdirTemp("", "poolfile-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "osworld.yaml")
	err = os.WriteFile(path, []byte("backend: docker\nlock_dir: locks\ndocker: {count: 4, disk_image: Ubuntu.qcow2}\n"), 0o644)
	if err != nil {
		log.Fatal(err)
	}

	cfg, err := poolfile.Load(path)
	if err != nil {
		log.Fatal(err)
	}
	rel := func(p string) string { r, _ := filepath.Rel(dir, p); return r }
	fmt.Println(cfg.Pool.ID, rel(cfg.Pool.LockDir), rel(cfg.Docker.DiskImage), cfg.Docker.Count)
	// Output:
	// osworld locks Ubuntu.qcow2 4
}

// NewPool builds the backend a pool file names and the pool over it.
func ExampleNewPool() {
	guest := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// /sim/reset and /sim/health of a simulated guest, and /setup/execute
		// of the command the pool runs after a revert (reset.sh).
		fmt.Fprint(w, `{"status": "ok"}`)
	}))
	defer guest.Close()
	lockDir, err := os.MkdirTemp("", "poolfile-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(lockDir)

	cfg, err := poolfile.Parse("sim.yaml", fmt.Appendf(nil, "backend: sim\nid: demo\nlock_dir: %s\nsim:\n  vms:\n    - url: %s\n      state_url: %s\n", lockDir, guest.URL, guest.URL))
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	pool, err := poolfile.NewPool(ctx, cfg, slog.New(slog.DiscardHandler))
	if err != nil {
		log.Fatal(err)
	}
	defer pool.Close(context.Background())
	lease, err := pool.Lease(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer lease.End(vmpool.Unused)
	fmt.Println(pool.ID(), lease.ID(), pool.Config().Timeouts.Reset)
	// Output:
	// demo sim-0 2m0s
}
