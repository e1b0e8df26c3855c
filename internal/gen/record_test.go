package main

import (
	"bytes"
	"os"
	"testing"
)

// TestGeneratedUpToDate: the committed decorator is what the generator
// writes from engine's interfaces today; a method added to one of them
// fails here until `go generate ./internal/enginetest/` is run.
func TestRecordUpToDate(t *testing.T) {
	want, err := generateRecord("../../engine")
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("../enginetest/record/record_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("internal/enginetest/record/record_gen.go is out of date: run go generate ./internal/enginetest/")
	}
}
