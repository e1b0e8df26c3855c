// Command gen writes docket's generated Go from what is written once:
//
//	gen rpc      the network layers' mechanical parts from the proto
//	             services (run by go generate ./proto/...)
//	gen aliases  engine's names of package dockettype (go generate ./engine/)
//	gen record   the recording engine.API of the parity tests
//	             (go generate ./internal/enginetest/)
//	gen docs     the documentation of engine.Queue's methods for the task
//	             actions (go generate ./internal/taskaction/)
//
// `go generate ./...` runs all four.
package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

var commands = map[string]func(args []string) error{
	"rpc":     rpcCmd,
	"aliases": aliasesCmd,
	"record":  recordCmd,
	"docs":    docsCmd,
}

func main() {
	if len(os.Args) < 2 || commands[os.Args[1]] == nil {
		fmt.Fprintln(os.Stderr, "usage: gen rpc|aliases|record|docs [flags]")
		os.Exit(2)
	}
	if err := commands[os.Args[1]](os.Args[2:]); err != nil {
		fmt.Fprintf(os.Stderr, "gen %s: %v\n", os.Args[1], err)
		os.Exit(1)
	}
}

// writeGenerated writes what gen returns to out, and nothing on an error.
func writeGenerated(out string, gen func() ([]byte, error)) error {
	b, err := gen()
	if err != nil {
		return err
	}
	return os.WriteFile(out, b, 0o644)
}

// parseFiles parses the non-test Go files of dir, in the order of their
// names, whatever their package (the caller looks).
func parseFiles(fset *token.FileSet, dir string, mode parser.Mode) ([]*ast.File, error) {
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		return nil, err
	}
	sort.Strings(names)
	var files []*ast.File
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, mode)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
	}
	return files, nil
}
