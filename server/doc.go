// Package server serves a docket DB over the network: the connect-go
// handlers of package proto (gRPC, gRPC-Web and JSON over HTTP/1.1 from one
// net/http handler), bearer-token authentication mapped to engine callers,
// TLS and optional client certificates, limits against hostile input, health
// endpoints, and a drain that answers in-flight calls before the engine
// closes.
//
// Authentication. A tokens file lists, one per line, the SHA-256 of a bearer
// token, the caller id it stands for, and the caller's grants:
//
//	# sha256(token)                                                    caller    grants
//	sha256:5e88489...d1542d8   billing   acme/prod:enqueue+work acme/*:read
//
// A grant is PROJECT/SCOPE:PERMS where PROJECT or SCOPE may be "*" and PERMS
// joins permission names with "+" (enqueue, work, read, admin, kv-read,
// kv-write, or all). The server never stores tokens, only their hashes; the
// file is re-read on SIGHUP (Tokens.Reload) and a file that does not parse
// leaves the previous table in force. The same table is the engine's
// Authorizer, so the per-namespace permissions are the engine's own.
package server
