// Package poolfile reads pool files and builds the pools they describe. A
// pool file (YAML; JSON is accepted too) holds a pool's policy
// (vmpool.Config) and the section of one backend: "sim", "guest",
// "vmware" or "docker". This package maps the file's "backend:" to the
// backend's constructor; docs/vmpool.md describes every field.
package poolfile

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"go.yaml.in/yaml/v3"

	"github.com/codapipe/codapipe/pkg/vmpool"
	"github.com/codapipe/codapipe/pkg/vmpool/docker"
	"github.com/codapipe/codapipe/pkg/vmpool/hosts"
	"github.com/codapipe/codapipe/pkg/vmpool/simvm"
	"github.com/codapipe/codapipe/pkg/vmpool/vmware"
)

// Config is what a pool file holds: a pool's policy and one backend's
// section. Build one in code to describe a pool the same way (the rollout
// command does for its simulated VMs). The yaml tags are the file's field
// names; zero values mean the defaults.
type Config struct {
	// Backend is "sim", "guest", "vmware" or "docker"; the section of the
	// same name configures it.
	Backend string `yaml:"backend"`
	// Pool is the pool's policy; its fields sit at the top level of the
	// file.
	Pool vmpool.Config `yaml:",inline"`

	// The backends' sections: the one that Backend names is needed, the
	// others must be nil.
	Sim    *simvm.Config  `yaml:"sim"`    // backend: sim
	Guest  *hosts.Config  `yaml:"guest"`  // backend: guest
	VMware *vmware.Config `yaml:"vmware"` // backend: vmware
	Docker *docker.Config `yaml:"docker"` // backend: docker
}

// backends are the backends' names, in the order messages list them.
var backends = []string{simvm.Name, hosts.Name, vmware.Name, docker.Name}

// sections are c's backend sections by backend name; a section the file
// does not give is nil.
func (c Config) sections() map[string]interface{ Validate() error } {
	s := map[string]interface{ Validate() error }{}
	if c.Sim != nil {
		s[simvm.Name] = c.Sim
	}
	if c.Guest != nil {
		s[hosts.Name] = c.Guest
	}
	if c.VMware != nil {
		s[vmware.Name] = c.VMware
	}
	if c.Docker != nil {
		s[docker.Name] = c.Docker
	}
	return s
}

// Validate reports every value of c that cannot work — the pool's policy,
// the backend's name and section, sections of other backends — as
// *vmpool.ConfigError values joined (errors.As finds the first).
func (c Config) Validate() error {
	errs := flatten(c.Pool.Validate())
	bad := func(field, format string, args ...any) {
		errs = append(errs, &vmpool.ConfigError{Field: field, Msg: fmt.Sprintf(format, args...)})
	}
	sections := c.sections()
	switch {
	case c.Backend == "":
		bad("backend", "missing; want one of %s", strings.Join(backends, ", "))
	case !slices.Contains(backends, c.Backend):
		bad("backend", "%q: want one of %s", c.Backend, strings.Join(backends, ", "))
	case sections[c.Backend] == nil:
		bad(c.Backend, "missing; backend is %s, so its section is needed (see docs/vmpool.md)", c.Backend)
	}
	for _, name := range backends {
		if sections[name] != nil && name != c.Backend && c.Backend != "" {
			bad(name, "section given but backend is %q; remove it or set backend: %s", c.Backend, name)
		}
	}
	for _, name := range backends {
		if s := sections[name]; s != nil {
			errs = append(errs, flatten(s.Validate())...)
		}
	}
	return errors.Join(errs...)
}

// flatten lists the errors that err joins, at any depth; nil for nil.
func flatten(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, flatten(e)...)
	}
	return out
}

