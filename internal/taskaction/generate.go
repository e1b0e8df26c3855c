package taskaction

// internal/gen's docs command writes methodDocs (docs_gen.go) from the
// declaration of engine.Queue.
//go:generate go run ../gen docs -engine ../../engine -o docs_gen.go
