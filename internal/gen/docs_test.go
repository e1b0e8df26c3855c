package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDocsUpToDate: the committed table is what the generator writes from
// engine.Queue today; a method documented anew fails here until
// `go generate ./internal/taskaction/` is run.
func TestDocsUpToDate(t *testing.T) {
	upToDate(t, generateDocs, "../../engine", "../taskaction/docs_gen.go", "go generate ./internal/taskaction/")
}

// TestDocsOfQueue: each documented method of Queue gets its comment as
// one paragraph; an undocumented method, an embedded interface and the
// methods of other interfaces get nothing; a package without Queue, or
// whose Queue documents nothing, is an error.
func TestDocsOfQueue(t *testing.T) {
	dir := t.TempDir()
	write := func(src string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "api.go"), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(`package engine

type Other interface {
	// Hidden is not Queue's.
	Hidden() error
}

type Queue interface {
	Other
	// Move moves a task
	// to "elsewhere".
	//
	// It changes nothing on an error.
	Move(id uint64) error
	Plain() error
}
`)
	b, err := generateDocs(dir)
	if err != nil {
		t.Fatal(err)
	}
	src := string(b)
	if !strings.Contains(src, `"Move": "Move moves a task to \"elsewhere\". It changes nothing on an error.",`) {
		t.Fatalf("Move's doc is not one paragraph:\n%s", src)
	}
	for _, not := range []string{"Plain", "Hidden", "Other"} {
		if strings.Contains(src, `"`+not+`"`) {
			t.Errorf("%s has an entry:\n%s", not, src)
		}
	}
	write("package engine\n\ntype Queue interface {\n\tPlain() error\n}\n")
	if _, err := generateDocs(dir); err == nil || !strings.Contains(err.Error(), "documents none") {
		t.Fatalf("a Queue without docs: %v", err)
	}
	write("package engine\n\ntype API interface{}\n")
	if _, err := generateDocs(dir); err == nil || !strings.Contains(err.Error(), "no interface Queue") {
		t.Fatalf("no Queue: %v", err)
	}
}
