// Package docketv1 holds the messages of docket's network API, generated
// from the .proto files beside it by `go generate ./proto/...`; the
// connect-go clients and handlers are in docketv1connect. The messages
// mirror the types of package engine, and internal/wire converts between
// them. Fields marked raw_json (payloads, progress, results) are JSON
// documents kept as bytes: exact in protobuf, written as JSON values by the
// server's JSON codec (see types.proto for why).
package docketv1
