package enginetest

// The recording decorator of package record is written from engine's
// interface declarations; run `go generate ./internal/enginetest/` after a
// method is added to one of them.
//go:generate go run ../gen record -engine ../../engine -o record/record_gen.go
