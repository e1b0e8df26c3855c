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
// and announces both in every answer (the Docket-Limits header, "calls=N,
// parked=M"). The client bounds its own calls to each server by them: a
// call beyond the bound waits in the client for a slot (within its
// context) instead of being refused, and waiting claims are bounded apart
// from the other calls, so that claims waiting for work never hold up a
// worker's heartbeats and completions. A refusal for being over a limit
// (other clients with the same token hold the rest) took nothing: the
// call is tried again with backoff, and if every try is refused its error
// matches ErrOverLimit (and ErrUnavailable).
//
// Coalescing. Concurrent calls of one kind (Enqueue, Complete, Fail,
// Heartbeat, CompleteAndClaim) that goroutines of a client make to one
// server share requests, as committers share a log's fsync: a call goes
// out at once, alone, when none of its kind is in flight to the server;
// those made while one is in flight gather and go out together, in one
// request of the server's Each calls (docket.v1.Pipeline), when it returns
// (a full request, 256 calls or about 8 MiB, goes at once; a call over 256
// KiB always goes alone; at most four requests of a kind are in flight to
// a server). No timer is involved: a lone caller waits for nothing, and
// many callers pay one HTTP round trip per request instead of one each,
// which on a small machine is most of a remote call's CPU. Each call keeps
// its own semantics: the server runs it as it would alone (its
// validation, permissions, idempotency key, commit), its result or error
// is its own and is the error it would have got alone, and the items of a
// request are not one transaction. Each call honours its context: one
// whose context ends before its request goes out leaves it and returns
// the context's error; once sent, it is handled as a call alone cut after
// sending (repeated only when that is safe, as above). Against a server
// of an older build, which has no Each calls, the client makes the calls
// alone, and tries an Each call again a minute later (the server may have
// been upgraded). Options.NoCoalesce turns coalescing off.
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
