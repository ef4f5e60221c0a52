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
)

// EnvTasks names the environment variable that points Tasks at another
// tasks folder.
const EnvTasks = "CODAPIPE_SCIENCEBOARD_TASKS"

// Copy is the tasks root of the repository's copy; tests that count its
// files use it whatever EnvTasks says. It is found from the working
// directory (a test runs in its package's folder): the first folder upwards
// that holds go.mod is the repository. Not from the source file's path,
// which -trimpath (make test) turns into an import path.
func Copy() string {
	root := repoRoot()
	return filepath.Join(root, "testdata", "scienceboard", "tasks")
}

// repoRoot returns the nearest folder at or above the working directory
// that holds go.mod, or "." when there is none.
func repoRoot() string {
	dir, err := os.Getwd()
	if err != nil {
		return "."
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "."
		}
		dir = up
	}
}

// Tasks is the tasks root that generic checks (every file loads, every
// setup item is understood) read: EnvTasks when set, else Copy.
func Tasks() string {
	if d := os.Getenv(EnvTasks); d != "" {
		return d
	}
	return Copy()
}
