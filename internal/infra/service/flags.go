// Package service is the skeleton the four commands share: Main parses
// flags with environment fallbacks, sets up structured logging, serves
// Prometheus metrics, handles SIGINT/SIGTERM, and gives the command's Run
// an Env that opens the bus and the blob store with the metrics wired in.
package service

import (
	"errors"

	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/codapipe/codapipe/internal/infra/blob"
	"github.com/codapipe/codapipe/internal/infra/redact"
	"github.com/codapipe/codapipe/pkg/traj"
)

// Flags wraps a flag.FlagSet so every flag can fall back to an environment
// variable. The variable is named in the flag's help text ("[env NAME]");
// an explicit flag wins over the variable, the variable over the default.
type Flags struct {
	*flag.FlagSet
	envErrs []error
	lookup  func(string) (string, bool)
	fromEnv map[string]bool // flags whose value came from their variable
	secret  map[string]bool // flags whose value is a credential (Secret)
	// group is the --help section of the flags defined from now on
	// (Group); groupOf holds each flag's, groups the sections in order.
	group   string
	groupOf map[string]string
	groups  []string
}

// NewFlags returns an empty flag set for a command.
func NewFlags(name string) *Flags {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	return &Flags{FlagSet: fs, lookup: os.LookupEnv}
}

func withEnv(usage, env string) string {
	if env == "" {
		return usage
	}
	return usage + " [env " + env + "]"
}

func (f *Flags) env(env string) (string, bool) {
	if env == "" {
		return "", false
	}
	v, ok := f.lookup(env)
	return v, ok && v != ""
}

// Given reports whether the flag name was set, on the command line or by
// its environment variable (rather than left at its default): a value
// that overrides a configuration file.
func (f *Flags) Given(name string) bool {
	if f.fromEnv[name] {
		return true
	}
	given := false
	f.Visit(func(fl *flag.Flag) {
		if fl.Name == name {
			given = true
		}
	})
	return given
}

func (f *Flags) markEnv(name string) {
	if f.fromEnv == nil {
		f.fromEnv = map[string]bool{}
	}
	f.fromEnv[name] = true
}

// String defines a string flag with an environment fallback.
func (f *Flags) String(p *string, name, env, def, usage string) {
	if v, ok := f.env(env); ok {
		f.markEnv(name)
		def = v
	}
	f.StringVar(p, name, def, withEnv(usage, env))
}

// Secret defines a string flag whose value is a credential (an API key,
// a password, a token): like String, but the help never shows the value
// its variable gave, and Secrets lists it so that the command's output
// never shows it either.
func (f *Flags) Secret(p *string, name, env, usage string) {
	if f.secret == nil {
		f.secret = map[string]bool{}
	}
	f.secret[name] = true
	f.StringVar(p, name, "", withEnv(usage, env))
	if v, ok := f.env(env); ok {
		f.markEnv(name)
		*p = v
	}
}

// Secrets are the credentials these flags hold (their values so far:
// call it again after Parse): the values of the Secret flags, the user
// information of every URL a flag or args hold, the S3 secrets of the
// environment (blob.SecretEnv, blob.EndpointEnv; the access key IDs of
// blob.KeyIDEnv as identifiers) and the content of the NATS credentials
// file (--nats-creds), added to s.
func (f *Flags) Secrets(s *redact.Secrets, args ...string) {
	f.VisitAll(func(fl *flag.Flag) {
		v := fl.Value.String()
		if f.secret[fl.Name] {
			s.Add(v)
		}
		if strings.Contains(v, "@") {
			s.AddURL(v)
		}
		if fl.Name == "nats-creds" && v != "" {
			addCreds(s, v)
		}
		if strings.Contains(v, "--") {
			addArgSecrets(s, strings.Fields(v))
		}
	})
	for _, a := range args {
		s.AddURL(a)
	}
	for _, k := range blob.SecretEnv {
		v, _ := f.lookup(k)
		s.Add(v)
	}
	for _, k := range blob.KeyIDEnv {
		v, _ := f.lookup(k)
		s.AddIdentifier(v)
	}
	for _, k := range blob.EndpointEnv {
		v, _ := f.lookup(k)
		s.AddURL(v)
	}
}

// addArgSecrets adds the values of secret-looking flags (a name ending
// in -key, -password or -token) in a list of another command's flags,
// such as nightly's --rollout-args '--planner-key ...'.
func addArgSecrets(s *redact.Secrets, fields []string) {
	for i, f := range fields {
		name, val, hasVal := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if !strings.HasPrefix(f, "-") || !(strings.HasSuffix(name, "-key") || strings.HasSuffix(name, "-password") || strings.HasSuffix(name, "-token")) {
			continue
		}
		if !hasVal && i+1 < len(fields) {
			val = fields[i+1]
		}
		s.Add(val)
	}
}

// addCreds adds the JWT and the nkey seed of a NATS credentials file.
func addCreds(s *redact.Secrets, path string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return // the bus reports it
	}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line != "" && !strings.HasPrefix(line, "---") && !strings.HasPrefix(line, "***") && !strings.Contains(line, " ") {
			s.Add(line)
		}
	}
}

