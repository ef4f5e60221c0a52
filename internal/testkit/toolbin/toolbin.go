// Package toolbin finds the test tools `make tools` builds into the
// repository's ignored .bin/ folder (MinIO, nats-server), for the test
// helpers that start them as separate processes.
package toolbin

import (
	"fmt"
	"os"
	"path/filepath"
)

// Find returns the path of the tool name: the path in the environment
// variable env when it is set, or .bin/<name> in the repository root,
// found by walking up from the working directory to go.mod. The error
// says how to get it.
func Find(env, name string) (string, error) {
	if p := os.Getenv(env); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s=%s: %w", env, p, err)
		}
		return p, nil
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, ".bin", name)
			if _, err := os.Stat(p); err != nil {
				return "", fmt.Errorf("%s not found: run make tools (or set %s)", p, env)
			}
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", fmt.Errorf("no go.mod above the working directory; set %s", env)
		}
		dir = parent
	}
}
