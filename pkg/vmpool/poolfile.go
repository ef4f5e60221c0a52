package vmpool

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// PoolConfig describes a pool: its backend, its VMs and its policy. It is
// what a pool file holds (see LoadPoolFile and docs/vmpool.md); the yaml
// tags are the file's field names. Zero values mean the defaults.
type PoolConfig struct {
	// ID names the pool: it labels the docker backend's containers and
	// appears in logs. Default: the pool file's name without extension, or
	// "codapipe".
	ID string `yaml:"id"`
	// Backend is "sim", "guest", "vmware" or "docker"; the section of the
	// same name configures it.
	Backend string `yaml:"backend"`
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

	Sim    *SimConfig        `yaml:"sim"`
	Guest  *GuestHostsConfig `yaml:"guest"`
	VMware *VMwareConfig     `yaml:"vmware"`
	Docker *DockerConfig     `yaml:"docker"`
}

// Timeouts are the pool's deadlines for backend operations. A start, reset
// or health check that runs out of time quarantines its VM at once.
type Timeouts struct {
	// Start bounds Backend.Start (boot or revert, wait for the guest).
	// Default 10m (sim: 2m).
	Start time.Duration `yaml:"start"`
	// Reset bounds Backend.Reset (revert or recreate, wait for the guest).
	// Default 10m (sim: 2m).
	Reset time.Duration `yaml:"reset"`
	// Health bounds one health check. Default 30s.
	Health time.Duration `yaml:"health"`
	// Stop bounds Backend.Stop of one VM at Close. Default 2m.
	Stop time.Duration `yaml:"stop"`
}

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

// Defaults of PoolConfig.
const (
	DefaultPoolID          = "codapipe"
	DefaultQuarantineAfter = 3
	DefaultLockRetry       = 10 * time.Second
	DefaultIdleCheck       = 2 * time.Minute
	DefaultVMRetryWait     = 5 * time.Second
	DefaultStartTimeout    = 10 * time.Minute
	DefaultResetTimeout    = 10 * time.Minute
	DefaultSimTimeout      = 2 * time.Minute
	DefaultHealthTimeout   = 30 * time.Second
	DefaultStopTimeout     = 2 * time.Minute
)

// withDefaults fills in zero fields.
func (c PoolConfig) withDefaults() PoolConfig {
	c.ID = orDefault(c.ID, DefaultPoolID)
	c.QuarantineAfter = orDefault(c.QuarantineAfter, DefaultQuarantineAfter)
	c.LockDir = orDefault(c.LockDir, DefaultLockDir())
	c.LockRetry = orDefault(c.LockRetry, DefaultLockRetry)
	c.IdleCheck = orDefault(c.IdleCheck, DefaultIdleCheck)
	c.RetryWait = orDefault(c.RetryWait, DefaultVMRetryWait)
	start, reset := DefaultStartTimeout, DefaultResetTimeout
	if c.Backend == BackendSim {
		start, reset = DefaultSimTimeout, DefaultSimTimeout
	}
	c.Timeouts.Start = orDefault(c.Timeouts.Start, start)
	c.Timeouts.Reset = orDefault(c.Timeouts.Reset, reset)
	c.Timeouts.Health = orDefault(c.Timeouts.Health, DefaultHealthTimeout)
	c.Timeouts.Stop = orDefault(c.Timeouts.Stop, DefaultStopTimeout)
	if c.Sim != nil {
		s := c.Sim.withDefaults()
		c.Sim = &s
	}
	if c.Guest != nil {
		g := c.Guest.withDefaults()
		c.Guest = &g
	}
	if c.VMware != nil {
		v := c.VMware.withDefaults()
		c.VMware = &v
	}
	if c.Docker != nil {
		d := c.Docker.withDefaults()
		c.Docker = &d
	}
	return c
}

// ConfigError is a configuration value that cannot work. File, Line and
// Column are set for errors of a pool file.
type ConfigError struct {
	File   string
	Line   int
	Column int
	Field  string // "timeouts.start", "vmware.vms[1].vmx"
	Msg    string // what is wrong and what is expected
}

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

// validator collects ConfigErrors.
type validator struct{ errs []error }

