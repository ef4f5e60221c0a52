package guest

import (
	"encoding/json"
	"errors"
	"strings"
)

// Command is a command for /execute, /setup/execute and /setup/launch:
// either a command line (Line) or an argument vector (Argv), never both.
// It encodes as the request body {"command": Line or Argv, "shell": Shell}.
// With Shell the guest runs Line through /bin/sh; without it, the guest
// splits a Line with Python's shlex and runs the program directly.
type Command struct {
	Line  string   // a command line, split by the guest's shell or shlex
	Argv  []string // a program and its arguments
	Shell bool     // run through /bin/sh
}

// ShellCommand is a command line run through the guest's shell.
func ShellCommand(line string) Command { return Command{Line: line, Shell: true} }

// ArgvCommand is a program and its arguments, run without a shell.
func ArgvCommand(argv ...string) Command { return Command{Argv: argv} }

// Validate reports an empty command or one with both Line and Argv.
func (c Command) Validate() error {
	switch {
	case c.Line != "" && len(c.Argv) > 0:
		return errors.New("command has both a line and an argv")
	case c.Line == "" && len(c.Argv) == 0:
		return errors.New("empty command")
	case len(c.Argv) > 0 && c.Argv[0] == "":
		return errors.New("command argv[0] is empty")
	}
	return nil
}

// MarshalJSON encodes the request body {"command": ..., "shell": ...}.
func (c Command) MarshalJSON() ([]byte, error) {
	var cmd any = c.Line
	if len(c.Argv) > 0 {
		cmd = c.Argv
	}
	return json.Marshal(struct {
		Command any  `json:"command"`
		Shell   bool `json:"shell"`
	}{cmd, c.Shell})
}

// String is the command for messages: Line, or Argv joined by spaces with
// arguments that need it quoted.
func (c Command) String() string {
	if len(c.Argv) == 0 {
		return c.Line
	}
	parts := make([]string, len(c.Argv))
	for i, a := range c.Argv {
		if a == "" || strings.ContainsAny(a, " \t\n'\"\\$`;&|<>()*?") {
			a = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
		parts[i] = a
	}
	return strings.Join(parts, " ")
}

// ExecResult is the guest's answer to /execute and /setup/execute.
// ReturnCode is -1 when the command could not be run at all (the guest
// answered 500 with status "error").
type ExecResult struct {
	Status     string `json:"status"`            // "success": the command ran (see ReturnCode); "error": it could not run
	Output     string `json:"output"`            // stdout
	Error      string `json:"error"`             // stderr
	ReturnCode int    `json:"returncode"`        // the exit status; -1 when it could not run
	Message    string `json:"message,omitempty"` // the guest's message when Status is "error"
}

// ErrTimeout is matched (errors.Is) by every error of a call that got no
// answer in time, whether its own timeout or the caller's deadline ended it.
// The error is a *TimeoutError naming the operation, host and time.
var ErrTimeout = errors.New("vmpool: guest did not answer in time")

// ErrNotPNG is matched by the error of a screenshot whose bytes are not a PNG.
var ErrNotPNG = errors.New("answer is not a PNG image")
