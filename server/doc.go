// Package server serves a docket DB over the network: the connect-go
// handlers of package proto (gRPC, gRPC-Web and JSON over HTTP/1.1 from one
// net/http handler), bearer-token authentication mapped to engine callers,
// TLS and optional client certificates, limits against hostile input, health
// endpoints, and a drain that answers in-flight calls before the engine
// closes.
//
// Calls. Each RPC of docket.v1.Queues, docket.v1.Controls (the queue
// controls: Pause, Resume, SetLimits, Settings, Partitions) and docket.v1.KV runs the
// engine method of the same name on the caller's view of the DB (DB.As), so the
// permissions, limits and errors are the engine's own; an engine error
// answers with the connect code of its sentinel and a docket.v1.Error
// detail naming it. ClaimWait is a long poll parked in the engine's wait,
// bounded by the request's max_wait, Options.MaxWait and the call's
// deadline, and answered with no leases when a drain starts. Of
// docket.v1.Admin, Queues shows the caller's readable namespaces; Stats,
// Checkpoint and Verify concern every namespace and need, with tokens, the
// admin permission on */*.
//
// Each calls. docket.v1.Pipeline's EnqueueEach, CompleteEach, FailEach,
// HeartbeatEach and CompleteAndClaimEach carry many independent calls in
// one request (the client sends its goroutines' concurrent calls this way,
// rpc_each.go). Each item runs as its single call would: the same decoder
// and engine method on the caller's view, so its own validation,
// permissions, fencing, idempotency key and commit; an item refused fails
// alone, answered in its result with the single call's code, message,
// detail and, on a node that is not the leader, the leader's URL. The
// enqueues go through the engine's pipelined path (EnqueueAsync), so that
// they share sync rounds; the calls on a lease run on goroutines of their
// own, at most 64 at once per request. A request holds at most
// MaxEachItems items, and is answered once every item's outcome is as
// durable as the single call's answer would be.
//
// Sessions. The Go client sends its calls over sessions
// (proto/docket/v1/session.proto, framing in internal/session): one
// long-lived connection on the API port carrying many calls in flight,
// answered in any order. In cleartext the listener (Serve) reads a new
// connection's first bytes on the connection's own goroutine, within
// BodyTimeout, and hands one that begins with the preface "DKT" 0x01 to the
// session server, every other to net/http with its bytes put back; under
// TLS a client asks for the ALPN protocol "docket/1" instead. Each side
// then writes frames: a uvarint length and one protobuf message. The
// client's first frame is a Hello (within BodyTimeout, at most 16 KiB):
// the protocol version (1), the bearer token, whether to read stale on a
// node of a cluster, the client's name. The server answers with a Welcome
// (the session's id, the caller's MaxCalls and MaxParked, the largest frame
// it reads: Options.MaxRequestBytes), or refuses the Hello with a Reply of
// id 0 carrying the error (Unauthenticated, Unimplemented for another
// version) and closes. Then the client writes Calls (an id of its choice
// and one request of the Queues, KV, Controls or Pipeline services or
// Admin.Queues) and the server Replies (the id and the response, or the
// ItemError the unary call would have been answered with).
//
// Each Call runs as the unary call would (the same function, on the
// caller's view, so the same validation, permissions, limits and errors)
// and takes one of the caller's MaxCalls slots until it is answered; one
// past the limit is answered ResourceExhausted. The server reads a frame,
// then every whole frame already buffered, and runs that batch in order
// with its durability waits deferred to one wait for the batch
// (engine.DeferDurable), so that the batch's commits share one sync of
// the log; the next batch is read and run while that sync is awaited, and
// the replies are written once it is done. On a replicated DB, where each
// commit waits for the replicated log, a batch's calls run at once (64 at
// most per session). A ClaimWait waits on its own (a MaxParked slot, the
// unary call's bounds, drain and revocation) and is answered when its wait
// ends; an Abandon with its id ends the wait early, answered with what it
// has. The session ends when a frame cannot be read: its length is not a
// uvarint, it is over the limit (checked before anything is allocated),
// it does not parse, or its bytes stop arriving for BodyTimeout once its
// first came; frames over 1 MiB are read only with the large-body slot an
// HTTP body would take. A call over the engine's element limits fails
// alone (InvalidArgument), as the unary request would. Replies must be
// taken by the client: a write that makes no progress for 30 s ends the
// session. When Serve stops (and when a reload of the tokens revokes the
// session's token) the session reads no more calls, sends a GoingAway (a
// Reply of id 0, which a client that knows no call 0 ignores) naming the
// highest id of a call it read and runs (the calls of higher ids were not
// run: the client may send them again elsewhere), answers those it read
// (waiting claims end empty on a drain, Unauthenticated on a revocation),
// and closes; a call of a lower id that was not answered (the grace ran
// out) has an unknown outcome. A Call's timeout_micros (what is left of
// the client's deadline) bounds the call from when it is read, as the
// unary call's Connect-Timeout-Ms header does; a call whose time ran out
// before it ran is answered DeadlineExceeded without running. A call's request id in the logs is the session's id, "-", and
// the call's id.
//
// Request ids. Every call gets an id, a random prefix per Server and a
// counter (unique across restarts), sent back in the Docket-Request-Id
// header of its answer and logged as "req" on every line about the call:
// a failure or refusal (one line each, see Options.Logger), a call without
// a valid token, one over the caller's limits, a panic.
//
// Clusters. With Options.Cluster (Config.OpenReplica in Run) the server is
// a node of a replicated docket: it serves docket.v1.Cluster (status,
// join, remove, leadership transfer), answers a call it cannot take for
// not being the leader with Unavailable and the leader's API URL in the
// Docket-Leader header, which the client follows, serves a read from the
// node's own state when the request asks for stale reads, and ends a
// parked ClaimWait when the leadership changes.
//
// Hostile input. The Host of a request to a loopback server must be one of
// its own names (HostGuard, against DNS rebinding). A call is
// authenticated before a byte of its body is read. A body must arrive
// within BodyTimeout and is at most Options.MaxRequestBytes
// (DefaultMaxRequestBytes; at most MaxRequestBytes, one commit of the
// engine's MaxCommitBytes and its framing), as sent and as it inflates
// (gzip, at most 32-fold past its first MiB); one over it is refused as
// soon as it passes it and its connection closed, and bodies past their
// first MiB are read one at a time. Before a request is decoded, its lists
// (packed ones by element) and maps are counted against the engine's
// limits; what does not decode is InvalidArgument. Headers must arrive
// within ReadHeaderTimeout, idle connections close after IdleTimeout, and
// each caller holds at most MaxCalls calls (taken once the request is
// read) and MaxParked waiting claims (which hold no call slot); every
// answer says both in the Docket-Limits header. A reload of the tokens
// ends the waiting claims of the tokens it revoked.
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
