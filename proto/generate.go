package proto

// buf compiles the schema itself (no protoc needed); the tools run from
// tools/go.mod, outside the workspace, so their versions are the pinned ones.
//go:generate env GOWORK=off go run -modfile=../tools/go.mod github.com/bufbuild/buf/cmd/buf generate
