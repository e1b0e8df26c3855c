package main

import "testing"

// TestRecordUpToDate: the committed decorator is what the generator
// writes from engine's interfaces today; a method added to one of them
// fails here until `go generate ./internal/enginetest/` is run.
func TestRecordUpToDate(t *testing.T) {
	upToDate(t, generateRecord, "../../engine", "../enginetest/record/record_gen.go", "go generate ./internal/enginetest/")
}
