package main

import (
	"go/parser"
	"go/token"
	"strings"
	"testing"
)

func TestFlattenImports(t *testing.T) {
	src := `package p

import (
	"fmt"
	// a comment

	x "strings"
	_ "embed"
)

import "os"

func f() { fmt.Println(x.ToUpper(os.Args[0])) } // import (
`
	got := string(flattenImports([]byte(src)))
	want := `package p


import "fmt"


import x "strings"
import _ "embed"


import "os"

func f() { fmt.Println(x.ToUpper(os.Args[0])) } // import (
`
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
	if strings.Count(got, "\n") != strings.Count(src, "\n") {
		t.Errorf("line count changed")
	}
	// The result is still Go with the same imports.
	f, err := parser.ParseFile(token.NewFileSet(), "p.go", got, parser.ImportsOnly)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for _, im := range f.Imports {
		paths = append(paths, im.Path.Value)
	}
	if strings.Join(paths, " ") != `"fmt" "strings" "embed" "os"` {
		t.Errorf("imports %v", paths)
	}
}
