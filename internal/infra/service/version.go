package service

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"sync"

	"github.com/codapipe/codapipe/internal/contract/jsonpos"
	"github.com/codapipe/codapipe/internal/infra/blob"
)

// Module is codapipe's module path.
const Module = "github.com/codapipe/codapipe"

// Unknown stands for what the binary does not record (a build with
// -buildvcs=false, -trimpath tests, `go run`).
const Unknown = "unknown"

// Build identifies a codapipe binary: what --version prints and summaries
// and manifests record.
type Build struct {
	Module  string // module path
	Version string // module version: a tag, a pseudo-version, or "(devel)" for a build from a checkout
	// Revision is the VCS revision with "+dirty" when the checkout had
	// changes; Unknown when not recorded.
	Revision string
	// Committed is the revision's commit time (RFC 3339), "" when not
	// recorded: Go records no build time.
	Committed string
	Go        string // Go version, OS and architecture: "go1.26.0 linux/amd64"
}

// Version returns the Build of the running binary, from
// runtime/debug.ReadBuildInfo.
func Version() Build { return version() }

var version = sync.OnceValue(func() Build {
	bi, _ := debug.ReadBuildInfo()
	return buildOf(bi)
})

// buildOf is the Build that bi (nil: none) describes.
func buildOf(bi *debug.BuildInfo) Build {
	b := Build{Module: Module, Version: Unknown, Revision: Unknown, Go: runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH}
	if bi == nil {
		return b
	}
	if bi.Main.Path != "" {
		b.Module = bi.Main.Path
	}
	if bi.Main.Version != "" {
		b.Version = bi.Main.Version
	}
	if bi.GoVersion != "" {
		b.Go = bi.GoVersion + " " + runtime.GOOS + "/" + runtime.GOARCH
	}
	dirty := false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			b.Revision = s.Value
		case "vcs.time":
			b.Committed = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && b.Revision != Unknown {
		b.Revision += "+dirty"
	}
	return b
}

// String is the Build in one line: "github.com/codapipe/codapipe (devel),
// revision 4158a1e…+dirty committed 2026-11-28T12:00:00Z, go1.26.0
// linux/amd64".
func (b Build) String() string {
	rev := "revision " + b.Revision
	if b.Committed != "" {
		rev += " committed " + b.Committed
	}
	return fmt.Sprintf("%s %s, %s, %s", b.Module, b.Version, rev, b.Go)
}

// WriteSummary writes v as indented JSON to path: the --summary files of
// the commands, each with the build that wrote it as its codapipe_version
// (Version().String()). The file is replaced atomically (a temporary
// file renamed), with the data file mode (blob.FileMode), its folder
// created when missing.
func WriteSummary(path string, v any) error {
	var body bytes.Buffer
	enc := json.NewEncoder(&body)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(v); err != nil {
		return fmt.Errorf("summary %s: %w", path, err)
	}
	return writeFileAtomic(path, body.Bytes())
}

// ReadJSON decodes the JSON file at path strictly into v: a field v does
// not have, or a second document after the first, is an error, and an
// error names the file, line and column. The one reader of the files the
// commands write (--summary) and read (--sim-config).
func ReadJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	err = dec.Decode(v)
	if err == nil {
		if _, terr := dec.Token(); terr != io.EOF {
			err = errors.New("more than one JSON document")
		}
	}
	if errors.Is(err, io.ErrUnexpectedEOF) {
		err = fmt.Errorf("truncated: %w", err)
	}
	if err != nil {
		if off, ok := jsonpos.Offset(data, err); ok {
			l, c := jsonpos.Position(data, off)
			return fmt.Errorf("%s:%d:%d: %w", path, l, c, err)
		}
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// writeFileAtomic writes data to path through a temporary file in its
// folder, renamed over it, with the data file mode.
func writeFileAtomic(path string, data []byte) (err error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, blob.DirPerm); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	tmp, err := os.CreateTemp(dir, ".summary-*")
	if err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	defer func() {
		if err != nil {
			os.Remove(tmp.Name())
		}
	}()
	_, werr := tmp.Write(data)
	err = errors.Join(werr, blob.Publish(tmp), tmp.Close())
	if err != nil {
		return fmt.Errorf("summary %s: %w", path, err)
	}
	if err = os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("summary: %w", err)
	}
	return nil
}

// wantsVersion reports whether args ask for the version: a -version or
// --version before the flags end ("--"). Every command and subcommand
// takes it; it is not one of their flags.
func wantsVersion(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-version", "--version":
			return true
		}
	}
	return false
}
