package vmpool

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"
)

// Config is a pool's policy: its id, when it quarantines a VM, where its
// lock files are, and the deadlines of backend operations. Zero values mean
// the defaults. The yaml tags are the pool file's field names (package
// poolfile reads pool files).
type Config struct {
	// ID names the pool: it labels the docker backend's containers and
	// appears in logs. Default: the pool file's name without extension, or
	// "codapipe".
	ID string `yaml:"id"`
	// QuarantineAfter is the number of failures in a row (unhealthy
	// releases, failed starts, resets or health checks) after which a VM is
	// quarantined. Default 3.
	QuarantineAfter int `yaml:"quarantine_after"`
	// LockDir holds the per-VM lock files that keep two processes from
	// driving one VM. Default DefaultLockDir().
	LockDir string `yaml:"lock_dir"`
	// LockRetry is how often a VM that another process holds is tried
	// again. Default 10s.
	LockRetry time.Duration `yaml:"lock_retry"`
	// IdleCheck is how long a ready VM may sit unused before the pool
	// checks its health again. Default 2m; negative ("off") disables.
	IdleCheck time.Duration `yaml:"idle_check"`
	// RetryWait is the pause before retrying a failed start or reset.
	// Default 5s.
	RetryWait time.Duration `yaml:"retry_wait"`
	// Timeouts bound every backend operation.
	Timeouts Timeouts `yaml:"timeouts"`
	// AfterRevert is a shell command the pool runs in the guest after every
	// Backend.Start and Backend.Reset, before the health check: POST
	// /setup/execute {"command": AfterRevert, "shell": true}, the way
	// ScienceBoard's harness runs its reset script after each snapshot
	// revert (sci/vm/vtask.py VTask._init). As there, an answer with HTTP
	// 200 is success whatever the command's exit code (a non-zero one is
	// logged); no answer or another status fails the start or reset, which
	// is retried like any other failure. It runs under the start or reset
	// deadline. "" means the backend's default (DefaultAfterRevert:
	// ScienceBoard's reset script for the sim backend, nothing for the
	// others);
	// AfterRevertOff ("off") runs nothing.
	AfterRevert string `yaml:"after_revert"`
}

// AfterRevertOff is the Config.AfterRevert that runs nothing after a
// revert.
const AfterRevertOff = "off"

// AfterReverter is implemented by a Backend whose VMs need a command run
// in the guest after each revert unless the pool's configuration says
// otherwise (Config.AfterRevert).
type AfterReverter interface {
	// DefaultAfterRevert is the command; "" means none.
	DefaultAfterRevert() string
}

// Timeouts are the pool's deadlines for backend operations. A start, reset
// or health check that runs out of time quarantines its VM at once.
type Timeouts struct {
	// Start bounds Backend.Start (boot or revert, wait for the guest).
	// Default 10m (a pool file of the sim backend: 2m).
	Start time.Duration `yaml:"start"`
	// Reset bounds Backend.Reset (revert or recreate, wait for the guest).
	// Default 10m (a pool file of the sim backend: 2m).
	Reset time.Duration `yaml:"reset"`
	// Health bounds one health check. Default 30s.
	Health time.Duration `yaml:"health"`
	// Stop bounds Backend.Stop of one VM at Close. Default 2m.
	Stop time.Duration `yaml:"stop"`
}

// Defaults of Config.
const (
	DefaultPoolID          = "codapipe"
	DefaultQuarantineAfter = 3
	DefaultLockRetry       = 10 * time.Second
	DefaultIdleCheck       = 2 * time.Minute
	DefaultVMRetryWait     = 5 * time.Second
	DefaultStartTimeout    = 10 * time.Minute
	DefaultResetTimeout    = 10 * time.Minute
	DefaultHealthTimeout   = 30 * time.Second
	DefaultStopTimeout     = 2 * time.Minute
)

