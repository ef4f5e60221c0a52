package service

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/codapipe/codapipe/internal/infra/redact"
)

// ParseFlags parses a command's own flags (not the common ones) from args
// and their environment fallbacks, as Main parses them, into the
// variables its Flags function binds: for a job that runs the command's
// work in its own process (nightly) and passes it a typed configuration.
// The secrets are those the flags carry (keys, URLs with user
// information), for the writers of the command's output; an error names
// the command and the flag.
func ParseFlags(cmd Command, args []string) (*redact.Secrets, error) {
	fs := NewFlags(cmd.Name)
	if cmd.Flags != nil {
		cmd.Flags(fs)
	}
	fs.SetOutput(io.Discard)
	fs.FlagSet.Usage = func() {}
	secrets := &redact.Secrets{}
	if err := fs.Parse(args); err != nil {
		fs.Secrets(secrets)
		if errors.Is(err, flag.ErrHelp) {
			err = errors.New("--help is not a stage flag")
		}
		return nil, Usage(secrets.Error(errors.New(strings.TrimSpace(cmd.flagError(fs, err)))))
	}
	fs.Secrets(secrets, fs.Args()...)
	if fs.NArg() > cmd.Args {
		return nil, Usage(fmt.Errorf("%s: unexpected argument %q", cmd.Name, secrets.Strip(fs.Arg(cmd.Args))))
	}
	return secrets, nil
}

// Stage is a command a job can run in its own process with a typed
// configuration (nightly): it returns the command and the resolution of
// its options once its flags are parsed (the checks and conversions its
// Run makes before its work).
type Stage[O any] func() (Command, func() (O, error))

// Command returns the stage's command.
func (s Stage[O]) Command() Command {
	c, _ := s()
	return c
}

// Parse parses the stage's own flags from args (ParseFlags) and resolves
// them into its options, with the secrets the flags carry.
func (s Stage[O]) Parse(args []string) (O, *redact.Secrets, error) {
	var zero O
	c, resolve := s()
	secrets, err := ParseFlags(c, args)
	if err != nil {
		return zero, nil, err
	}
	o, err := resolve()
	if err != nil {
		return zero, nil, secrets.Error(err)
	}
	return o, secrets, nil
}

// Stage returns the Env a stage of a job runs in, inside the job's
// process: the job's NATS connection and blob store (opened once, by the
// job's Env, and closed by it, never by the stage's), the job's common
// flags with drain set as the stage needs, a metrics registry of its own
// (a stage run twice registers its metrics twice), and a logger and
// writers that strip the stage's secrets as Main strips a command's. name
// is the stage's ("judge --drain"), logged on every line.
func (e *Env) Stage(name string, secrets *redact.Secrets, drain bool, stdout, stderr io.Writer) (*Env, error) {
	if e.Common == nil {
		return nil, errors.New("service: a stage needs the common flags of its job")
	}
	if secrets == nil {
		secrets = &redact.Secrets{}
	}
	stdout, stderr = secrets.Writer(stdout), secrets.Writer(stderr)
	log, err := NewLogger(stderr, LogConfig{Service: firstWord(e.name), Level: e.Common.LogLevel, Format: e.Common.LogFormat})
	if err != nil {
		return nil, err
	}
	c := *e.Common
	c.Drain = drain
	return &Env{Common: &c, Log: log.With("stage", name), Metrics: NewRegistry(), Stdout: stdout, Stderr: stderr,
		name: name, parent: e}, nil
}
