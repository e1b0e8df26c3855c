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
	"flag"
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
	"aliases": fileCmd("aliases", "src", "../dockettype", "the directory of package dockettype", "dockettype_gen.go", generateAliases),
	"record":  fileCmd("record", "engine", "engine", "the directory of package engine", "record_gen.go", generateRecord),
	"docs":    fileCmd("docs", "engine", "engine", "the directory of package engine", "docs_gen.go", generateDocs),
}

// fileCmd is a command that writes, to the file its -o flag names (out by
// default), what gen returns for the directory its flag dirFlag names
// (dir by default; usage says what it is).
func fileCmd(name, dirFlag, dir, usage, out string, gen func(dir string) ([]byte, error)) func(args []string) error {
	return func(args []string) error {
		fs := flag.NewFlagSet(name, flag.ExitOnError)
		d := fs.String(dirFlag, dir, usage)
		o := fs.String("o", out, "the file to write")
		fs.Parse(args)
		return writeGenerated(*o, func() ([]byte, error) { return gen(*d) })
	}
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

// engineInterfaces parses the non-test files of package engine in dir
// (with mode's options) and returns its interface types by name.
func engineInterfaces(dir string, mode parser.Mode) (map[string]*ast.InterfaceType, error) {
	files, err := parseFiles(token.NewFileSet(), dir, mode)
	if err != nil {
		return nil, err
	}
	ifaces := map[string]*ast.InterfaceType{}
	for _, f := range files {
		if f.Name.Name != "engine" {
			continue
		}
		ast.Inspect(f, func(n ast.Node) bool {
			if ts, ok := n.(*ast.TypeSpec); ok {
				if it, ok := ts.Type.(*ast.InterfaceType); ok {
					ifaces[ts.Name.Name] = it
				}
			}
			return true
		})
	}
	return ifaces, nil
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
