package scienceboard

import (
	"errors"
	"fmt"
	"github.com/codapipe/codapipe/internal/contract/scienceboard/appname"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
)

// ErrNoTasks is returned (wrapped) when a directory holds no task files.
var ErrNoTasks = errors.New("no task files (*.json)")

// DuplicateIDError reports two files that yield the same task id.
type DuplicateIDError struct {
	ID string
	// First is the file that was kept, Second the one that was dropped.
	First, Second string
}

func (e *DuplicateIDError) Error() string {
	return fmt.Sprintf("duplicate task id %q: %s and %s", e.ID, e.First, e.Second)
}

// Set is a collection of tasks sorted by ID. It is not modified after
// construction and is safe for concurrent readers.
type Set struct {
	// Tasks holds the tasks sorted by ID.
	Tasks []Task
	byID  map[string]int
}

// NewSet builds a set from tasks, sorting them by ID. Duplicate ids are an
// error (a *DuplicateIDError per duplicate, joined); the first task with an
// id is kept.
func NewSet(tasks []Task) (*Set, error) {
	s := &Set{Tasks: make([]Task, 0, len(tasks)), byID: make(map[string]int, len(tasks))}
	var errs []error
	seen := map[string]string{}
	for _, t := range tasks {
		if first, dup := seen[t.ID]; dup {
			errs = append(errs, &DuplicateIDError{ID: t.ID, First: first, Second: t.Path})
			continue
		}
		seen[t.ID] = t.Path
		s.Tasks = append(s.Tasks, t)
	}
	sort.SliceStable(s.Tasks, func(i, j int) bool { return s.Tasks[i].ID < s.Tasks[j].ID })
	for i, t := range s.Tasks {
		s.byID[t.ID] = i
	}
	return s, errors.Join(errs...)
}

// LoadDir loads every task file under path, which may be the benchmark's
// tasks root, any folder beneath it (e.g. tasks/VM or tasks/VM/ChimeraX), or
// a single task file. Directories are walked in lexical order for files
// ending in .json; directories whose name starts with "." are skipped.
//
// Every bad file is reported: the error joins one *FileError per problem and
// one *DuplicateIDError per duplicate id. The returned Set then still holds
// the tasks that loaded, so callers may choose to go on; it is nil only when
// path itself cannot be read or holds no task files (ErrNoTasks).
func LoadDir(path string) (*Set, error) { return LoadDirLimits(path, Limits{}) }

// LoadDirLimits is LoadDir with the Limits a task file may not pass.
func LoadDirLimits(path string, lim Limits) (*Set, error) {
	files, err := taskFiles(path)
	if err != nil {
		return nil, err
	}
	var errs []error
	tasks := make([]Task, 0, len(files))
	for _, f := range files {
		t, err := loadFile(f, lim)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		tasks = append(tasks, *t)
	}
	set, err := NewSet(tasks)
	if err != nil {
		errs = append(errs, err)
	}
	return set, errors.Join(errs...)
}

func taskFiles(path string) ([]string, error) {
	info, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("loading tasks: %w", err)
	}
	if !info.IsDir() {
		return []string{path}, nil
	}
	var files []string
	err = filepath.WalkDir(path, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != path && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.EqualFold(filepath.Ext(p), ".json") {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 { // follow links to files only
			if fi, err := os.Stat(p); err == nil && !fi.Mode().IsRegular() {
				return nil // a dangling link is kept so that loading reports it
			}
		} else if !d.Type().IsRegular() {
			return nil
		}
		files = append(files, p)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("loading tasks: %w", err)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("%w under %s", ErrNoTasks, path)
	}
	sort.Strings(files)
	return files, nil
}

// Len returns the number of tasks.
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.Tasks)
}

// ByID returns the task with the given id. An exact match wins; otherwise a
// case-insensitive match is returned when it is unique.
func (s *Set) ByID(id string) (*Task, bool) {
	if s == nil {
		return nil, false
	}
	if i, ok := s.byID[id]; ok {
		return &s.Tasks[i], true
	}
	var found *Task
	for i := range s.Tasks {
		if strings.EqualFold(s.Tasks[i].ID, id) {
			if found != nil {
				return nil, false
			}
			found = &s.Tasks[i]
		}
	}
	return found, found != nil
}

// Apps returns the sorted distinct app names of the set.
func (s *Set) Apps() []string {
	return slices.Sorted(maps.Keys(s.Counts()))
}

// Counts returns the number of tasks per app.
func (s *Set) Counts() map[string]int {
	counts := map[string]int{}
	if s == nil {
		return counts
	}
	for _, t := range s.Tasks {
		counts[t.App]++
	}
	return counts
}

// Filter returns the tasks of one app, the app name matched as
// appname.Canonical matches it among the set's apps (exactly, else ignoring
// case). An empty name returns the whole set. An app not in the set is an
// error listing the apps that are.
func (s *Set) Filter(app string) (*Set, error) {
	if app == "" {
		return s, nil
	}
	app, err := appname.Canonical(app, s.Apps()...)
	if err != nil {
		return nil, err
	}
	var tasks []Task
	for _, t := range s.Tasks {
		if t.App == app {
			tasks = append(tasks, t)
		}
	}
	return NewSet(tasks)
}
