package runreport_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/stage/rollout"
	"github.com/codapipe/codapipe/internal/stage/runreport"
	"github.com/codapipe/codapipe/internal/testkit/pipetest"
)

// TestAcceptReportVMEvents runs a small simulated rollout with --summary, then
// `rollout report`: the run's VM events document is read, and the per-VM
// resets, failures and quarantines add up to the pool's counts in the
// rollout summary; the page's VM table and timeline legend show them.
func TestAcceptReportVMEvents(t *testing.T) {
	dir := t.TempDir()
	summary := filepath.Join(t.TempDir(), "summary.json")
	p := pipetest.Run(t, dir, pipetest.Spec{
		Tasks: []string{"S01", "S02", "S03"}, Samples: 2, Group: 1, VMs: 2, Seed: 7, Run: "report-vm-events",
		RolloutArgs: []string{"--summary", summary},
	})
	raw, err := os.ReadFile(summary)
	if err != nil {
		t.Fatal(err)
	}
	var sum rollout.Summary
	if err := json.Unmarshal(raw, &sum); err != nil {
		t.Fatalf("summary: %v\n%s", err, raw)
	}

	page := filepath.Join(t.TempDir(), "report.html")
	out := cli(t, rollout.Command(), "report", "--data", dir, "--log-level", "warn", "--run", p.Spec.Run, "--json", "--out", page)
	var r runreport.Report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report JSON: %v\n%s", err, out)
	}
	if r.VMs.EventDocuments != 1 {
		t.Errorf("%d VM events documents, want 1 (one rollout invocation)", r.VMs.EventDocuments)
	}
	for _, n := range r.Notes {
		if strings.Contains(n, "VM events") {
			t.Errorf("note about VM events although they are recorded: %s", n)
		}
	}
	var resets, failures, quarantined int
	for _, v := range r.VMs.PerVM {
		resets += v.Resets
		failures += v.Failures
		quarantined += v.Quarantined
		if v.Resets > 0 && v.ResetSeconds <= 0 {
			t.Errorf("VM %s: %d resets of %v s", v.VM, v.Resets, v.ResetSeconds)
		}
	}
	// The sim pool resets a VM after each episode (reset-ahead): one reset
	// per release, all begun before the summary took the pool's counts.
	if int64(resets) != sum.VMResets || resets == 0 {
		t.Errorf("report: %d resets, rollout summary: %d", resets, sum.VMResets)
	}
	if int64(failures) != sum.VMFailures {
		t.Errorf("report: %d VM failures, rollout summary: %d", failures, sum.VMFailures)
	}
	if quarantined != len(sum.Quarantined) {
		t.Errorf("report: %d quarantines, rollout summary: %v", quarantined, sum.Quarantined)
	}
	starts := 0
	for _, s := range r.VMs.Spans {
		if s.Kind == "start" {
			starts++
		}
	}
	if starts != p.Spec.VMs {
		t.Errorf("%d VM start spans, want %d", starts, p.Spec.VMs)
	}

	body, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"VM start / reset (revert to snapshot)", "VM failure", "VM quarantined", "<th>resets</th>", "<th>quarantined</th>"} {
		if !strings.Contains(string(body), want) {
			t.Errorf("page lacks %q", want)
		}
	}
}