// envDefault is the default of flag name with an environment fallback:
// the value of variable env parsed by parse when it is set, else def. A
// value that does not parse is an error of Parse, which says that the
// variable must be want.
func envDefault[T any](f *Flags, name, env string, def T, parse func(string) (T, error), want string) T {
	v, ok := f.env(env)
	if !ok {
		return def
	}
	x, err := parse(v)
	if err != nil {
		f.envErrs = append(f.envErrs, fmt.Errorf("environment %s=%q: want %s", env, v, want))
		return def
	}
	f.markEnv(name)
	return x
}

// Bool defines a bool flag with an environment fallback ("1", "true", ...).
func (f *Flags) Bool(p *bool, name, env string, def bool, usage string) {
	f.BoolVar(p, name, envDefault(f, name, env, def, strconv.ParseBool, "true or false"), withEnv(usage, env))
}

// Int defines an int flag with an environment fallback.
func (f *Flags) Int(p *int, name, env string, def int, usage string) {
	f.IntVar(p, name, envDefault(f, name, env, def, strconv.Atoi, "an integer"), withEnv(usage, env))
}

// Duration defines a duration flag with an environment fallback ("90s", "2h").
func (f *Flags) Duration(p *time.Duration, name, env string, def time.Duration, usage string) {
	f.DurationVar(p, name, envDefault(f, name, env, def, time.ParseDuration, "a duration such as 90s or 2h"), withEnv(usage, env))
}

// Parse parses the arguments. Invalid environment values are reported
// here, all of them, together with flag errors. flag.ErrHelp is returned
// as is for -h/--help.
func (f *Flags) Parse(args []string) error {
	if err := f.FlagSet.Parse(args); err != nil {
		return err
	}
	if len(f.envErrs) > 0 {
		return errors.Join(f.envErrs...)
	}
	return nil
}

// Int64 defines an int64 flag with an environment fallback.
func (f *Flags) Int64(p *int64, name, env string, def int64, usage string) {
	parse := func(v string) (int64, error) { return strconv.ParseInt(v, 10, 64) }
	f.Int64Var(p, name, envDefault(f, name, env, def, parse, "an integer"), withEnv(usage, env))
}

// Float64 defines a float flag with an environment fallback.
func (f *Flags) Float64(p *float64, name, env string, def float64, usage string) {
	parse := func(v string) (float64, error) { return strconv.ParseFloat(v, 64) }
	f.Float64Var(p, name, envDefault(f, name, env, def, parse, "a number"), withEnv(usage, env))
}

// stringList is a flag that collects every value it is given; a list
// flag (split) splits each value into names (SplitList).
type stringList struct {
	p     *[]string
	set   bool // given on the command line: replaces the default
	split bool
}

func (l *stringList) String() string {
	if l.p == nil {
		return ""
	}
	return strings.Join(*l.p, ",")
}

func (l *stringList) Set(v string) error {
	if !l.set {
		*l.p, l.set = nil, true
	}
	if l.split {
		*l.p = append(*l.p, SplitList(v)...)
		return nil
	}
	*l.p = append(*l.p, v)
	return nil
}

// SplitList splits comma-separated values into their elements, trimmed
// of surrounding spaces, without empty ones, in order: the one reading of
// a list of names (List flags, their variables, NameList).
func SplitList(vals ...string) []string {
	var out []string
	for _, v := range vals {
		for _, s := range strings.Split(v, ",") {
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
	}
	return out
}

// Strings defines a flag that may be repeated; each use adds a value as
// it is, commas included (a URL, a stop string). The environment
// fallback holds the values separated by commas. Values given on the
// command line replace the environment's.
func (f *Flags) Strings(p *[]string, name, env, usage string) {
	f.strings(p, name, env, usage+" (repeatable)", false)
}

// List defines a flag that holds a list of names (runs, apps,
// checkpoints): each value is split on commas (SplitList), on the
// command line and in the environment fallback alike, and the flag may be
// repeated, each use adding its names ("--runs a,b --runs c" is a, b, c).
// Names given on the command line replace the environment's.
func (f *Flags) List(p *[]string, name, env, usage string) {
	f.strings(p, name, env, usage+" (comma-separated, repeatable)", true)
}

func (f *Flags) strings(p *[]string, name, env, usage string, split bool) {
	*p = nil
	if v, ok := f.env(env); ok {
		f.markEnv(name)
		*p = SplitList(v)
	}
	f.Var(&stringList{p: p, split: split}, name, withEnv(usage, env))
}

// CheckNames checks every value of a flag with traj.CheckName and returns
// the first error prefixed with the flag's name ("--run: run name …").
func CheckNames(flag string, k traj.NameKind, vals ...string) error {
	for _, v := range vals {
		if err := traj.CheckName(k, v); err != nil {
			return fmt.Errorf("%s: %w", flag, err)
		}
	}
	return nil
}
