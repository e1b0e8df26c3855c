// Package client is docket's Go client: Dial returns a *Client, an
// engine.API whose queues, KV and list of queues go over the network to
// `docket serve` (or a cluster of them), with the same option types and the
// same sentinel errors as the in-process DB, so the worker runtime and a
// program's own code run unchanged on either:
//
//	c, err := client.Dial(ctx, "https://a:7070,https://b:7070", client.Options{Token: tok})
//	q := c.Queue(engine.NS("acme", "prod"), "emails")
//	w := worker.New(c, worker.Options{})
//
// Beyond engine.API the client has the operator's calls of the server's DB:
// Stats, Checkpoint, Verify (which need admin on */* when the server has
// tokens) and Health.
//
// Errors. An error the server's engine returned is rebuilt with the
// server's message and matches the same sentinel (errors.Is(err,
// engine.ErrLeaseLost)). engine.ErrClosed means this client was closed; a
// server that is stopping is not reported as closed but retried, then
// reported as ErrUnavailable, so a worker keeps going across a server's
// restart. A refused token is ErrUnauthenticated.
//
// Faults. The client follows the leader of a cluster (a node that cannot
// take a call names the leader, and the client moves there), moves to the
// next address when a server cannot be reached, and backs off between
// tries, within the caller's context. A call that was sent and got no
// answer is repeated only when a repeat is harmless: reads, enqueues whose
// tasks all carry an idempotency key and whose ops write no KV entry
// (a repeat is deduplicated), and fenced calls (complete, fail, heartbeat,
// snooze), whose token makes a second delivery a no-op answered with
// ErrLeaseLost, and the error then says the first try may have taken
// effect (it matches ErrOutcomeUnknown as well as engine.ErrLeaseLost).
// Otherwise (claims, cancel, redrive, KV writes) the call returns an error
// matching ErrOutcomeUnknown. ErrUnavailable means that no try reached a
// server that took it: nothing was done. Once a try of a call may have
// reached a server without an answer, the call ends with success, a
// server's answer, or an error matching ErrOutcomeUnknown, never
// ErrUnavailable: when its retries run out, even if the last try found
// no server, and when its context ends, during a try or a wait between
// tries (the error then matches the context's error too, so
// errors.Is(err, context.DeadlineExceeded) holds). A call whose context
// ends before any try was sent returns the context's error alone:
// nothing was done. Each try is bounded by Options.CallTimeout or what
// is left of the context's deadline, whichever is less; a try without an
// answer moves the client to the next server.
//
// Limits. A server bounds what one caller (one token) has in progress at
// once: calls (docket serve -max-calls) and waiting claims (-max-parked),
// and announces both when a session opens (Welcome) and in every unary
// answer (the Docket-Limits header, "calls=N, parked=M"). The client bounds its own calls to each server by them: a
// call beyond the bound waits in the client for a slot (within its
// context) instead of being refused, and waiting claims are bounded apart
// from the other calls, so that claims waiting for work never hold up a
// worker's heartbeats and completions. A refusal for being over a limit
// (other clients with the same token hold the rest) took nothing: the
// call is tried again with backoff, and if every try is refused its error
// matches ErrOverLimit (and ErrUnavailable).
//
// Transport. The calls of engine.API (queues, KV, the queue controls,
// the list of queues) go on a session: one long-lived connection to each
// server, on its API port (TCP after a 4-byte preface, or TLS with the
// ALPN protocol "docket/1"), carrying the calls of every goroutine of the
// client as frames, many in flight, each answered by its id as soon as
// its outcome is known, in any order (see proto/docket/v1/session.proto).
// A lone call costs one write and one read; under load one write carries
// the frames of every call that queued behind the last, so concurrent
// callers share system calls and round trips without waiting for one
// another. EnqueueAsync leaves its call in flight and returns a Pending
// at once, so one goroutine can keep many enqueues in flight (at most
// engine.DefaultMaxInFlight, and the server's bound on a caller's calls).
// Each call keeps its own semantics: the server runs it as the unary RPC,
// and its result or error is the one the RPC would have got. When a
// session's connection breaks, every call in flight on it was sent
// without an answer (repeated when that is harmless, as above, else
// ErrOutcomeUnknown), and the next call opens a new session, with the
// client's backoff. A server that stops says so first (GoingAway), naming
// the last call it read: the calls sent after it were not run, and go
// again as never sent (to the next server, or to this one once it is
// back), unkeyed enqueues and claims too; the client sends nothing more
// on that connection. Each call carries what is left of its deadline (or
// the try's bound, if less), which bounds the call on the server as the
// unary call's timeout header does. A ClaimWait whose context ends asks the server to end
// its wait (Abandon), and returns any lease the server took as it ended.
//
// Against a server that does not speak sessions (an older build: TLS
// without the protocol, or an HTTP answer to the preface), the client
// makes each call a unary RPC (connect over HTTP) and asks the server for
// a session again a minute later. A server that the environment reaches
// through an HTTP proxy (HTTP_PROXY, HTTPS_PROXY) gets unary RPCs, through
// the proxy. Options.Transport = TransportUnary
// makes every call a unary RPC; so do Options.HTTPClient and
// Options.JSON. The operator's calls (Stats, Checkpoint, Verify, Health,
// the cluster's) are always unary RPCs, as is a call whose context asks
// for stale reads (engine.WithStaleReads) on a client without
// Options.StaleReads.
//
// Workers. The worker runtime keeps going across a server's restart: it
// tries claims and the commits of outcomes again, with backoff, while they
// fail with these errors (see package worker). The client does not
// implement engine.LeaseWatcher: the server has no call that tells a
// client of a cancellation as it happens, so a worker on a client learns
// that a running task was cancelled from its next heartbeat, which the
// server refuses with ErrLeaseLost (at most QueueOptions.HeartbeatEvery
// later), where an in-process worker learns it at once.
//
// Time. Clock is the local system clock: due times, leases and backoff are
// decided by the server's clock, and what the worker runtime times with
// Clock (heartbeats, timeouts) are intervals. ClaimWait is a long poll:
// each round waits on the server (woken by the engine, not polling) for at
// most Options.PollWait, and the client asks again until work comes or the
// context ends.
package client
