package service

import (
	"cmp"
	"flag"
	"fmt"
	"slices"
	"strings"

	"github.com/codapipe/codapipe/pkg/grpo"
)

// The sections of --help the commands share (Flags.Group).
const (
	GroupEndpoints = "Endpoints"
	GroupSampling  = "Sampling"
	GroupPool      = "Pool"
	GroupSim       = "Simulator"
	GroupRun       = "Run control"
	GroupOutput    = "Output"
	GroupBus       = "Bus and storage"
)

// Group starts a section of --help: the flags defined after it, until
// the next Group, are listed under name. A group started again adds to
// its section. Flags defined before any Group are listed under "Flags".
func (f *Flags) Group(name string) {
	f.assignGroups()
	f.group = name
	if !slices.Contains(f.groups, name) {
		f.groups = append(f.groups, name)
	}
}

// assignGroups puts every flag defined since the last call in the
// current group.
func (f *Flags) assignGroups() {
	if f.groupOf == nil {
		f.groupOf = map[string]string{}
	}
	f.VisitAll(func(fl *flag.Flag) {
		if _, ok := f.groupOf[fl.Name]; !ok {
			f.groupOf[fl.Name] = f.group
		}
	})
}

// Usage returns the flags as --help prints them: those without a group
// under "Flags:", then each group's under its name, in the order the
// groups were started, each flag once with its default and variable
// (as flag.PrintDefaults writes them); an empty section is left out.
func (f *Flags) Usage() string {
	f.assignGroups()
	var b strings.Builder
	for _, g := range append([]string{""}, f.groups...) {
		section := flag.NewFlagSet(f.Name(), flag.ContinueOnError)
		f.VisitAll(func(fl *flag.Flag) {
			if f.groupOf[fl.Name] == g {
				section.Var(fl.Value, fl.Name, fl.Usage)
				section.Lookup(fl.Name).DefValue = fl.DefValue // the default, not the value so far
			}
		})
		if !hasFlags(section) {
			continue
		}
		if b.Len() > 0 {
			b.WriteString("\n")
		}
		b.WriteString(cmp.Or(g, "Flags") + ":\n")
		section.SetOutput(&b)
		section.PrintDefaults()
	}
	return b.String()
}

func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// nearest returns the flag whose name is nearest to name by edit
// distance, when it is near enough to be a typo of it (at most 2 edits,
// or a third of name's length), else "".
func (f *Flags) nearest(name string) string {
	best, bestD := "", max(2, len(name)/3)+1
	if len(name) < 4 {
		bestD = 2
	}
	f.VisitAll(func(fl *flag.Flag) {
		if d := grpo.EditDistance(name, fl.Name); d < bestD {
			best, bestD = fl.Name, d
		}
	})
	return best
}

// flagError is what Main prints for arguments its flags cannot parse: the
// error, the nearest flag's name for an unknown one, and where the flags
// are listed — not the whole list.
func (c Command) flagError(fs *Flags, err error) string {
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name = strings.TrimLeft(name, "-")
		msg = "unknown flag --" + name
		if near := fs.nearest(name); near != "" {
			msg += "; did you mean --" + near + "?"
		}
	}
	return fmt.Sprintf("%s: %s\nRun '%s --help' for its usage and flags.\n", c.Name, msg, c.Name)
}
