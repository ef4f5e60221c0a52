package scienceboard

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/codapipe/codapipe/pkg/traj"
)

// placeholderRE matches a placeholder «NAME» as used in task commands, e.g.
// «PORTLIKE». Any run of non-space characters between the guillemets counts,
// so that a misspelt name is reported rather than passed to the guest.
var placeholderRE = regexp.MustCompile(`«([^«»\s]+)»`)

// PlaceholderNames returns the distinct placeholder names in s, in order of
// first appearance.
func PlaceholderNames(s string) []string {
	var names []string
	seen := map[string]bool{}
	for _, m := range placeholderRE.FindAllStringSubmatch(s, -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			names = append(names, m[1])
		}
	}
	return names
}

// ExpandString replaces every placeholder «NAME» in s by values[NAME]. A
// name missing from values is an error naming it and the known names.
func ExpandString(s string, values map[string]string) (string, error) {
	var missing []string
	out := placeholderRE.ReplaceAllStringFunc(s, func(m string) string {
		name := m[len("«") : len(m)-len("»")]
		v, ok := values[name]
		if !ok {
			missing = append(missing, name)
			return m
		}
		return v
	})
	if len(missing) > 0 {
		return "", fmt.Errorf("unknown placeholder «%s» (known: %s)", missing[0], knownNames(values))
	}
	return out, nil
}

func knownNames(values map[string]string) string {
	if len(values) == 0 {
		return "none given"
	}
	return strings.Join(slices.Sorted(maps.Keys(values)), ", ")
}

// Placeholders returns the sorted distinct placeholder names used in the
// "command" fields of the task's initialize items.
func (t *Task) Placeholders() []string {
	seen := map[string]bool{}
	for _, it := range t.Initialize {
		for _, s := range commandStrings(it.Raw) {
			for _, n := range PlaceholderNames(s) {
				seen[n] = true
			}
		}
	}
	names := make([]string, 0, len(seen))
	for n := range seen {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ExpandPlaceholders returns a copy of the task in which every placeholder
// «NAME» in the "command" field (string or list of strings) of every
// initialize item, typed or not, is replaced by values[NAME]; the item's Raw
// and typed form are both updated. Other fields (touch texts, checks) are
// never expanded. The receiver is not modified; the copy shares the data of
// unchanged items, which callers must treat as read-only. An unknown name is
// an error naming the item and the placeholder; all such errors are joined.
func (t *Task) ExpandPlaceholders(values map[string]string) (*Task, error) {
	c := *t
	c.Initialize = append([]InitItem(nil), t.Initialize...)
	c.Evaluate = append([]Check(nil), t.Evaluate...)
	var errs []error
	for i, it := range t.Initialize {
		raw, changed, err := expandCommand(it.Raw, values)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: initialize[%d]: command: %w", t.ID, i, err))
			continue
		}
		if changed {
			c.Initialize[i] = parseInitItem(t.App, raw)
		}
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	c.refreshUnsupported()
	return &c, nil
}

func (t *Task) refreshUnsupported() {
	t.Unsupported = []string{}
	for i, it := range t.Initialize {
		if it.Issue != "" {
			t.Unsupported = append(t.Unsupported, fmt.Sprintf("initialize[%d]: %s", i, it.Issue))
		}
	}
	t.Unsupported = append(t.Unsupported, Unsupported(t)...)
}

// commandStrings returns the strings of an item's "command" field when it is
// a string or a list of strings.
func commandStrings(raw json.RawMessage) []string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return nil
	}
	cmdRaw, ok := fields["command"]
	if !ok {
		return nil
	}
	var cmd Command
	if json.Unmarshal(cmdRaw, &cmd) != nil {
		return nil
	}
	if cmd.IsArgv() {
		return cmd.Argv
	}
	return []string{cmd.Line}
}

// expandCommand expands the placeholders of the "command" field of an item
// and returns the rebuilt item JSON when anything changed.
func expandCommand(raw json.RawMessage, values map[string]string) (json.RawMessage, bool, error) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil {
		return raw, false, nil
	}
	cmdRaw, ok := fields["command"]
	if !ok {
		return raw, false, nil
	}
	var cmd Command
	if json.Unmarshal(cmdRaw, &cmd) != nil {
		return raw, false, nil
	}
	changed := false
	expand := func(s string) (string, error) {
		if !placeholderRE.MatchString(s) {
			return s, nil
		}
		changed = true
		return ExpandString(s, values)
	}
	var err error
	if cmd.IsArgv() {
		argv := make([]string, len(cmd.Argv))
		for i, a := range cmd.Argv {
			if argv[i], err = expand(a); err != nil {
				return nil, false, err
			}
		}
		cmd.Argv = argv
	} else if cmd.Line, err = expand(cmd.Line); err != nil {
		return nil, false, err
	}
	if !changed {
		return raw, false, nil
	}
	b, err := cmd.MarshalJSON()
	if err != nil {
		return nil, false, err
	}
	fields["command"] = b
	out, err := traj.MarshalCompact(fields)
	if err != nil {
		return nil, false, err
	}
	return out, true, nil
}
