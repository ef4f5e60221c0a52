// Command dupcount runs the `duplicates` command (the developers' tool that
// lists pairs of places sharing six or more lines) over a copy of the
// tree in which every line of a Go grouped import block is written as a
// single-line import, at the same line number.
//
// duplicates passes over import lines, but it does not see the lines of a
// grouped `import ( ... )` block as such: two files that import the same
// six standard packages in a row count as a pair, and most of its raw
// count is such pairs. dupcount measures what the tool means to measure;
// the rows it prints name the real files and lines (the copy keeps every
// line where it was).
//
//	go run ./tools/dupcount [-rev REV] [duplicates flags...]
//
// With -rev, the tree is that git revision (git archive); without it, the
// files git tracks in the working tree, as they are. The flags after it
// go to duplicates as they are (for example --most 200 --seconds 300);
// -rev must come first.
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

func main() {
	rev, args := "", os.Args[1:]
	if len(args) >= 2 && (args[0] == "-rev" || args[0] == "--rev") {
		rev, args = args[1], args[2:]
	}
	if err := run(rev, args); err != nil {
		fmt.Fprintln(os.Stderr, "dupcount:", err)
		os.Exit(1)
	}
}

func run(rev string, args []string) error {
	dir, err := os.MkdirTemp("", "dupcount-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if rev != "" {
		err = copyRevision(rev, dir)
	} else {
		err = copyTracked(dir)
	}
	if err != nil {
		return err
	}
	cmd := exec.Command("duplicates", append([]string{"--repo", dir}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("duplicates: %w", err)
	}
	// The rows name the copy's paths relative to --repo already; any
	// absolute mention of the copy is put back to the tree's.
	_, err = io.WriteString(os.Stdout, strings.ReplaceAll(out.String(), dir+"/", ""))
	return err
}

// copyTracked copies the files git tracks below the working directory
// into dir, Go files with their import blocks flattened.
func copyTracked(dir string) error {
	list, err := exec.Command("git", "ls-files", "-z").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimRight(string(list), "\x00"), "\x00") {
		if name == "" {
			continue
		}
		fi, err := os.Lstat(name)
		if errors.Is(err, os.ErrNotExist) {
			continue // deleted in the working tree
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			continue // links and submodules, which duplicates leaves out too
		}
		body, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		if err := write(dir, name, body); err != nil {
			return err
		}
	}
	return nil
}

// copyRevision copies the files of git revision rev into dir, Go files
// with their import blocks flattened.
func copyRevision(rev, dir string) error {
	cmd := exec.Command("git", "archive", "--format=tar", rev)
	r, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		return err
	}
	waited := false
	defer func() { // after an early return: stop git and reap it
		if !waited {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	}()
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return fmt.Errorf("git archive %s: %w", rev, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		body, err := io.ReadAll(tr)
		if err != nil {
			return err
		}
		if err := write(dir, h.Name, body); err != nil {
			return err
		}
	}
	waited = true
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("git archive %s: %w", rev, err)
	}
	return nil
}

func write(dir, name string, body []byte) error {
	if strings.HasSuffix(name, ".go") {
		body = flattenImports(body)
	}
	path := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, body, 0o644)
}

// flattenImports rewrites each line inside a grouped import block of Go
// source as a single-line import (`import "fmt"`, `import x "y/z"`), and
// the block's opening and closing lines as blank lines, so that every
// line keeps its number. Blank and comment lines inside the block become
// blank.
func flattenImports(src []byte) []byte {
	lines := strings.Split(string(src), "\n")
	in := false
	for i, l := range lines {
		switch t := strings.TrimSpace(l); {
		case !in && strings.HasPrefix(l, "import ("):
			in, lines[i] = true, ""
		case in && strings.HasPrefix(t, ")"):
			in, lines[i] = false, ""
		case in && (t == "" || strings.HasPrefix(t, "//")):
			lines[i] = ""
		case in:
			lines[i] = "import " + t
		}
	}
	return []byte(strings.Join(lines, "\n"))
}
