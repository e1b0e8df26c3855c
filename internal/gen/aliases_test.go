package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// upToDate fails t unless the committed file is what gen writes from dir
// today; generate is the command that writes it again.
func upToDate(t *testing.T, gen func(dir string) ([]byte, error), dir, file, generate string) {
	t.Helper()
	want, err := gen(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s is out of date: run %s", file, generate)
	}
}

// TestAliasesUpToDate fails when engine's names of dockettype are not
// what the generator writes from dockettype as it is.
func TestAliasesUpToDate(t *testing.T) {
	upToDate(t, generateAliases, filepath.Join("..", "..", "dockettype"),
		filepath.Join("..", "..", "engine", "dockettype_gen.go"), "go generate ./engine/")
}

// TestGenerateNamesEveryKind checks each kind of exported declaration is
// named: a type, a variable, a constant (in a group with an unexported
// one) and a function with its documentation and a variadic parameter.
func TestAliasesNameEveryKind(t *testing.T) {
	dir := t.TempDir()
	src := `package dockettype

type Thing struct{}
type hidden int

var ErrThing = error(nil)

const (
	A = 1
	b = 2
)

// Join joins.
func Join(sep string, parts ...string) string { return "" }

func (Thing) Method() {}
func private() {}
`
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := generateAliases(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := string(out)
	for _, want := range []string{
		"Thing = dockettype.Thing", "ErrThing = dockettype.ErrThing", "A = dockettype.A",
		"// Join joins.\nfunc Join(sep string, parts ...string) string {\n\treturn dockettype.Join(sep, parts...)\n}",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("generated code lacks %q:\n%s", want, s)
		}
	}
	for _, not := range []string{"hidden", "dockettype.b", "Method", "private"} {
		if strings.Contains(s, not) {
			t.Errorf("generated code names the unexported or a method %q", not)
		}
	}
}

// TestGenerateRefusesAnotherPackage checks a directory of another package
// is refused rather than aliased.
func TestAliasesRefuseAnotherPackage(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x.go"), []byte("package other\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := generateAliases(dir); err == nil {
		t.Fatal("a package other than dockettype was aliased")
	}
}
