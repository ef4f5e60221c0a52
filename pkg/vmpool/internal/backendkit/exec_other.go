//go:build !unix

package backendkit

import "os/exec"

// setProcessGroup: without process groups only the command itself is
// killed when its context ends; cmd.WaitDelay bounds the wait for its
// children's pipes.
func setProcessGroup(cmd *exec.Cmd) {}