// NewBackend builds the backend that c.Backend names from its section of
// c. log may be nil.
func NewBackend(c Config, log *slog.Logger) (vmpool.Backend, error) {
	if log == nil {
		log = slog.Default()
	}
	missing := func(section, want string) error {
		return &vmpool.ConfigError{Field: section, Msg: "missing; want the " + want}
	}
	switch c.Backend {
	case simvm.Name:
		if c.Sim == nil {
			return nil, missing("sim", "simulator section (vms: [{url: ...}])")
		}
		return simvm.New(*c.Sim)
	case hosts.Name:
		if c.Guest == nil {
			return nil, missing("guest", "guest section (vms: [{url: ...}])")
		}
		return hosts.New(*c.Guest, log)
	case vmware.Name:
		if c.VMware == nil {
			return nil, missing("vmware", "vmware section (vms: [{vmx: ...}])")
		}
		return vmware.New(*c.VMware, log)
	case docker.Name:
		if c.Docker == nil {
			return nil, missing("docker", "docker section (image, count, ...)")
		}
		return docker.New(c.Pool.ID, c.Pool.LockDir, *c.Docker, log)
	case "":
		return nil, &vmpool.ConfigError{Field: "backend", Msg: "missing; want one of " + strings.Join(backends, ", ")}
	}
	return nil, &vmpool.ConfigError{Field: "backend", Msg: fmt.Sprintf("%q is not a backend; want one of %s", c.Backend, strings.Join(backends, ", "))}
}

// NewPool checks c, builds its backend and returns the pool over it
// (vmpool.NewPool, which starts bringing the VMs up in the background).
// log (nil: slog.Default()) is the pool's and the backend's logger; opts
// are the pool's further options.
func NewPool(ctx context.Context, c Config, log *slog.Logger, opts ...vmpool.Option) (*vmpool.Pool, error) {
	if log == nil {
		log = slog.Default()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	pc := c.Pool
	if c.Backend == simvm.Name {
		// A simulated VM reverts in seconds: a start or reset that takes
		// minutes is stuck.
		pc.Timeouts.Start = cmp.Or(pc.Timeouts.Start, simvm.DefaultTimeout)
		pc.Timeouts.Reset = cmp.Or(pc.Timeouts.Reset, simvm.DefaultTimeout)
	}
	b, err := NewBackend(c, log.With("pool", cmp.Or(pc.ID, vmpool.DefaultPoolID), "backend", c.Backend))
	if err != nil {
		return nil, err
	}
	return vmpool.NewPool(ctx, pc, b, append([]vmpool.Option{vmpool.WithLogger(log)}, opts...)...)
}

// MaxSize is the largest pool file Load reads.
const MaxSize = 1 << 20

// Load reads and checks a pool file (YAML; JSON is accepted, as YAML).
// Relative paths in it (lock_dir, vmx, disk_image) are taken relative to
// the file's directory; the pool id defaults to the file's name without
// extension. Errors name the file, line, field and the expected value
// (*vmpool.ConfigError).
func Load(path string) (Config, error) {
	f, err := os.Open(path)
	if err != nil {
		return Config{}, fmt.Errorf("vmpool: pool file: %w", err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSize+1))
	if err != nil {
		return Config{}, fmt.Errorf("vmpool: pool file %s: %w", path, err)
	}
	if len(data) > MaxSize {
		return Config{}, &vmpool.ConfigError{File: path, Msg: fmt.Sprintf("larger than %d bytes; is this a pool file?", MaxSize)}
	}
	cfg, err := Parse(path, data)
	if err != nil {
		return cfg, err
	}
	if cfg.Pool.ID == "" {
		stem := strings.TrimSuffix(filepath.Base(path), filepath.Ext(path))
		if vmpool.ValidID(stem) {
			cfg.Pool.ID = stem
		}
	}
	dir := filepath.Dir(path)
	abs := func(p *string) {
		if *p != "" && !filepath.IsAbs(*p) {
			*p = filepath.Join(dir, *p)
		}
	}
	abs(&cfg.Pool.LockDir)
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

// Parse parses and checks the contents of a pool file; name is used in
// error messages. Paths are left as written.
func Parse(name string, data []byte) (Config, error) {
	var cfg Config
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return cfg, &vmpool.ConfigError{File: name, Msg: "empty file; want at least \"backend: sim|guest|vmware|docker\" and that backend's section"}
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
		return cfg, &vmpool.ConfigError{File: name, Line: extra.Line, Column: extra.Column, Msg: "a second YAML document; want one pool per file"}
	}
	d := &decoder{file: name, pos: map[string][2]int{}}
	if err := d.decode(&doc, reflect.ValueOf(&cfg).Elem(), ""); err != nil {
		return Config{}, err
	}
	if err := cfg.Validate(); err != nil {
		var out []error
		for _, e := range flatten(err) {
			var ce *vmpool.ConfigError
			if errors.As(e, &ce) {
				c := *ce
				c.File = name
				c.Line, c.Column = d.position(c.Field)
				e = &c
			}
			out = append(out, e)
		}
		return Config{}, errors.Join(out...)
	}
	return cfg, nil
}
