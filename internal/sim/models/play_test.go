package models

// Playing tasks on simulated machines the way the rollout does, for the
// tests that check the judge's truth against the tasks' evaluator (the
// same helpers as package tasks' acceptance tests).

import (
	"strings"
	"testing"

	"github.com/codapipe/codapipe/internal/scienceboard"
	"github.com/codapipe/codapipe/internal/sim/apps"
	"github.com/codapipe/codapipe/internal/sim/desktop"
	"github.com/codapipe/codapipe/internal/sim/tasks"
	"github.com/codapipe/codapipe/pkg/uitars"
)

// newTaskMachine returns a fresh machine with the task's initialize items
// applied.
func newTaskMachine(t testing.TB, task *tasks.Task, seed int64) desktop.Machine {
	t.Helper()
	m := desktop.NewMachine(desktop.MachineConfig{Apps: apps.Catalog(), Seed: seed})
	if err := tasks.RunInit(m, &task.Task, nil); err != nil {
		t.Fatalf("%s: init: %v", task.ID, err)
	}
	return m
}

// play executes one UI-TARS action text the way the rollout does:
// uitars.Parse → uitars.Render → ParsePyAutoGUI → Machine.Input. It
// returns the final action when the action ends the episode.
func play(t testing.TB, m desktop.Machine, action string) (scienceboard.FinalAction, bool) {
	t.Helper()
	parsed, err := uitars.Parse(action, uitars.DefaultOptions())
	if err != nil {
		t.Fatalf("parse %q: %v", action, err)
	}
	for _, a := range parsed.Actions {
		code, err := uitars.Render(a, uitars.DefaultScreen)
		if err != nil {
			t.Fatalf("render %q: %v", action, err)
		}
		switch {
		case code == uitars.TokenDone:
			return scienceboard.FinalAction{Kind: scienceboard.FinalDone}, true
		case code == uitars.TokenFail:
			return scienceboard.FinalAction{Kind: scienceboard.FinalFail}, true
		case strings.HasPrefix(code, uitars.TokenAns+" "):
			return scienceboard.FinalAction{Kind: scienceboard.FinalAns, Answer: strings.TrimPrefix(code, uitars.TokenAns+" ")}, true
		case code == uitars.TokenWait:
			continue
		}
		evs, err := desktop.ParsePyAutoGUI("import pyautogui; import time; pyautogui.FAILSAFE = False; " + strings.ReplaceAll(code, "\n", "; "))
		if err != nil {
			t.Fatalf("pyautogui %q: %v", code, err)
		}
		for _, ev := range evs {
			if err := m.Input(ev); err != nil {
				t.Fatalf("input %+v: %v", ev, err)
			}
		}
	}
	return scienceboard.FinalAction{}, false
}

func oracleActions(task *tasks.Task) []string {
	out := make([]string, len(task.Oracle))
	for i, s := range task.Oracle {
		out[i] = s.Action
	}
	return out
}

func mustTasks(t testing.TB) []tasks.Task {
	t.Helper()
	ts, err := tasks.All()
	if err != nil {
		t.Fatal(err)
	}
	return ts
}