func (v *validator) add(field, format string, args ...any) {
	v.errs = append(v.errs, &ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
}

func (v *validator) err() error { return errors.Join(v.errs...) }

// Validate reports every value of c that cannot work, as *ConfigError
// values joined (errors.As finds the first). Zero values are fine: they
// mean the defaults.
func (c PoolConfig) Validate() error {
	var v validator
	c.validate(&v, true)
	return v.err()
}

// validatePool checks the pool's own fields, not the backend sections.
func (c PoolConfig) validatePool() error {
	var v validator
	c.validate(&v, false)
	return v.err()
}

func (c PoolConfig) validate(v *validator, sections bool) {
	if c.ID != "" && !idPattern.MatchString(c.ID) {
		v.add("id", "%q: want letters, digits, '.', '_' and '-', starting with a letter or digit", c.ID)
	}
	if c.QuarantineAfter < 0 {
		v.add("quarantine_after", "%d: want a positive number of failures in a row (default %d)", c.QuarantineAfter, DefaultQuarantineAfter)
	}
	if c.LockRetry < 0 {
		v.add("lock_retry", "%v: want a positive duration", c.LockRetry)
	}
	if c.RetryWait < 0 {
		v.add("retry_wait", "%v: want a positive duration", c.RetryWait)
	}
	for _, t := range []struct {
		name string
		d    time.Duration
	}{{"start", c.Timeouts.Start}, {"reset", c.Timeouts.Reset}, {"health", c.Timeouts.Health}, {"stop", c.Timeouts.Stop}} {
		if t.d < 0 {
			v.add("timeouts."+t.name, "%v: want a positive duration: every operation needs a deadline", t.d)
		}
	}
	if !sections {
		return
	}
	given := map[string]bool{BackendSim: c.Sim != nil, BackendGuest: c.Guest != nil, BackendVMware: c.VMware != nil, BackendDocker: c.Docker != nil}
	switch c.Backend {
	case BackendSim, BackendGuest, BackendVMware, BackendDocker:
		if !given[c.Backend] {
			v.add(c.Backend, "missing; backend is %s, so its section is needed (see docs/vmpool.md)", c.Backend)
		}
	case "":
		v.add("backend", "missing; want one of sim, guest, vmware, docker")
	default:
		v.add("backend", "%q: want one of sim, guest, vmware, docker", c.Backend)
	}
	for _, name := range []string{BackendSim, BackendGuest, BackendVMware, BackendDocker} {
		if given[name] && name != c.Backend && c.Backend != "" {
			v.add(name, "section given but backend is %q; remove it or set backend: %s", c.Backend, name)
		}
	}
	if c.Sim != nil {
		c.Sim.validate(v, "sim")
	}
	if c.Guest != nil {
		c.Guest.validate(v, "guest")
	}
	if c.VMware != nil {
		c.VMware.validate(v, "vmware")
	}
	if c.Docker != nil {
		c.Docker.validate(v, "docker")
	}
}

// MaxPoolFileSize is the largest pool file LoadPoolFile reads.
const MaxPoolFileSize = 1 << 20

// LoadPoolFile reads and checks a pool file (YAML; JSON is accepted, as
// YAML). Relative paths in it (lock_dir, vmx, disk_image) are taken
// relative to the file's directory; the pool id defaults to the file's name
// without extension. Errors name the file, line, field and the expected
// value (*ConfigError).
func LoadPoolFile(path string) (PoolConfig, error) {
	f, err := os.Open(path)
	if err != nil {
		return PoolConfig{}, fmt.Errorf("vmpool: pool file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxPoolFileSize+1))
	if err != nil {
		return PoolConfig{}, fmt.Errorf("vmpool: pool file %s: %w", path, err)
	}
	if len(data) > MaxPoolFileSize {
		return PoolConfig{}, &ConfigError{File: path, Msg: fmt.Sprintf("larger than %d bytes; is this a pool file?", MaxPoolFileSize)}
	}
	cfg, err := ParsePoolFile(path, data)
	if err != nil {
		return cfg, err
	}
	if cfg.ID == "" {
		stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if idPattern.MatchString(stem) {
			cfg.ID = stem
		}
	}
	dir := filepath.Dir(path)
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&cfg.LockDir)
	if cfg.VMware != nil {
		for i := range cfg.VMware.VMs {
			abs(&cfg.VMware.VMs[i].VMX)
		}
	}
	if cfg.Docker != nil {
		abs(&cfg.Docker.DiskImage)
	}
	return cfg, nil
}

// ParsePoolFile parses and checks the contents of a pool file; name is
// used in error messages. Paths are left as written.
func ParsePoolFile(name string, data []byte) (PoolConfig, error) {
	var cfg PoolConfig
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return cfg, &ConfigError{File: name, Msg: "empty file; want at least \"backend: sim|guest|vmware|docker\" and that backend's section"}
	}
	if trimmed[0] == '{' {
		// JSON: a raw tab cannot occur inside a JSON string, so every tab is
		// indentation, which YAML does not allow; make it a space.
		data = bytes.ReplaceAll(data, []byte("\t"), []byte(" "))
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		return cfg, yamlError(name, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return cfg, yamlError(name, err)
		}
		return cfg, &ConfigError{File: name, Line: extra.Line, Column: extra.Column, Msg: "a second YAML document; want one pool per file"}
	}
	d := &decoder{file: name, pos: map[string][2]int{}}
	if err := d.decode(&doc, reflect.ValueOf(&cfg).Elem(), ""); err != nil {
		return PoolConfig{}, err
	}
	if err := cfg.Validate(); err != nil {
		var out []error
		for _, e := range flatten(err) {
			var ce *ConfigError
			if errors.As(e, &ce) {
				c := *ce
				c.File = name
				c.Line, c.Column = d.position(c.Field)
				e = &c
			}
			out = append(out, e)
		}
		return PoolConfig{}, errors.Join(out...)
	}
	return cfg, nil
}

func flatten(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

// yamlError turns a YAML syntax error into a ConfigError.
func yamlError(name string, err error) error {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "yaml: ")
	ce := &ConfigError{File: name, Msg: "not valid YAML: " + msg}
	// "line 3: did not find expected key"
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if i := strings.IndexByte(rest, ':'); i > 0 {
			if n, err := strconv.Atoi(rest[:i]); err == nil {
				ce.Line, ce.Column = n, 1
				ce.Msg = "not valid YAML: " + strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return ce
}

// decoder maps a YAML node tree onto Go values by yaml tags, strictly:
// unknown fields and wrong types are errors naming the field, the line and
// what is expected.
type decoder struct {
	file  string
	pos   map[string][2]int // field path → line, column
	nodes int
}

// maxNodes bounds the work on one file (aliases can multiply it).
const maxNodes = 100_000

var durationType = reflect.TypeOf(time.Duration(0))

// position is the line and column of field, or of its nearest parent that
// the file names.
func (d *decoder) position(field string) (int, int) {
	for f := field; ; {
		if p, ok := d.pos[f]; ok {
			return p[0], p[1]
		}
		i := strings.LastIndexAny(f, ".[")
		if i < 0 {
			if p, ok := d.pos[""]; ok && f != "" {
				return p[0], p[1]
			}
			return 0, 0
		}
		f = f[:i]
	}
}

func (d *decoder) fail(n *yaml.Node, path, format string, args ...any) error {
	return &ConfigError{File: d.file, Line: n.Line, Column: n.Column, Field: path, Msg: fmt.Sprintf(format, args...)}
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func (d *decoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	d.nodes++
	if d.nodes > maxNodes {
		return d.fail(n, path, "too many nodes (more than %d; aliases?)", maxNodes)
	}
	for depth := 0; n.Kind == yaml.AliasNode; depth++ {
		if n.Alias == nil || depth > 100 {
			return d.fail(n, path, "bad alias")
		}
		n = n.Alias
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return d.fail(n, path, "empty document")
		}
		return d.decode(n.Content[0], v, path)
	}
	if _, ok := d.pos[path]; !ok {
		d.pos[path] = [2]int{n.Line, n.Column}
	}
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null" {
		v.Set(reflect.Zero(v.Type()))
		return nil
	}
	if v.Type() == durationType {
		return d.duration(n, v, path)
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return d.decode(n, v.Elem(), path)
	case reflect.Struct:
		return d.structure(n, v, path)
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return d.fail(n, path, "want a list (- item lines, or [a, b]), got %s", describe(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, item := range n.Content {
			if err := d.decode(item, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return d.fail(n, path, "want a mapping (NAME: value lines), got %s", describe(n))
		}
		m := reflect.MakeMapWithSize(v.Type(), len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind != yaml.ScalarNode {
				return d.fail(k, path, "want plain keys")
			}
			ev := reflect.New(v.Type().Elem()).Elem()
			if err := d.decode(val, ev, join(path, k.Value)); err != nil {
				return err
			}
			m.SetMapIndex(reflect.ValueOf(k.Value).Convert(v.Type().Key()), ev)
		}
		v.Set(m)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return d.fail(n, path, "want %s, got %s", kindName(v.Kind()), describe(n))
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(n.Value)
	case reflect.Int, reflect.Int64, reflect.Int32:
		var i int64
		if n.ShortTag() != "!!int" || n.Decode(&i) != nil || v.OverflowInt(i) {
			return d.fail(n, path, "%q: want a whole number", n.Value)
		}
		v.SetInt(i)
	case reflect.Bool:
		var b bool
		if n.ShortTag() != "!!bool" || n.Decode(&b) != nil {
			return d.fail(n, path, "%q: want true or false", n.Value)
		}
		v.SetBool(b)
	case reflect.Float64:
		var f float64
		if (n.ShortTag() != "!!float" && n.ShortTag() != "!!int") || n.Decode(&f) != nil {
			return d.fail(n, path, "%q: want a number", n.Value)
		}
		v.SetFloat(f)
	default:
		return d.fail(n, path, "unsupported field type %s", v.Type())
	}
	return nil
}

func (d *decoder) structure(n *yaml.Node, v reflect.Value, path string) error {
	if n.Kind != yaml.MappingNode {
		return d.fail(n, path, "want a mapping (field: value lines), got %s", describe(n))
	}
	t := v.Type()
	fields := map[string]int{}
	var names []string
	for i := 0; i < t.NumField(); i++ {
		tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
		if tag == "" || tag == "-" || !t.Field(i).IsExported() {
			continue
		}
		fields[tag] = i
		names = append(names, tag)
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, val := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode {
			return d.fail(k, path, "want plain field names")
		}
		fp := join(path, k.Value)
		idx, ok := fields[k.Value]
		if !ok {
			return d.fail(k, fp, "unknown field; want one of: %s", strings.Join(names, ", "))
		}
		// Errors about a value point at it; about a section, at its name.
		if val.Kind == yaml.MappingNode {
			d.pos[fp] = [2]int{k.Line, k.Column}
		} else {
			d.pos[fp] = [2]int{val.Line, val.Column}
		}
		if err := d.decode(val, v.Field(idx), fp); err != nil {
			return err
		}
	}
	return nil
}

// duration accepts Go durations ("30s", "5m", "1h30m"), plain numbers of
// seconds, and "off" (-1, for fields where negative disables).
func (d *decoder) duration(n *yaml.Node, v reflect.Value, path string) error {
	const want = "want a duration such as 30s, 5m or 1h30m (a plain number is seconds)"
	if n.Kind != yaml.ScalarNode {
		return d.fail(n, path, "%s, got %s", want, describe(n))
	}
	s := strings.TrimSpace(n.Value)
	switch {
	case s == "off" || s == "none" || s == "never":
		v.SetInt(-1)
		return nil
	case n.ShortTag() == "!!int" || n.ShortTag() == "!!float":
		f, err := strconv.ParseFloat(s, 64)
		if err != nil || f > float64(1<<62)/float64(time.Second) || f < -float64(1<<62)/float64(time.Second) {
			return d.fail(n, path, "%q: %s", n.Value, want)
		}
		v.SetInt(int64(f * float64(time.Second)))
		return nil
	}
	dur, err := time.ParseDuration(s)
	if err != nil {
		return d.fail(n, path, "%q: %s", n.Value, want)
	}
	v.SetInt(int64(dur))
	return nil
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		v := n.Value
		if len(v) > 40 {
			v = v[:37] + "..."
		}
		return fmt.Sprintf("%q", v)
	}
	return "something else"
}

func kindName(k reflect.Kind) string {
	switch k {
	case reflect.String:
		return "a string"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "a whole number"
	case reflect.Bool:
		return "true or false"
	case reflect.Float64:
		return "a number"
	}
	return k.String()
}
