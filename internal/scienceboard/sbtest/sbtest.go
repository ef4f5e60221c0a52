// Package sbtest gives tests the real ScienceBoard task files: the copy in
// the repository's testdata/scienceboard (the 169 VM task files of the six applications,
// MIT licence beside them), or another folder of the same layout named by
// the environment variable CODAPIPE_SCIENCEBOARD_TASKS, for running the
// generic checks over a larger or newer benchmark. It is also the one
// reader of the real contract's golden request/reply pairs
// (testdata/scienceboard/contract/golden.json: Golden, and the matchers
// of Message).
package sbtest

import (
	"os"
	"path/filepath"
	"runtime"
)

// EnvTasks names the environment variable that points Tasks at another
// tasks folder.
const EnvTasks = "CODAPIPE_SCIENCEBOARD_TASKS"

// Copy is the tasks root of the repository's copy; tests that count its
// files use it whatever EnvTasks says.
func Copy() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return filepath.Join("testdata", "scienceboard", "tasks")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "testdata", "scienceboard", "tasks")
}

// Tasks is the tasks root that generic checks (every file loads, every
// setup item is understood) read: EnvTasks when set, else Copy.
func Tasks() string {
	if d := os.Getenv(EnvTasks); d != "" {
		return d
	}
	return Copy()
}