// DefaultLockDir is where the pool's lock files go when the configuration
// names no lock_dir: $XDG_RUNTIME_DIR/codapipe-vmpool when XDG_RUNTIME_DIR
// is set (a per-user tmpfs on systemd hosts), else
// os.TempDir()/codapipe-vmpool. Every process that may drive the same VMs
// must use the same directory.
func DefaultLockDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "codapipe-vmpool")
	}
	return filepath.Join(os.TempDir(), "codapipe-vmpool")
}

// withDefaults fills in zero fields.
func (c Config) withDefaults() Config {
	c.ID = cmp.Or(c.ID, DefaultPoolID)
	c.QuarantineAfter = cmp.Or(c.QuarantineAfter, DefaultQuarantineAfter)
	c.LockDir = cmp.Or(c.LockDir, DefaultLockDir())
	c.LockRetry = cmp.Or(c.LockRetry, DefaultLockRetry)
	c.IdleCheck = cmp.Or(c.IdleCheck, DefaultIdleCheck)
	c.RetryWait = cmp.Or(c.RetryWait, DefaultVMRetryWait)
	c.Timeouts.Start = cmp.Or(c.Timeouts.Start, DefaultStartTimeout)
	c.Timeouts.Reset = cmp.Or(c.Timeouts.Reset, DefaultResetTimeout)
	c.Timeouts.Health = cmp.Or(c.Timeouts.Health, DefaultHealthTimeout)
	c.Timeouts.Stop = cmp.Or(c.Timeouts.Stop, DefaultStopTimeout)
	return c
}

// Validate reports every value of c that cannot work, as *ConfigError
// values joined (errors.As finds the first). Zero values are fine: they
// mean the defaults.
func (c Config) Validate() error {
	var errs []error
	bad := func(field, format string, args ...any) {
		errs = append(errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	if c.ID != "" && !ValidID(c.ID) {
		bad("id", "%q: want letters, digits, '.', '_' and '-', starting with a letter or digit", c.ID)
	}
	if c.QuarantineAfter < 0 {
		bad("quarantine_after", "%d: want a positive number of failures in a row (default %d)", c.QuarantineAfter, DefaultQuarantineAfter)
	}
	if c.LockRetry < 0 {
		bad("lock_retry", "%v: want a positive duration", c.LockRetry)
	}
	if c.RetryWait < 0 {
		bad("retry_wait", "%v: want a positive duration", c.RetryWait)
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"start", c.Timeouts.Start}, {"reset", c.Timeouts.Reset}, {"health", c.Timeouts.Health}, {"stop", c.Timeouts.Stop}} {
		if t.d < 0 {
			bad("timeouts."+t.name, "%v: want a positive duration: every operation needs a deadline", t.d)
		}
	}
	return errors.Join(errs...)
}

var idPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,127}$`)

// ValidID reports whether id may name a pool or a VM: letters, digits,
// '.', '_' and '-', starting with a letter or digit, at most 128 bytes.
func ValidID(id string) bool { return idPattern.MatchString(id) }

// ConfigError is a configuration value that cannot work. File, Line and
// Column are set for errors of a pool file.
type ConfigError struct {
	File   string // the pool file, or ""
	Line   int    // 1-based; 0 when unknown
	Column int    // 1-based; 0 when unknown
	Field  string // "timeouts.start", "vmware.vms[1].vmx"
	Msg    string // what is wrong and what is expected
}

// Error says where the value is (file:line:column or "vmpool: config"),
// the field and what is wrong with it.
func (e *ConfigError) Error() string {
	var b strings.Builder
	switch {
	case e.File != "" && e.Line > 0:
		fmt.Fprintf(&b, "%s:%d:%d: ", e.File, e.Line, e.Column)
	case e.File != "":
		b.WriteString(e.File + ": ")
	default:
		b.WriteString("vmpool: config: ")
	}
	if e.Field != "" {
		b.WriteString(e.Field + ": ")
	}
	b.WriteString(e.Msg)
	return b.String()
}
