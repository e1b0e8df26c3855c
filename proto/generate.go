package proto

// internal/gen's rpc command writes, from the schema, the Call and Reply
// oneofs of docket/v1/session.proto and the mechanical parts of the server
// and client (server/rpc_gen.go, server/session_routes_gen.go,
// client/queue_gen.go); then buf compiles the schema itself (no protoc
// needed). The tools run from tools/go.mod, outside the workspace, so their
// versions are the pinned ones.
//go:generate go run ../internal/gen rpc -root ..
//go:generate env GOWORK=off go run -modfile=../tools/go.mod github.com/bufbuild/buf/cmd/buf generate
