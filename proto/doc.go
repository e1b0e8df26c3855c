// Package proto holds the schema of docket's network API (docket/v1/*.proto,
// package docket.v1) and the code generated from it: the messages in
// docket/v1 (package docketv1) and the connect-go clients and handlers in
// docket/v1/docketv1connect. The services are docket.v1.Queues,
// docket.v1.KV and docket.v1.Admin; they mirror engine.API one method per
// RPC. The server package serves them and the client package calls them.
//
// Regenerate with `go generate ./proto/...`: it runs buf v1.65.0,
// protoc-gen-go and protoc-gen-connect-go at the versions tools/go.mod pins,
// and CI fails when the committed code differs from what it generates.
package proto
