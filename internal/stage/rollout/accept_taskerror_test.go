package rollout

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 21, acceptance 3: a simulated application that rejects a task's own
// setup step deterministically (GRASS GIS answers "ERROR" to a layer that
// does not exist, as the real GUI's Flask route does) ends that episode as
// a task error: an environment error with the reason, not retried, and the
// VM released healthy — no fault reset, no quarantine — while the other
// tasks of the run finish normally on the same VMs.
func TestAcceptTaskErrorIsNotAVMFault(t *testing.T) {
	t.Parallel() // beside the outage tests, which mostly wait
	const app, K = "GrassGIS", 2
	tasks := simTaskDir(t, app, "S02", "S03")
	bad := filepath.Join(tasks, "VM", app, "S02.json")
	b, err := os.ReadFile(bad)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte(`"name": "natural_earth"`)) {
		t.Fatalf("%s has no layer item to break", bad)
	}
	if err := os.WriteFile(bad, bytes.Replace(b, []byte(`"name": "natural_earth"`), []byte(`"name": "no_such_map"`), 1), 0o644); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	log, logs := newLogCapture(slog.LevelInfo)
	cfg := acceptConfig(dir, tasks, "accept-task-error", log)
	cfg.App, cfg.Group, cfg.Samples = app, 1, K
	sum := runOK(t, cfg, logs)

	b2 := openTestBus(t, dir)
	defer b2.Close()
	ps := readPublished(t, b2, openStore(t, dir), app)
	if len(ps) != 2*K {
		t.Fatalf("%d trajectories, want %d", len(ps), 2*K)
	}
	for _, p := range ps {
		tr := p.Traj
		switch tr.Task.ID {
		case app + "/S02":
			if !tr.Outcome.IsEnvError() || !strings.Contains(tr.Outcome.Reason, "refused") || !strings.Contains(tr.Outcome.Reason, "/init/layer") {
				t.Errorf("%s: outcome %s %q, want an environment error naming the refused /init/layer", tr.ID, tr.Outcome.Kind, tr.Outcome.Reason)
			}
			if len(tr.Steps) != 0 {
				t.Errorf("%s: %d steps after a refused setup", tr.ID, len(tr.Steps))
			}
		default:
			if tr.Outcome.IsEnvError() {
				t.Errorf("%s: the good task ended by an environment error: %s", tr.ID, tr.Outcome.Reason)
			}
		}
	}
	if sum.EnvErrors != K || sum.Retries != 0 {
		t.Errorf("summary: %d env errors after %d retries, want %d and none (a task error is not retried)", sum.EnvErrors, sum.Retries, K)
	}
	if len(sum.Quarantined) != 0 {
		t.Errorf("quarantined %v; a task error is not the VM's fault", sum.Quarantined)
	}
	if r := logs.records("vmpool: VM failed; resetting it"); len(r) != 0 {
		t.Errorf("the pool reset a VM for a fault %d times: %v", len(r), r[0].Attrs)
	}
	for _, r := range logs.records("episode ended by an environment error") {
		if r.Attrs["vm_fault"] != "false" {
			t.Errorf("logged as a VM fault: %v", r.Attrs)
		}
	}
}
