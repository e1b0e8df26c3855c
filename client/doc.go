// Package client is docket's Go client: Dial returns an engine.API whose
// queues, KV and admin calls go over the network to `docket serve` (or a
// cluster of them), with the same option types and the same sentinel errors
// as the in-process DB, so the worker runtime and a program's own code run
// unchanged on either.
//
// Faults. The client follows the leader of a cluster (a node that cannot
// take a call names the leader, and the client moves there), moves to the
// next address when a server cannot be reached, and backs off between
// tries, within the caller's context. A call that was sent and got no
// answer is repeated only when a repeat is harmless: reads, enqueues that
// carry an idempotency key, and fenced calls (complete, fail, heartbeat,
// snooze), whose token makes a second delivery a no-op or ErrLeaseLost.
// Otherwise the call returns an error matching ErrOutcomeUnknown.
package client
